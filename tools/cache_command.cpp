// `kiln cache`: look into and maintain a kernel cache store (stats, list, show, explain, prune,
// verify, export, import, clear) in one of the scopes of DESIGN.md §8; `export --for` bundles
// just what a workload reads.
#include <ctime>
#include <filesystem>
#include <unordered_set>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "cache/key_parts.h"
#include "cache/size.h"
#include "cache/store.h"
#include "ir/kg.h"
#include "runtime/config.h"
#include "runtime/device.h"
#include "runtime/entry_check.h"
#include "tools/commands.h"
#include "tools/workload.h"

namespace kiln::tools {
namespace {

constexpr const char* kDefaultMaxSize = "2GiB";  // the [cache] max_size default of kiln.toml

}  // namespace

Expected<std::string> cache_scope_path(const std::string& scope) {
  // The configuration (kiln.toml, KILN_COMPILATION_CACHE, XDG_CACHE_HOME) as `kiln run` reads it.
  auto config = runtime::load_config(std::filesystem::current_path().string());
  if (!config) return std::unexpected(config.error());
  if (scope.empty()) {
    const std::string path = runtime::cache_scope_path(config->config.compilation_cache, config->config);
    if (path.empty())
      return make_error(
          "no cache: compilation.cache is none (kiln.toml or KILN_COMPILATION_CACHE); name one with --cache");
    return path;
  }
  auto parsed = runtime::parse_cache_scope(scope);
  if (!parsed || parsed->kind == "none")
    return make_error(fmt::format(
        "--cache: '{}' is not a cache scope; expected local, target, global or file=PATH", scope));
  return runtime::cache_scope_path(*parsed, config->config);
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
  auto text = ir::read_text_file(file);
  if (!text) return make_error(fmt::format("--key-parts: {}", text.error().message));
  auto parts = cache::parts_from_json(*text);
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
  auto pruned = store.prune(max_size);
  if (!pruned) return report_error(pruned.error().message);
  fmt::print("freed {} ({} bytes); cache {} is now {} ({} bytes)\n", cache::format_size(pruned->freed),
             pruned->freed, store.path(), cache::format_size(pruned->bytes), pruned->bytes);
  return 0;
}

// Arguments the action needs, and none it would silently ignore.
Expected<void> check_arguments(const CacheOptions& o) {
  bool wants_argument = o.action == "show" || o.action == "export" || o.action == "import";
  if (o.action == "export" && o.argument.empty() && !o.for_paths.empty())
    return make_error(
        "cache export: expected a FILE before --for PATH... (which takes every path after it)");
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
  if (!o.for_paths.empty() && o.action != "export")
    return make_error(fmt::format("cache {}: --for is only for export", o.action));
  if (o.for_paths.empty())
    for (auto [given, flag] : {std::pair{o.target_given, "--target"},
                               {o.arch_given, "--arch"},
                               {o.autotune, "--autotune"},
                               {o.no_autotune, "--no-autotune"}})
      if (given)
        return make_error(fmt::format("cache {}: {} needs export --for PATH...", o.action, flag));
  if (o.arch_given && o.target != "cuda")
    return make_error(fmt::format("--arch applies to --target cuda, not {}", o.target));
  return {};
}

std::string plural(int64_t n, const char* one, const char* many) {
  return fmt::format("{} {}", n, n == 1 ? one : many);
}

// The `kiln warm` command line that fills `o.scope` with what the export lacked.
std::string warm_hint(const CacheOptions& o) {
  std::string flags;
  if (o.target != "cpu") flags += " --target " + o.target;
  if (o.target == "cuda") flags += " --arch " + o.arch;
  if (o.autotune) flags += " --autotune";
  if (o.no_autotune) flags += " --no-autotune";
  // Without --cache, kiln warm fills the cache kiln.toml names, as the export read it.
  if (!o.scope.empty()) flags += " --cache " + o.scope;
  return fmt::format("kiln warm{} {}", flags, fmt::join(o.for_paths, " "));
}

// `kiln cache export FILE --for PATH...`: a bundle of exactly the entries that runs of the
// workload's graphs read on the target (the union over graphs). When the cache lacks any, each is
// printed as `miss GRAPH: WHAT` and nothing is written.
int export_workload(const CacheOptions& o, const std::string& cache_path) {
  auto graphs = collect_graphs(o.for_paths);
  if (!graphs) return report_error(graphs.error().message);
  // kiln.toml still chooses the fuser, check mode and tuning level: they are part of the keys.
  auto options = workload_device_options("");
  if (!options) return report_error(options.error().message);
  options->cache_path = cache_path;
  options->cache_read_only = true;
  options->autotune = autotune_from(o.autotune, o.no_autotune, options->autotune);
  options->autotune_cache_path.clear();  // the decisions are bundled from the same store
  // Decisions are looked up, not made: a CUDA compiler gives the same keys as the device.
  auto device = open_target({.target = o.target, .arch = o.arch, .arch_given = o.arch_given},
                            std::move(*options));
  if (!device) return report_error(device.error().message);

  std::vector<std::string> digests, misses, errors;
  std::unordered_set<std::string> seen;
  int64_t per_table[std::size(cache::kAllTables)] = {};
  for (const std::string& path : *graphs) {
    ir::Graph g;
    auto outs = read_graph_outputs(g, path);
    if (!outs) {
      errors.push_back(outs.error().message);
      continue;
    }
    auto entries = (*device)->cache_entries(g, *outs);
    if (!entries) {
      errors.push_back(path + ": " + entries.error().message);
      continue;
    }
    for (const runtime::CacheEntryRef& e : *entries) {
      if (!e.present) {
        misses.push_back(fmt::format("{}: {}", path, e.what));
      } else if (seen.insert(e.digest).second) {
        digests.push_back(e.digest);
        ++per_table[static_cast<size_t>(e.table)];
      }
    }
  }
  for (size_t i = 0; i + 1 < errors.size(); ++i) report_error(errors[i]);
  if (!errors.empty()) return report_error(errors.back());
  if (!misses.empty()) {
    for (const std::string& m : misses) fmt::print("miss {}\n", m);
    return report_error(fmt::format(
        "cache {} lacks {} the workload reads; nothing exported (run `{}` first)", cache_path,
        plural(static_cast<int64_t>(misses.size()), "entry", "entries"), warm_hint(o)));
  }
  auto store = cache::Store::open(cache_path, {.read_only = true});
  if (!store) return report_error(store.error().message);
  auto count = (*store)->export_bundle(o.argument, &digests);
  if (!count) return report_error(count.error().message);
  if (*count != static_cast<int64_t>(digests.size())) {
    std::error_code ec;
    std::filesystem::remove(o.argument, ec);
    return report_error(fmt::format(
        "cache {} changed during the export ({} of {} entries found); {} removed, run it again",
        cache_path, *count, digests.size(), o.argument));
  }
  auto n = [&](cache::Table t) { return per_table[static_cast<size_t>(t)]; };
  fmt::print("exported {} ({}, {}, {} autotune) for {} to {}\n", plural(*count, "entry", "entries"),
             plural(n(cache::Table::plans), "plan", "plans"),
             plural(n(cache::Table::kernels), "kernel", "kernels"), n(cache::Table::autotune),
             plural(static_cast<int64_t>(graphs->size()), "graph", "graphs"), o.argument);
  return 0;
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
    auto ok = store.verify(runtime::cache_entry_problem);
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
    if (auto cleared = store.clear(); !cleared) return report_error(cleared.error().message);
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
  if (!o.for_paths.empty()) return export_workload(o, *path);
  // Looking never creates or rebuilds a cache: those actions open it read-only.
  bool writes = o.action == "prune" || o.action == "import" || o.action == "clear";
  if (writes) {
    // A shipped cache (cache.read_only) is not written by maintenance either.
    auto config = runtime::load_config(std::filesystem::current_path().string());
    if (!config) return report_error(config.error().message);
    if (config->config.cache_read_only)
      return report_error(
          fmt::format("cache {}: {} is read-only (cache.read_only is true in kiln.toml or "
                      "KILN_CACHE_READ_ONLY); "
                      "nothing was changed",
                      o.action, *path));
  }
  // An import into a cache that does not exist yet creates it (and its directories); an import
  // that fails takes them away again, leaving the file system as it was.
  namespace fs = std::filesystem;
  fs::path created;  // the outermost of the cache file and its directories that do not exist
  std::error_code ec;
  if (o.action == "import")
    for (fs::path at = fs::absolute(*path, ec); !at.empty() && !fs::exists(at, ec);
         at = at.parent_path()) {
      created = at;
      if (at == at.parent_path()) break;
    }
  // stats and verify say what makes a file unusable themselves: the store's warning would say it
  // twice.
  const bool reports_problem = o.action == "stats" || o.action == "verify";
  auto store = cache::Store::open(
      *path, {.read_only = !writes,
              .warn = reports_problem ? [](const std::string&) {}
                                      : std::function<void(const std::string&)>()});
  if (!store) return report_error(store.error().message);
  const int rc = run_action(**store, o);
  store->reset();  // closed before anything is removed
  if (rc != 0 && !created.empty()) {
    fs::remove_all(created, ec);
    for (const char* suffix : {"-wal", "-shm"}) fs::remove(*path + suffix, ec);
  }
  return rc;
}

}  // namespace kiln::tools
