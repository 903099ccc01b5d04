// kiln.toml: finding it, reading it with toml++, environment overrides, and `kiln config`'s
// listing.
#include "runtime/config.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <string_view>
#include <utility>

#include "cache/size.h"
#include "cache/store.h"
#include "runtime/config_keys.h"

extern char** environ;

namespace kiln::runtime {
namespace {

namespace fs = std::filesystem;
using namespace config_detail;

size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] != b[j - 1])});
      diagonal = above;
    }
  }
  return row[b.size()];
}

std::string last_component(const std::string& dotted) {
  size_t dot = dotted.rfind('.');
  return dot == std::string::npos ? dotted : dotted.substr(dot + 1);
}

// The valid name a misspelt `name` most likely meant: the closest by edit distance when close
// enough to be a typo, else a key with the same last name in another section ("[autotune]
// max_streams" means streaming.max_streams). `spell` turns a dotted key into the name the user
// wrote.
std::string closest(const std::string& name,
                    const std::function<std::string(const std::string&)>& spell, bool sections) {
  std::vector<std::string> candidates = sections ? section_names() : std::vector<std::string>{};
  for (const KeySpec& s : key_specs()) candidates.push_back(s.key);
  std::string best;
  size_t best_distance = SIZE_MAX;
  for (const std::string& c : candidates) {
    size_t d = edit_distance(name, spell(c));
    if (d < best_distance) best = c, best_distance = d;
  }
  size_t tolerance = std::max<size_t>(2, last_component(name).size() / 3);
  if (best_distance <= tolerance) return spell(best);
  for (const KeySpec& s : key_specs())
    if (spell(last_component(s.key)) == last_component(name)) return spell(s.key);
  return "";
}

// Sections are candidates in kiln.toml only: a variable always names a key.
std::string suggestion(const std::string& name,
                       const std::function<std::string(const std::string&)>& spell, bool sections) {
  std::string best = closest(name, spell, sections);
  return best.empty() ? "" : " (did you mean " + best + "?)";
}

class Reader {
 public:
  Reader(std::string file, fs::path root) : file_(std::move(file)), root_(std::move(root)) {
    config_.file = file_;
    config_.project_root = root_.string();
    for (const KeySpec& s : key_specs()) config_.sources[s.key] = "default";
  }

  // The keys of `table` (the section `prefix`), recursively.
  void read_table(const toml::table& table, const std::string& prefix) {
    for (auto&& [key, value] : table) {
      std::string dotted =
          prefix.empty() ? std::string(key.str()) : prefix + "." + std::string(key.str());
      if (const KeySpec* spec = find_key(dotted)) {
        if (auto reason = spec->apply(value, config_, root_))
          errors_.push_back({at(value), fmt::format("{}: error: {}: {}", where(value.source()),
                                                    dotted, *reason)});
        else
          config_.sources[dotted] = fmt::format("{}:{}", file_, value.source().begin.line);
      } else if (is_section(dotted)) {
        if (const toml::table* t = value.as_table())
          read_table(*t, dotted);
        else
          errors_.push_back(
              {at(value), fmt::format("{}: error: {}: expected a table, got {}",
                                      where(value.source()), dotted, describe(value))});
      } else {
        auto same = [](const std::string& s) { return s; };
        warnings_.push_back(
            {at(key), fmt::format("{}: warning: unknown {} {}{}", where(key.source()),
                                  value.is_table() ? "section" : "key", dotted,
                                  suggestion(dotted, same, true))});
      }
    }
  }

