// `kiln cache`: look into and maintain a kernel cache store (stats, list, show, explain, prune,
// verify, export, import, clear) in one of the scopes of DESIGN.md §8.
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iterator>

#include <fmt/format.h>

#include "cache/key_parts.h"
#include "cache/size.h"
#include "cache/store.h"
#include "tools/commands.h"

namespace kiln::tools {
namespace {

constexpr const char* kDefaultMaxSize = "2GiB";  // the [cache] max_size default of kiln.toml

}  // namespace

Expected<std::string> cache_scope_path(const std::string& scope) {
  if (scope == "global") return cache::global_scope_path();
  if (scope == "target") return cache::target_scope_path();
  if (scope == "local")
    return cache::local_scope_path(
        cache::find_project_root(std::filesystem::current_path().string()));
  if (scope.starts_with("file=") && scope.size() > 5) return scope.substr(5);
  return make_error(fmt::format(
      "--cache: '{}' is not a cache scope; expected local, target, global or file=PATH", scope));
}

namespace {

std::string format_time(int64_t unix_seconds) {
  std::time_t t = static_cast<std::time_t>(unix_seconds);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M:%S", &tm);
  return buf;
}

Expected<cache::KeyParts> read_key_parts(const std::string& file) {
  std::ifstream in(file);
  if (!in) return make_error(fmt::format("--key-parts: cannot read {}", file));
  std::string text{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  auto parts = cache::parts_from_json(text);
  if (!parts || parts->empty())
    return make_error(fmt::format(
        "--key-parts {}: expected a non-empty JSON array of [name, value] string pairs", file));
  return cache::KeyParts{*parts};
}

// Multi-line values (kernel IR, sources) are printed as indented blocks.
void print_field(const std::string& name, const std::string& value) {
  if (value.find('\n') == std::string::npos) {
    fmt::print("  {}: {}\n", name, value);
    return;
  }
  fmt::print("  {}:\n", name);
  size_t start = 0;
  while (start < value.size()) {
    size_t end = value.find('\n', start);
    if (end == std::string::npos) end = value.size();
    fmt::print("    {}\n", value.substr(start, end - start));
    start = end + 1;
  }
}

int stats(cache::Store& store) {
  cache::Stats s = store.stats();
  fmt::print("cache: {}\n", s.path);
  if (!s.problem.empty()) fmt::print("unusable: {}\n", s.problem);
  if (s.schema_version == 0 && s.problem.empty())
    fmt::print("file: none yet\n");
  else
    fmt::print("file: {} ({} bytes), journal {}, schema {}\n", cache::format_size(s.bytes), s.bytes,
               s.journal_mode, s.schema_version);
  fmt::print("entries: {} kernels, {} plans, {} autotune\n", s.kernels, s.plans, s.autotune);
  fmt::print("hits: {}\n", s.hits);
  return 0;
}

int list(cache::Store& store) {
  for (cache::Table t : cache::kAllTables)
    for (const cache::Entry& e : store.list(t))
      fmt::print("{:<8} {} {:>10} {:>6} hits  {}\n", cache::table_name(t), e.key, e.size, e.hits,
                 format_time(e.last_used));
  return 0;
}

int show(cache::Store& store, const std::string& key) {
  auto e = store.show(key);
  if (!e) return report_error(fmt::format("no entry with key {} in cache {}", key, store.path()));
  fmt::print("key: {}\ntable: {}\nsize: {} bytes ({} bytes of value)\nhits: {}\n", e->key,
             cache::table_name(e->table), e->size, e->value.size(), e->hits);
  fmt::print("created: {}\nlast used: {}\nparts:\n", format_time(e->created),
             format_time(e->last_used));
  for (const auto& [name, value] : e->parts) print_field(name, value);
  fmt::print("metadata: {}\n", e->metadata);
  if (!e->source.empty())
    fmt::print("source:\n{}{}", e->source, e->source.ends_with('\n') ? "" : "\n");
  return 0;
}

int explain(cache::Store& store, const CacheOptions& o) {
  if (o.key_parts.empty()) return report_error("cache explain: --key-parts FILE is required");
  auto table = cache::parse_table(o.table);
  if (!table)
    return report_error(
        fmt::format("--table: '{}' is not a table; expected kernels, plans or autotune", o.table));
  auto key = read_key_parts(o.key_parts);
  if (!key) return report_error(key.error().message);
  fmt::print("key {} in {}:\n{}\n", key->digest(), o.table, store.explain(*table, *key).text());
  return 0;
}

int prune(cache::Store& store, int64_t max_size) {
  int64_t freed = store.prune(max_size);
  fmt::print("freed {} ({} bytes); cache {} is now {}\n", cache::format_size(freed), freed,
             store.path(), cache::format_size(store.stats().bytes));
  return 0;
}

// Arguments the action needs, and none it would silently ignore.
Expected<void> check_arguments(const CacheOptions& o) {
  bool wants_argument = o.action == "show" || o.action == "export" || o.action == "import";
  if (wants_argument && o.argument.empty())
    return make_error(
        fmt::format("cache {}: expected {}", o.action, o.action == "show" ? "a KEY" : "a FILE"));
  if (!wants_argument && !o.argument.empty())
    return make_error(fmt::format("cache {}: unexpected argument '{}'", o.action, o.argument));
  if (!o.max_size.empty() && o.action != "prune")
    return make_error(fmt::format("cache {}: --max-size is only for prune", o.action));
  if (auto size = cache::parse_size(o.max_size.empty() ? kDefaultMaxSize : o.max_size); !size)
    return make_error("--max-size: " + size.error().message);
  if (!o.key_parts.empty() && o.action != "explain")
    return make_error(fmt::format("cache {}: --key-parts is only for explain", o.action));
  return {};
}

int run_action(cache::Store& store, const CacheOptions& o) {
  if (o.action == "stats") return stats(store);
  if (o.action == "list") return list(store);
  if (o.action == "show") return show(store, o.argument);
  if (o.action == "explain") return explain(store, o);
  if (o.action == "prune") {
    // Checked before opening: a bad size must not create or touch the cache.
    auto max_size = cache::parse_size(o.max_size.empty() ? kDefaultMaxSize : o.max_size);
    KILN_CHECK(max_size.has_value()) << o.max_size;
    return prune(store, *max_size);
  }
  if (o.action == "verify") {
    auto ok = store.verify();
    if (!ok) return report_error(ok.error().message);
    cache::Stats s = store.stats();
    fmt::print("ok: {} ({} entries)\n", store.path(), s.kernels + s.plans + s.autotune);
    return 0;
  }
  if (o.action == "export" || o.action == "import") {
    bool is_export = o.action == "export";
    auto count = is_export ? store.export_bundle(o.argument) : store.import_bundle(o.argument);
    if (!count) return report_error(count.error().message);
    fmt::print("{} {} entr{} {} {}\n", is_export ? "exported" : "imported", *count,
               *count == 1 ? "y" : "ies", is_export ? "to" : "from", o.argument);
    return 0;
  }
  if (o.action == "clear") {
    store.clear();
    fmt::print("cleared {}\n", store.path());
    return 0;
  }
  return report_error(fmt::format("cache: unknown action '{}'", o.action));
}

}  // namespace

int cache_command(const CacheOptions& o) {
  if (auto ok = check_arguments(o); !ok) return report_error(ok.error().message);
  auto path = cache_scope_path(o.scope);
  if (!path) return report_error(path.error().message);
  // Looking never creates or rebuilds a cache: those actions open it read-only.
  bool writes = o.action == "prune" || o.action == "import" || o.action == "clear";
  auto store = cache::Store::open(*path, {.read_only = !writes});
  if (!store) return report_error(store.error().message);
  return run_action(**store, o);
}

}  // namespace kiln::tools
