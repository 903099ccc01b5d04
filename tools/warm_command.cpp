// `kiln warm`: fills a kernel cache ahead of time from `.kg` files or a KILN_RECORD directory,
// for the cpu, for vulkan:0, or for a CUDA architecture without a GPU; `--check` lists what a
// run would miss instead.
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <mutex>
#include <thread>

#include "tools/commands.h"
#include "tools/workload.h"

namespace kiln::tools {

namespace fs = std::filesystem;

namespace {

// One device that compiles (and, for --check, looks up) every graph's kernels.
struct Warmer {
  std::unique_ptr<runtime::Executor> device;

  struct Done {
    int compiled = 0, tuned = 0;
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
    }
    return r;
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

int warm_command(const WarmOptions& o) {
  if (o.arch_given && o.target != "cuda")
    return report_error(fmt::format("--arch applies to --target cuda, not {}", o.target));
  auto graphs = collect_graphs(o.paths);
  if (!graphs) return report_error(graphs.error().message);
  auto options = workload_device_options(o.scope);
  if (!options) return report_error(options.error().message);
  if (options->cache_path.empty())
    return report_error("no kernel cache to warm: compilation.cache is \"none\"; pass --cache");
  options->cache_read_only = o.check;  // --check never writes
  options->autotune = autotune_from(o.autotune, o.no_autotune, options->autotune);
  const bool tune = options->autotune && !o.check;
  std::string cache_path = options->cache_path;
  // --check only looks decisions up: a CUDA compiler gives the same keys as the device.
  auto device = open_target({.target = o.target, .arch = o.arch, .arch_given = o.arch_given,
                             .tune = tune, .tune_asked = o.autotune},
                            std::move(*options));
  if (!device) return report_error(device.error().message);
  Warmer warmer{std::move(*device)};

  Progress progress(graphs->size());
  std::mutex mu;
  std::vector<std::string> errors, missing;
  std::atomic<size_t> next{0};
  auto work = [&] {
    for (size_t i; (i = next.fetch_add(1)) < graphs->size();) {
      const std::string& path = (*graphs)[i];
      ir::Graph g;
      auto graph = read_graph_outputs(g, path);
      Expected<Warmer::Done> r = std::unexpected(Error{});
      if (graph) r = warmer.run(g, *graph, o.check);
      std::lock_guard lock(mu);
      if (!graph) errors.push_back(graph.error().message);
      else if (!r) errors.push_back(path + ": " + r.error().message);
      else
        for (const std::string& m : r->missing) missing.push_back(path + ": " + m);
      progress.step(path, r ? r->compiled : 0, r ? r->tuned : 0);
    }
  };
  std::vector<std::thread> threads;
  for (int t = 1; t < std::max(1, o.jobs); ++t) threads.emplace_back(work);
  work();
  for (auto& t : threads) t.join();

  std::sort(missing.begin(), missing.end());
  for (const std::string& e : errors) fmt::print(stderr, "kiln: error: {}\n", e);
  if (o.check) {
    for (const std::string& m : missing) fmt::print("miss {}\n", m);
    fmt::print("{}: {} graphs checked, {} missing\n", cache_path, graphs->size(), missing.size());
    return errors.empty() && missing.empty() ? 0 : 1;
  }
  fmt::print("{}: {} graphs warmed for {}, {} kernels compiled{}\n", cache_path, graphs->size(),
             o.target == "cuda" ? "cuda " + o.arch : o.target, progress.compiled(),
             tune ? fmt::format(", {} tuned", progress.tuned()) : "");
  return errors.empty() ? 0 : 1;
}

}  // namespace kiln::tools