  // Settings of the environment only (no kiln.toml key): directories, the thread count, the rates'
  // source and the NVRTC library. A bad value is an error naming the variable.
  void read_environment_settings() {
    for (auto [name, field] : {std::pair{"KILN_DUMP", &Config::dump_dir},
                               std::pair{"KILN_RECORD", &Config::record_dir},
                               std::pair{"KILN_NVRTC_LIBRARY", &Config::nvrtc_library},
                               std::pair{"CUDA_HOME", &Config::cuda_home},
                               std::pair{"XDG_CACHE_HOME", &Config::xdg_cache_home},
                               std::pair{"HOME", &Config::home}})
      if (const char* text = std::getenv(name)) config_.*field = text;
    if (const char* text = std::getenv("KILN_NUM_THREADS")) {
      char* end = nullptr;
      const long v = std::strtol(text, &end, 10);
      if (end == text || *end != '\0' || v < 1 || v > 1024)
        errors_.push_back({kAfterFile, fmt::format("env KILN_NUM_THREADS: error: expected a thread "
                                                   "count from 1 to 1024, got \"{}\"", text)});
      else
        config_.num_threads = static_cast<int>(v);
    }
    for (auto [name, field] : {std::pair{"KILN_CPU_RATES", &Config::cpu_rates},
                               std::pair{"KILN_GPU_RATES", &Config::gpu_rates}}) {
      const char* text = std::getenv(name);
      if (!text) continue;
      if (std::string_view(text) == "measured" || std::string_view(text) == "reference")
        config_.*field = text;
      else
        errors_.push_back({kAfterFile, fmt::format("env {}: error: expected measured or reference, "
                                                   "got \"{}\"", name, text)});
    }
  }

  void read_environment() {
    read_environment_settings();
    for (const KeySpec& spec : key_specs()) {
      std::string name = env_name(spec.key);
      const char* text = std::getenv(name.c_str());
      if (!text) continue;
      std::unique_ptr<toml::node> value = env_value(spec.env_shape, text);
      if (auto reason = spec.apply(*value, config_, root_))
        errors_.push_back(
            {kAfterFile, fmt::format("env {}: error: {}: {}", name, spec.key, *reason)});
      else
        config_.sources[spec.key] = "env " + name;
    }
    std::vector<std::string> unknown;
    for (char** e = environ; e && *e; ++e) {
      std::string name(*e, std::strchr(*e, '=') ? std::strchr(*e, '=') - *e : std::strlen(*e));
      bool known = std::any_of(key_specs().begin(), key_specs().end(),
                               [&](const KeySpec& s) { return env_name(s.key) == name; });
      if (!known && looks_like_config_variable(name)) unknown.push_back(name);
    }
    std::sort(unknown.begin(), unknown.end());  // environ's order is not stable across runs
    for (const std::string& name : unknown)
      warnings_.push_back({kAfterFile, fmt::format("env {}: warning: unknown variable {}{}", name,
                                                   name, suggestion(name, env_name, false))});
  }

  void syntax_error(const toml::parse_error& e) {
    errors_.push_back({{0, 0}, fmt::format("{}: error: {}", where(e.source()), e.description())});
  }

  Expected<LoadedConfig> result() && {
    if (!errors_.empty()) {
      std::string message;
      for (const std::string& e : in_file_order(errors_))
        message += (message.empty() ? "" : "\n") + e;
      return make_error(message);
    }
    return LoadedConfig{std::move(config_), in_file_order(warnings_)};
  }

 private:
  std::string where(const toml::source_region& at) const {
    return fmt::format("{}:{}:{}", file_, at.begin.line, at.begin.column);
  }

  // Messages are reported in the order of the file (toml++ iterates tables by key), then the
  // environment's, in the order they were found.
  using Position = std::pair<uint32_t, uint32_t>;
  using Message = std::pair<Position, std::string>;
  static constexpr Position kAfterFile = {UINT32_MAX, 0};
  static Position at(const auto& node) {
    return {node.source().begin.line, node.source().begin.column};
  }
  static std::vector<std::string> in_file_order(std::vector<Message> messages) {
    std::stable_sort(messages.begin(), messages.end(),
                     [](const Message& a, const Message& b) { return a.first < b.first; });
    std::vector<std::string> out;
    for (auto& m : messages) out.push_back(std::move(m.second));
    return out;
  }

  std::string file_;
  fs::path root_;
  Config config_;
  std::vector<Message> warnings_, errors_;
};

// toml++ parses nested tables, arrays and dotted keys recursively: a table header of 50 000 dotted
// parts overflowed its stack. kiln's settings nest two deep, so text nesting deeper than this is
// refused before it reaches the parser.
constexpr int kMaxTomlDepth = 64;

