// `kiln warm`: fills a kernel cache ahead of time from `.kg` files or a KILN_RECORD directory,
// for the cpu, for vulkan:0, or for a CUDA architecture without a GPU; `--check` lists what a
// run would miss instead.
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <chrono>
#include <filesystem>
#include <map>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include "cache/store.h"
#include "tools/commands.h"
#include "tools/graph_file.h"
#include "tools/workload.h"

namespace kiln::tools {

namespace fs = std::filesystem;

namespace {

uint64_t bucket_of(int64_t n) {
  return std::bit_ceil(static_cast<uint64_t>(std::max<int64_t>(n, 1)));
}

// Another size of a symbol declared n: at least 2 (sizes 0 and 1 are specialized), and in n's
// power-of-two bucket where it can be (shapes.buckets and GPUs make a kernel per bucket).
int64_t second_size(int64_t n) {
  if (n <= 2) return 3;
  return bucket_of(n + 1) == bucket_of(n) ? n + 1 : n - 1;
}

// A size of `second`'s bucket other than `first` and `second` where there is one (a third plan
// confirms a symbolic plan of run-time sizes), else the size past both.
int64_t third_size(int64_t first, int64_t second) {
  for (int64_t c : {second + 1, second - 1, first + 1, first - 1, first + 2})
    if (c >= 1 && c != first && c != second && bucket_of(c) == bucket_of(second)) return c;
  return std::max(first, second) + 1;
}

// One device that compiles (and, for --check, looks up) every graph's kernels.
struct Warmer {
  Warmer(std::unique_ptr<runtime::Executor> d, bool many)
      : device(std::move(d)), other_sizes_ok(many) {}
  std::unique_ptr<runtime::Executor> device;
  bool other_sizes_ok;  // over many graphs, a --dim sizes those that have its symbol
  std::mutex symbols_mu;
  std::set<std::string> symbols;  // of the graphs read so far (--dim names one of them)

  struct Done {
    int compiled = 0, tuned = 0;
    bool symbolic = false;             // the graph's symbolic plan stored
    std::vector<std::string> missing;  // with --check
  };
  // Kernels compiled and tuned for one graph, or the misses with --check.
  Expected<Done> run(ir::Graph& g, const std::vector<const ir::Node*>& outs, bool check) {
    Done r;
    if (check) {
      auto missing = device->cache_misses(g, outs);
      if (!missing) return std::unexpected(missing.error());
      r.missing = std::move(*missing);
    } else {
      auto warmed = device->warm(g, outs);
      if (!warmed) return std::unexpected(warmed.error());
      r.compiled = warmed->compiled;
      r.tuned = warmed->tuned;
      r.symbolic = warmed->symbolic;
    }
    return r;
  }

