// The kiln.toml schema: one entry per key with its check, its store into Config and its printer.
#include "runtime/config_keys.h"

#include "codegen/cpu/cpu_backend.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <climits>
#include <cmath>

namespace kiln::runtime::config_detail {
namespace {

namespace fs = std::filesystem;
using Reason = std::optional<std::string>;

std::string quote(const std::string& s) {
  std::string out = "\"";
  for (char ch : s) {
    if (ch == '"' || ch == '\\') out += '\\';
    out += ch;
  }
  return out + "\"";
}

std::string join(const std::vector<std::string>& items) {
  std::string out;
  for (const auto& item : items) out += (out.empty() ? "" : ", ") + item;
  return out;
}

// { file = "path" } with exactly that one key; the path made absolute against the project root.
std::optional<std::string> file_table(const toml::node& value, const fs::path& root) {
  const toml::table* t = value.as_table();
  if (!t || t->size() != 1) return std::nullopt;
  const toml::node* file = t->get("file");
  if (!file || !file->is_string() || file->as_string()->get().empty()) return std::nullopt;
  fs::path p = file->as_string()->get();
  return (p.is_absolute() ? p : root / p).lexically_normal().string();
}

std::string print_file(const std::string& path) {
  return "{ file = " + quote(path) + " }";
}

KeySpec bool_key(std::string key, bool Config::*member) {
  return {key, EnvShape::boolean,
          [member](const toml::node& v, Config& c, const fs::path&) -> Reason {
            if (!v.is_boolean()) return "expected true or false, got " + describe(v);
            c.*member = v.as_boolean()->get();
            return std::nullopt;
          },
          [member](const Config& c) { return std::string(c.*member ? "true" : "false"); }};
}

KeySpec count_key(std::string key, int Config::*member) {
  return {key, EnvShape::integer,
          [member](const toml::node& v, Config& c, const fs::path&) -> Reason {
            if (v.is_integer() && v.as_integer()->get() > INT_MAX)
              return fmt::format("expected an integer from 1 to {}, got {}", INT_MAX, describe(v));
            if (!v.is_integer() || v.as_integer()->get() < 1)
              return "expected an integer >= 1, got " + describe(v);
            c.*member = static_cast<int>(v.as_integer()->get());
            return std::nullopt;
          },
          [member](const Config& c) { return std::to_string(c.*member); }};
}

// A number above 0 (an integer is taken as one).
KeySpec positive_number_key(std::string key, double Config::*member) {
  return {key, EnvShape::number,
          [member](const toml::node& v, Config& c, const fs::path&) -> Reason {
            std::optional<double> x;
            if (v.is_floating_point()) x = v.as_floating_point()->get();
            if (v.is_integer()) x = static_cast<double>(v.as_integer()->get());
            if (!x || !std::isfinite(*x) || *x <= 0)
              return "expected a number above 0, got " + describe(v);
            c.*member = *x;
            return std::nullopt;
          },
          [member](const Config& c) { return fmt::format("{}", c.*member); }};
}

// A string member of Config, or the level of one of its loggers.
struct StringField {
  std::string Config::*member = nullptr;
  LoggerConfig Config::*logger = nullptr;
  std::string& of(Config& c) const { return member ? c.*member : (c.*logger).level; }
  const std::string& of(const Config& c) const { return member ? c.*member : (c.*logger).level; }
};

// A string from a fixed list.
KeySpec choice_key(std::string key, std::vector<std::string> allowed, StringField field) {
  return {key, EnvShape::text,
          [allowed, field](const toml::node& v, Config& c, const fs::path&) -> Reason {
            if (!v.is_string() ||
                std::find(allowed.begin(), allowed.end(), v.as_string()->get()) == allowed.end())
              return "expected one of " + join(allowed) + ", got " + describe(v);
            field.of(c) = v.as_string()->get();
            return std::nullopt;
          },
          [field](const Config& c) { return quote(field.of(c)); }};
}

KeySpec size_key(std::string key, std::string Config::*member) {
  return {key, EnvShape::text,
          [member](const toml::node& v, Config& c, const fs::path&) -> Reason {
            if (v.is_integer() && v.as_integer()->get() >= 0) {
              c.*member = std::to_string(v.as_integer()->get());
              return std::nullopt;
            }
            if (v.is_string() && parse_byte_size(v.as_string()->get()).has_value()) {
              c.*member = v.as_string()->get();
              return std::nullopt;
            }
            return "expected a size such as \"512MiB\" or \"2GiB\", got " + describe(v);
          },
          [member](const Config& c) { return quote(c.*member); }};
}

// compilation.cpu_target: "native" or a CPU name LLVM knows (checked here, so that a typo is an
// error naming the file and line rather than a failure when the cpu device opens).
KeySpec cpu_target_key(std::string key) {
  return {key, EnvShape::text,
          [](const toml::node& v, Config& c, const fs::path&) -> Reason {
            if (!v.is_string()) return "expected a string such as \"native\" or \"x86-64-v3\", got " + describe(v);
            if (std::string problem = codegen::CpuBackend::cpu_target_problem(v.as_string()->get());
                !problem.empty())
              return problem + ", got " + describe(v);
            c.cpu_target = v.as_string()->get();
            return std::nullopt;
          },
          [](const Config& c) { return quote(c.cpu_target); }};
}

KeySpec scope_key(std::string key, CacheScope Config::*member) {
  return {key, EnvShape::scope,
          [member](const toml::node& v, Config& c, const fs::path& root) -> Reason {
            if (v.is_string()) {
              const std::string& s = v.as_string()->get();
              if (s == "local" || s == "target" || s == "global" || s == "none") {
                c.*member = CacheScope{s, ""};
                return std::nullopt;
              }
            } else if (auto path = file_table(v, root)) {
              c.*member = CacheScope{"file", *path};
              return std::nullopt;
            }
            return "expected one of local, target, global, none or { file = \"path\" }, got " +
                   describe(v);
          },
          [member](const Config& c) {
            const CacheScope& s = c.*member;
            return s.kind == "file" ? print_file(s.path) : quote(s.kind);
          }};
}

std::optional<LogTarget> parse_target(const toml::node& v, const fs::path& root) {
  if (v.is_string()) {
    const std::string& s = v.as_string()->get();
    if (s == "stdout" || s == "stderr" || s == "log") return LogTarget{s, ""};
    return std::nullopt;
  }
  if (auto path = file_table(v, root)) return LogTarget{"file", *path};
  return std::nullopt;
}

KeySpec targets_key(std::string key, LoggerConfig Config::*member) {
  return {key, EnvShape::targets,
          [member](const toml::node& v, Config& c, const fs::path& root) -> Reason {
            const std::string allowed = "stdout, stderr, log or { file = \"path\" }";
            std::vector<LogTarget> targets;
            if (const toml::array* a = v.as_array()) {
              for (const toml::node& item : *a) {
                auto t = parse_target(item, root);
                if (!t)
                  return "expected each target to be one of " + allowed + ", got " + describe(item);
                targets.push_back(*t);
              }
            } else if (auto t = parse_target(v, root)) {
              targets.push_back(*t);  // one target without the brackets
            } else {
              return "expected an array of " + allowed + ", got " + describe(v);
            }
            (c.*member).targets = std::move(targets);
            return std::nullopt;
          },
          [member](const Config& c) {
            std::vector<std::string> items;
            for (const LogTarget& t : (c.*member).targets)
              items.push_back(t.kind == "file" ? print_file(t.path) : quote(t.kind));
            return "[" + join(items) + "]";
          }};
}

// level and targets of one component's logger.
void add_logger(std::vector<KeySpec>& specs, const std::string& section,
                LoggerConfig Config::*member, std::vector<std::string> levels) {
  specs.push_back(choice_key(section + ".logger.level", std::move(levels), {nullptr, member}));
  specs.push_back(targets_key(section + ".logger.targets", member));
}

StringField field(std::string Config::*member) {
  return {member, nullptr};
}

std::vector<KeySpec> make_specs() {
  const std::vector<std::string> verbose_levels = {"disabled", "minimal", "verbose"};
  const std::vector<std::string> full_levels = {"disabled", "minimal", "full"};
  std::vector<KeySpec> s;
  s.push_back(bool_key("fusion.enabled", &Config::fusion_enabled));
  s.push_back(count_key("fusion.beam_search.max_blocks", &Config::max_blocks));
  s.push_back(count_key("fusion.beam_search.beam_width", &Config::beam_width));
  add_logger(s, "fusion.beam_search", &Config::fusion_logger, {"disabled", "basic", "verbose"});
  s.push_back(bool_key("autotune.enabled", &Config::autotune_enabled));
  s.push_back(choice_key("autotune.level", {"minimal", "balanced", "extensive", "full"},
                         field(&Config::autotune_level)));
  s.push_back(scope_key("autotune.cache", &Config::autotune_cache));
  add_logger(s, "autotune", &Config::autotune_logger, full_levels);
  s.push_back(choice_key("compilation.check_mode", {"enforce", "validate", "auto"},
                         field(&Config::check_mode)));
  s.push_back(bool_key("compilation.verify_ir", &Config::verify_ir));
  s.push_back(scope_key("compilation.cache", &Config::compilation_cache));
  s.push_back(cpu_target_key("compilation.cpu_target"));
  s.push_back(choice_key("compilation.matmul_precision", {"highest", "high"},
                         field(&Config::matmul_precision)));
  add_logger(s, "compilation", &Config::compilation_logger, full_levels);
  s.push_back(count_key("streaming.max_streams", &Config::max_streams));
  s.push_back(choice_key("memory.persistent_memory", {"enabled", "disabled", "enforced"},
                         field(&Config::persistent_memory)));
  add_logger(s, "memory", &Config::memory_logger, verbose_levels);
  s.push_back(choice_key("shapes.policy", {"static", "dynamic", "automatic"},
                         field(&Config::shapes_policy)));
  s.push_back(bool_key("shapes.buckets", &Config::shapes_buckets));
  s.push_back(positive_number_key("shapes.max_slowdown", &Config::shapes_max_slowdown));
  s.push_back(size_key("cache.max_size", &Config::cache_max_size));
  s.push_back(bool_key("cache.read_only", &Config::cache_read_only));
  add_logger(s, "cache", &Config::cache_logger, verbose_levels);
  return s;
}

}  // namespace

const std::vector<KeySpec>& key_specs() {
  static const std::vector<KeySpec> specs = make_specs();
  return specs;
}

const KeySpec* find_key(const std::string& dotted) {
  for (const KeySpec& s : key_specs())
    if (s.key == dotted) return &s;
  return nullptr;
}

const std::vector<std::string>& section_names() {
  static const std::vector<std::string> names = {"fusion",
                                                 "fusion.beam_search",
                                                 "fusion.beam_search.logger",
                                                 "autotune",
                                                 "autotune.logger",
                                                 "compilation",
                                                 "compilation.logger",
                                                 "streaming",
                                                 "memory",
                                                 "memory.logger",
                                                 "shapes",
                                                 "cache",
                                                 "cache.logger"};
  return names;
}

bool is_section(const std::string& dotted) {
  const auto& names = section_names();
  return std::find(names.begin(), names.end(), dotted) != names.end();
}

std::string env_name(const std::string& dotted) {
  std::string out = "KILN_";
  for (char ch : dotted) out += ch == '.' ? '_' : static_cast<char>(std::toupper(ch));
  return out;
}

namespace {
std::unique_ptr<toml::node> env_target(const std::string& text) {
  if (text.starts_with("file=")) {
    auto t = std::make_unique<toml::table>();
    t->insert("file", text.substr(5));
    return t;
  }
  return std::make_unique<toml::value<std::string>>(text);
}
}  // namespace

std::unique_ptr<toml::node> env_value(EnvShape shape, const std::string& text) {
  switch (shape) {
    case EnvShape::integer: {
      int64_t v = 0;
      auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
      if (ec == std::errc() && end == text.data() + text.size() && !text.empty())
        return std::make_unique<toml::value<int64_t>>(v);
      break;
    }
    case EnvShape::number: {
      double v = 0;
      auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
      if (ec == std::errc() && end == text.data() + text.size() && !text.empty())
        return std::make_unique<toml::value<double>>(v);
      break;
    }
    case EnvShape::boolean:
      if (text == "true" || text == "false")
        return std::make_unique<toml::value<bool>>(text == "true");
      break;
    case EnvShape::scope:
      return env_target(text);
    case EnvShape::targets: {
      auto a = std::make_unique<toml::array>();
      size_t start = 0;
      while (start <= text.size()) {
        size_t comma = std::min(text.find(',', start), text.size());
        std::unique_ptr<toml::node> item = env_target(text.substr(start, comma - start));
        if (item->is_table())
          a->push_back(std::move(*item->as_table()));
        else
          a->push_back(item->as_string()->get());
        start = comma + 1;
      }
      return a;
    }
    case EnvShape::text:
      break;
  }
  return std::make_unique<toml::value<std::string>>(text);
}

std::string describe(const toml::node& value) {
  if (value.is_string()) return quote(value.as_string()->get());
  if (value.is_integer()) return std::to_string(value.as_integer()->get());
  if (value.is_floating_point()) return fmt::format("{}", value.as_floating_point()->get());
  if (value.is_boolean()) return value.as_boolean()->get() ? "true" : "false";
  // A table or an array inline, as written ({ file = "" }), cut at about 60 characters.
  if (value.is_table() || value.is_array()) {
    std::string out;
    if (const toml::table* t = value.as_table()) {
      for (const auto& [key, item] : *t) {
        out += (out.empty() ? "{ " : ", ") + std::string(key.str()) + " = " + describe(item);
        if (out.size() > 60) return out + ", ... }";
      }
      return out.empty() ? "{}" : out + " }";
    }
    for (const toml::node& item : *value.as_array()) {
      out += (out.empty() ? "[" : ", ") + describe(item);
      if (out.size() > 60) return out + ", ...]";
    }
    return out.empty() ? "[]" : out + "]";
  }
  return "a date or time";
}

}  // namespace kiln::runtime::config_detail