// The first line whose nesting (dotted key parts, plus the arrays and inline tables around them)
// passes kMaxTomlDepth, with that depth. Dots inside strings and comments, and between digits
// (1.5, times), are not key separators.
std::optional<std::pair<int, int>> too_deep(std::string_view text) {
  int line = 1, brackets = 0, dots = 0;
  auto digit = [&](size_t i) { return i < text.size() && text[i] >= '0' && text[i] <= '9'; };
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '"' || c == '\'') {  // a string: basic or literal, single- or multi-line
      const bool triple = text.substr(i, 3) == std::string(3, c);
      const std::string_view end = triple ? text.substr(i, 3) : text.substr(i, 1);
      size_t j = i + end.size();
      while (j < text.size() && text.substr(j, end.size()) != end) {
        if (text[j] == '\n') ++line;
        if (c == '"' && text[j] == '\\') ++j;  // an escape
        ++j;
      }
      i = std::min(text.size(), j + end.size()) - 1;
      continue;
    }
    if (c == '#') {
      while (i + 1 < text.size() && text[i + 1] != '\n') ++i;
      continue;
    }
    if (c == '\n') {
      ++line;
      dots = 0;
    } else if (c == ',') {
      dots = 0;
    } else if (c == '[' || c == '{') {
      ++brackets;
    } else if ((c == ']' || c == '}') && brackets > 0) {
      --brackets;
    } else if (c == '.' && !(i > 0 && digit(i - 1) && digit(i + 1))) {
      ++dots;
    }
    if (brackets + dots > kMaxTomlDepth) return std::pair{line, brackets + dots};
  }
  return std::nullopt;
}

Expected<LoadedConfig> read(const std::optional<std::string>& text, const std::string& file,
                            const fs::path& root) {
  Reader reader(file, root);
  if (text)
    if (std::optional<std::pair<int, int>> deep = too_deep(*text))
      return make_error(fmt::format(
          "{}:{}: error: nesting deeper than {} levels (tables, dotted keys, arrays); kiln's "
          "settings are at most 2 deep, as in [compilation] cache = \"local\"",
          file, deep->first, kMaxTomlDepth));
  if (text) {
    try {
      toml::table table = toml::parse(*text, file);
      reader.read_table(table, "");
    } catch (const toml::parse_error& e) {
      reader.syntax_error(e);
      return std::move(reader).result();  // nothing else is meaningful after a syntax error
    }
  }
  reader.read_environment();
  return std::move(reader).result();
}

Expected<std::string> read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    return make_error(fmt::format("{}: error: cannot read the configuration file", path.string()));
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// KILN_CONFIG, else the nearest kiln.toml in `dir` or above it; nullopt when there is none. (An
// empty KILN_CONFIG is unset, as shells and CI runners leave a variable set to nothing.)
Expected<std::optional<fs::path>> find_config(const fs::path& dir) {
  if (const char* env = std::getenv("KILN_CONFIG"); env && *env) {
    fs::path path = fs::path(env).is_absolute() ? fs::path(env) : dir / env;
    std::error_code ec;
    if (!fs::is_regular_file(path, ec))
      return make_error(fmt::format("env KILN_CONFIG: error: {} is not a file", path.string()));
    return std::optional<fs::path>(path.lexically_normal());
  }
  for (fs::path at = dir;; at = at.parent_path()) {
    std::error_code ec;
    if (fs::is_regular_file(at / "kiln.toml", ec)) return std::optional<fs::path>(at / "kiln.toml");
    if (at == at.parent_path()) return std::optional<fs::path>();
  }
}

}  // namespace

bool looks_like_config_variable(std::string_view name) {
  for (const char* prefix : {"KILN_FUSION_", "KILN_AUTOTUNE_", "KILN_COMPILATION_",
                             "KILN_STREAMING_", "KILN_MEMORY_", "KILN_CACHE_"})
    if (name.starts_with(prefix)) return true;
  return false;
}