  // A `.kg` file with size symbols (`?b=64`) warmed at its sizes, then at a second size of each
  // symbol: the two plans make the graph's symbolic plan, which serves a run at any size (of
  // the bucket, where kernels are bucketed). With `dims` (--dim), each named symbol is warmed
  // at warm_sizes of its range in turn, the others at their first size; a graph with none of
  // those symbols is warmed as without --dim (warm_command refuses a --dim that no graph has;
  // a single graph must have every --dim's symbol).
  Expected<Done> run_file(const std::string& path, bool check, const WarmOptions& o) {
    ir::KgSizes first;
    for (const auto& [name, range] : o.dims)
      first[name] =
          range.first == range.second ? range.first : warm_sizes(range.first, range.second)[0];
    ir::Graph g;
    auto file = read_graph_file(g, path, nullptr, &first, other_sizes_ok);
    if (!file) return std::unexpected(file.error());
    const auto has_symbol = [&](const std::string& name) {
      return std::ranges::any_of(file->graph.sizes, [&](const auto& s) { return s.first == name; });
    };
    {
      std::lock_guard lock(symbols_mu);
      for (const auto& [name, size] : file->graph.sizes) symbols.insert(name);
    }
    // The sizes after the first: each symbol's other sizes, one symbol at a time. A graph that
    // has none of the --dim symbols is warmed as without --dim.
    std::vector<ir::KgSizes> more;
    if (!std::ranges::any_of(o.dims, [&](const auto& dim) { return has_symbol(dim.first); })) {
      // (--check looks up the declared sizes only.)
      if (!check && !file->graph.sizes.empty()) {
        ir::KgSizes other;
        for (const auto& [name, n] : file->graph.sizes) other[name] = second_size(n);
        more.push_back(std::move(other));
      }
    } else {
      for (const auto& [name, range] : o.dims) {
        if (!has_symbol(name)) continue;
        const std::vector<int64_t> sizes = warm_sizes(range.first, range.second);
        for (size_t i = 1; i < sizes.size(); ++i) {
          ir::KgSizes other = first;
          other[name] = sizes[i];
          more.push_back(std::move(other));
        }
      }
    }
    // A symbol on an inner axis makes kernels of run-time sizes, whose symbolic plan a third
    // plan confirms (runtime/executor.h note_built): a third size where there are two, and up
    // to two more where no symbolic plan came of them (the fuser may group a graph otherwise
    // at its first size, whose plan then fits no other: softmax(x) - mean(x) over [4, 10]).
    const bool inner = !check && more.size() == 1 && ir::second_reading_sizes(file->graph);
    ir::KgSizes declared;
    for (const auto& [name, n] : file->graph.sizes) declared[name] = n;
    // Each symbol that changed from the sizes before the last to the last, once more.
    const auto next_sizes = [&] {
      ir::KgSizes next = more.back();
      const ir::KgSizes& before = more.size() > 1 ? more[more.size() - 2] : declared;
      for (auto& [name, n] : next)
        if (auto it = before.find(name); it != before.end() && it->second != n)
          n = third_size(it->second, n);
      return next;
    };
    if (inner) more.push_back(next_sizes());
    // As a run of the file does (kiln run, kiln::Graph): a size symbol on an inner axis makes the
    // first size's kernels take their sizes at run time, so the kernels stored here are the ones
    // a run at any other size looks up.
    note_inner_sizes(*device, path, file->graph);
    Expected<Done> total = run(g, file->graph.output_nodes(), check);
    for (size_t i = 0, extra = 0; total && i < more.size(); ++i) {
      ir::Graph gi;
      auto fi = read_graph_file(gi, path, nullptr, &more[i], other_sizes_ok);
      if (!fi) return std::unexpected(fi.error());
      auto ri = run(gi, fi->graph.output_nodes(), check);
      if (!ri) return std::unexpected(ri.error());
      total->compiled += ri->compiled;
      total->tuned += ri->tuned;
      total->symbolic = total->symbolic || ri->symbolic;
      total->missing.insert(total->missing.end(), ri->missing.begin(), ri->missing.end());
      if (inner && i + 1 == more.size() && !total->symbolic && extra < 2) {
        more.push_back(next_sizes());
        ++extra;
      }
    }
    return total;
  }
};

// On a terminal (stderr), one line redrawn after each graph: a bar, graph i of n, the kernels
// compiled and tuned so far, the time left at the pace so far, and the graph's name.
class Progress {
 public:
  explicit Progress(size_t total)
      : total_(total), tty_(::isatty(2)), start_(std::chrono::steady_clock::now()) {}
  void step(const std::string& graph, int compiled, int tuned) {
    std::lock_guard lock(mu_);
    ++done_;
    compiled_ += compiled;
    tuned_ += tuned;
    if (!tty_) return;
    constexpr int kWidth = 30;
    const int filled = static_cast<int>(kWidth * done_ / total_);
    const double elapsed =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
    const double left = elapsed / static_cast<double>(done_) * static_cast<double>(total_ - done_);
    fmt::print(stderr,
               "\r[{}{}] {}/{} graphs, {} kernels compiled, {} tuned, {:.1f} s left  {:.40}",
               std::string(filled, '='), std::string(kWidth - filled, ' '), done_, total_,
               compiled_, tuned_, left, fs::path(graph).filename().string());
    if (done_ == total_) fmt::print(stderr, "\n");
  }
  int compiled() const { return compiled_; }
  int tuned() const { return tuned_; }

 private:
  std::mutex mu_;
  size_t total_, done_ = 0;
  int compiled_ = 0, tuned_ = 0;
  bool tty_;
  std::chrono::steady_clock::time_point start_;
};

}  // namespace

Expected<void> parse_warm_dim(const std::string& arg,
                              std::map<std::string, std::pair<int64_t, int64_t>>& dims) {
  auto dim = read_dim_arg(arg, /*ranges=*/true);
  if (!dim) return std::unexpected(dim.error());
  if (!dims.emplace(dim->name, std::pair{dim->lo, dim->hi}).second)
    return make_error(fmt::format("--dim {} is given twice", dim->name));
  return {};
}

std::vector<int64_t> warm_sizes(int64_t lo, int64_t hi) {
  if (lo == hi) return {lo, second_size(lo)};
  std::vector<int64_t> sizes;
  if (lo == 0) sizes.push_back(0);  // its own plan (nothing to compute)
  for (uint64_t b = bucket_of(lo); b <= bucket_of(hi); b *= 2) {
    const auto top = std::min<int64_t>(static_cast<int64_t>(b), hi);
    if (top < lo) continue;
    sizes.push_back(top);
    const int64_t below = top - 1;
    if (below >= lo && below >= 2 && static_cast<uint64_t>(below) > b / 2) sizes.push_back(below);
  }
  return sizes;
}

int warm_command(const WarmOptions& o) {
  if (o.arch_given && o.target != "cuda")
    return report_error(fmt::format("--arch applies to --target cuda, not {}", o.target));
  auto graphs = collect_graphs(o.paths);
  if (!graphs) return report_error(graphs.error().message);
  auto options = workload_device_options(o.scope);
  if (!options) return report_error(options.error().message);
  if (options->cache_path.empty())
    return report_error("no kernel cache to warm: compilation.cache is \"none\"; pass --cache");
  if (!o.check) {
    // Filling the cache is warm's whole work: a cache it may not or cannot write is an error
    // before anything compiles (a run goes on without a cache; a warm-up would store nothing).
    if (options->cache_read_only)
      return report_error(
          fmt::format("warm: the cache {} is read-only (cache.read_only is true in kiln.toml or "
                      "KILN_CACHE_READ_ONLY); nothing was warmed",
                      options->cache_path));
    std::string warning;
    auto store = cache::Store::open(options->cache_path,
                                    {.warn = [&](const std::string& m) { warning = m; }});
    if (!store) return report_error(store.error().message);
    if (const std::string problem = (*store)->stats().problem; !problem.empty())
      return report_error(fmt::format("warm: cannot write the cache {}: {}; nothing was warmed",
                                      options->cache_path, problem));
    if (!warning.empty()) fmt::print(stderr, "kiln: warning: {}\n", warning);  // moved aside
  }
  const int64_t max_size = options->cache_max_size;
  options->cache_read_only = o.check;  // --check never writes
  options->autotune = autotune_from(o.autotune, o.no_autotune, options->autotune);
  const bool tune = options->autotune && !o.check;
  std::string cache_path = options->cache_path;
  // --check only looks decisions up: a CUDA compiler gives the same keys as the device.
  auto device = open_target({.target = o.target, .arch = o.arch, .arch_given = o.arch_given,
                             .tune = tune, .tune_asked = o.autotune},
                            std::move(*options));
  if (!device) return report_error(device.error().message);
  Warmer warmer(std::move(*device), graphs->size() > 1);

  Progress progress(graphs->size());
  std::mutex mu;
  std::vector<std::string> errors, missing;
  int symbolic = 0;
  std::atomic<size_t> next{0};
  auto work = [&] {
    for (size_t i; (i = next.fetch_add(1)) < graphs->size();) {
      const std::string& path = (*graphs)[i];
      Expected<Warmer::Done> r = warmer.run_file(path, o.check, o);
      std::lock_guard lock(mu);
      if (!r)
        errors.push_back(r.error().message.starts_with(path) ? r.error().message
                                                             : path + ": " + r.error().message);
      else
        for (const std::string& m : r->missing) missing.push_back(path + ": " + m);
      symbolic += r && r->symbolic ? 1 : 0;
      progress.step(path, r ? r->compiled : 0, r ? r->tuned : 0);
    }
  };
  std::vector<std::thread> threads;
  for (int t = 1; t < std::max(1, o.jobs); ++t) threads.emplace_back(work);
  work();
  for (auto& t : threads) t.join();

  std::sort(missing.begin(), missing.end());
  // A located error ("g.kg:2:7: error: ...") is printed as it is, as `kiln run` prints it.
  for (const std::string& e : errors)
    fmt::print(stderr, "{}{}\n", e.find(": error: ") == std::string::npos ? "kiln: error: " : "", e);
  // A --dim that no graph has a symbol for sized nothing: a typo, or graphs other than meant.
  // (A single graph's read refused it already.)
  bool dims_ok = true;
  for (const auto& [name, range] : o.dims)
    if (warmer.other_sizes_ok && !warmer.symbols.contains(name)) {
      dims_ok = false;
      fmt::print(
          stderr,
          "kiln: error: --dim {}: none of the {} graphs has a size symbol '?{}' (their "
          "symbols: {})\n",
          name, graphs->size(), name,
          warmer.symbols.empty() ? "none" : fmt::format("{}", fmt::join(warmer.symbols, ", ")));
    }
  if (o.check) {
    for (const std::string& m : missing) fmt::print("miss {}\n", m);
    fmt::print("{}: {} graphs checked, {} missing\n", cache_path, graphs->size(), missing.size());
    return errors.empty() && missing.empty() && dims_ok ? 0 : 1;
  }
  // A size cap evicts the oldest entries as new ones go in: a cap smaller than what was just
  // warmed leaves some of it out, which a warm-up must not report as warmed. (Looked up again
  // where the file has come near the cap: a cache far below it has evicted nothing.)
  bool near_cap = false;
  if (max_size > 0)
    if (auto store = cache::Store::open(cache_path, {.read_only = true}))
      near_cap = (*store)->stats().bytes >= max_size / 2;
  if (near_cap) {
    std::vector<std::string> evicted;
    for (const std::string& path : *graphs) {
      Expected<Warmer::Done> r = warmer.run_file(path, /*check=*/true, o);
      if (r)
        for (const std::string& m : r->missing) evicted.push_back(path + ": " + m);
    }
    if (!evicted.empty()) {
      std::sort(evicted.begin(), evicted.end());
      return report_error(fmt::format(
          "warm: cache.max_size ({} bytes) cannot hold what was warmed: {} entr{} evicted again "
          "(first: {}); raise cache.max_size or warm fewer graphs",
          max_size, evicted.size(), evicted.size() == 1 ? "y was" : "ies were", evicted.front()));
    }
  }
  // Only the graphs that warmed count; those that failed are counted apart (their errors above).
  const size_t warmed = graphs->size() - errors.size();
  fmt::print(
      "{}: {} graph{} warmed for {}{}, {} kernel{} compiled{}{}\n", cache_path, warmed,
      warmed == 1 ? "" : "s", o.target == "cuda" ? "cuda " + o.arch : o.target,
      errors.empty() ? "" : fmt::format(" ({} failed)", errors.size()), progress.compiled(),
      progress.compiled() == 1 ? "" : "s",
      tune ? fmt::format(", {} tuned", progress.tuned()) : "",
      symbolic > 0 ? fmt::format(", {} symbolic plan{}", symbolic, symbolic == 1 ? "" : "s") : "");
  return errors.empty() && dims_ok ? 0 : 1;
}

}  // namespace kiln::tools