Expected<LoadedConfig> load_config(const std::string& working_dir) {
  std::error_code ec;
  fs::path dir = fs::weakly_canonical(fs::absolute(working_dir, ec), ec);
  auto found = find_config(dir);
  if (!found) return std::unexpected(found.error());
  if (!*found) return read(std::nullopt, "", dir);
  auto text = read_file(**found);
  if (!text) return std::unexpected(text.error());
  return read(*text, (*found)->string(), (*found)->parent_path());
}

Config default_config(const std::string& project_root) {
  Config c;
  c.project_root = project_root;
  for (const KeySpec& s : key_specs()) c.sources[s.key] = "default";
  return c;
}

Expected<void> apply_setting(Config& c, const std::string& key, const std::string& value) {
  if (key == "threads") {
    int v = -1;
    auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), v);
    if (ec != std::errc() || end != value.data() + value.size() || v < 0 || v > 1024)
      return make_error(fmt::format("option threads: expected a thread count from 0 (every core) "
                                    "to 1024, got \"{}\"", value));
    c.num_threads = v;
    return {};
  }
  if (key == "cpu_rates" || key == "gpu_rates") {  // KILN_CPU_RATES, KILN_GPU_RATES
    if (value != "measured" && value != "reference")
      return make_error(fmt::format("option {}: expected measured or reference, got \"{}\"", key, value));
    (key == "cpu_rates" ? c.cpu_rates : c.gpu_rates) = value;
    return {};
  }
  const KeySpec* spec = find_key(key);
  if (!spec) {
    auto same = [](const std::string& s) { return s; };
    return make_error(fmt::format("option {}: unknown key{}", key, suggestion(key, same, false)));
  }
  std::unique_ptr<toml::node> node = env_value(spec->env_shape, value);
  if (auto reason = spec->apply(*node, c, c.project_root))
    return make_error(fmt::format("option {}: {}", key, *reason));
  c.sources[key] = "option";
  return {};
}

Expected<LoadedConfig> parse_config(const std::string& text, const std::string& file) {
  std::error_code ec;
  fs::path root = fs::absolute(file, ec).parent_path().lexically_normal();
  return read(text, file, root);
}

std::string print_config(const Config& c) {
  std::string out = c.file.empty() ? "# no kiln.toml found: defaults and environment overrides\n"
                                   : fmt::format("# configuration file: {}\n", c.file);
  out += fmt::format("# project root: {}\n", c.project_root);
  std::vector<std::pair<std::string, std::string>> lines;
  size_t width = 0;
  for (const KeySpec& spec : key_specs()) {
    lines.emplace_back(spec.key + " = " + spec.print(c), c.sources.at(spec.key));
    width = std::max(width, lines.back().first.size());
  }
  for (const auto& [setting, source] : lines)
    out += fmt::format("{:<{}}  # {}\n", setting, width, source);
  return out;
}

Expected<std::uint64_t> parse_byte_size(const std::string& text) {
  // One size syntax for kiln.toml and the cache's own tools.
  auto bytes = cache::parse_size(text);
  if (!bytes)
    return make_error(fmt::format(
        "cache.max_size: expected a size such as \"512MiB\" or \"2GiB\", got \"{}\"", text));
  return static_cast<std::uint64_t>(*bytes);
}

std::string cache_scope_path(const CacheScope& scope, const Config& config) {
  if (scope.kind == "local") return cache::local_scope_path(config.project_root);
  if (scope.kind == "target") return cache::target_scope_path(config.xdg_cache_home, config.home);
  if (scope.kind == "global") return cache::global_scope_path(config.xdg_cache_home, config.home);
  if (scope.kind == "file") return scope.path;
  return "";  // none
}

Expected<CacheScope> parse_cache_scope(std::string_view text) {
  if (text == "local" || text == "target" || text == "global" || text == "none")
    return CacheScope{std::string(text), ""};
  if (text.starts_with("file=") && text.size() > 5) return CacheScope{"file", std::string(text.substr(5))};
  return make_error(fmt::format("'{}' is not a cache scope; expected local, target, global or file=PATH", text));
}

}  // namespace kiln::runtime
