// `kiln warm`: fills a kernel cache ahead of time from `.kg` files or a KILN_RECORD directory,
// for the cpu, for vulkan:0, or for a CUDA architecture without a GPU; `--check` lists what a
// run would miss instead.
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <mutex>
#include <thread>

#include "ir/kg.h"
#include "runtime/config.h"
#include "runtime/cpu_device.h"
#include "runtime/gpu_device.h"
#include "tools/commands.h"
#include "tools/graph_namer.h"

namespace kiln::tools {

namespace fs = std::filesystem;

namespace {

// Every .kg named, or inside a named directory (sorted, so runs are reproducible).
Expected<std::vector<std::string>> collect_graphs(const std::vector<std::string>& paths) {
  std::vector<std::string> graphs;
  for (const std::string& p : paths) {
    std::error_code ec;
    if (fs::is_directory(p, ec)) {
      std::vector<std::string> found;
      for (const auto& e : fs::directory_iterator(p, ec))
        if (e.path().extension() == ".kg") found.push_back(e.path().string());
      if (ec) return make_error(fmt::format("cannot read '{}': {}", p, ec.message()));
      if (found.empty()) return make_error(fmt::format("'{}' holds no .kg graph", p));
      std::sort(found.begin(), found.end());
      graphs.insert(graphs.end(), found.begin(), found.end());
    } else if (fs::exists(p, ec)) {
      graphs.push_back(p);
    } else {
      return make_error(fmt::format("'{}' does not exist", p));
    }
  }
  if (graphs.empty()) return make_error("no graphs given: name .kg files or a KILN_RECORD directory");
  return graphs;
}

// One device that compiles (and, for --check, looks up) every graph's kernels.
struct Warmer {
  std::unique_ptr<runtime::CpuDevice> cpu;
  std::unique_ptr<runtime::GpuDevice> gpu;

  // Kernels compiled for one graph, or the misses with --check.
  Expected<std::pair<int, std::vector<std::string>>> run(ir::Graph& g,
                                                         const std::vector<const ir::Node*>& outs,
                                                         bool check) {
    std::pair<int, std::vector<std::string>> r{0, {}};
    if (check) {
      auto missing = cpu ? cpu->cache_misses(g, outs) : gpu->cache_misses(g, outs);
      if (!missing) return std::unexpected(missing.error());
      r.second = std::move(*missing);
    } else if (cpu) {
      auto plan = cpu->plan_for(g, outs);
      if (!plan) return std::unexpected(plan.error());
      r.first = (*plan)->compiled;
    } else {
      auto compiled = gpu->warm(g, outs);
      if (!compiled) return std::unexpected(compiled.error());
      r.first = *compiled;
    }
    return r;
  }
};

Expected<Warmer> open_warmer(const WarmOptions& o, runtime::DeviceOptions options) {
  Warmer w;
  if (o.target == "cpu") {
    auto dev = runtime::CpuDevice::create(std::move(options));
    if (!dev) return std::unexpected(dev.error());
    w.cpu = std::move(*dev);
    return w;
  }
  auto backend = o.target == "cuda" ? runtime::open_cuda_compiler(o.arch) : runtime::open_vulkan_backend(0);
  if (!backend) return std::unexpected(backend.error());
  auto dev = runtime::GpuDevice::create(std::move(*backend), std::move(options));
  if (!dev) return std::unexpected(dev.error());
  w.gpu = std::move(*dev);
  return w;
}

class Progress {
 public:
  explicit Progress(size_t total) : total_(total), tty_(::isatty(2)) {}
  void step(const std::string& graph, int compiled) {
    std::lock_guard lock(mu_);
    ++done_;
    compiled_ += compiled;
    if (!tty_) return;
    constexpr int kWidth = 30;
    int filled = static_cast<int>(kWidth * done_ / total_);
    fmt::print(stderr, "\r[{}{}] {}/{} graphs, {} kernels compiled  {:.40}", std::string(filled, '='),
               std::string(kWidth - filled, ' '), done_, total_, compiled_,
               fs::path(graph).filename().string());
    if (done_ == total_) fmt::print(stderr, "\n");
  }
  int compiled() const { return compiled_; }

 private:
  std::mutex mu_;
  size_t total_, done_ = 0;
  int compiled_ = 0;
  bool tty_;
};

}  // namespace

int warm_command(const WarmOptions& o) {
  if (o.arch_given && o.target != "cuda")
    return report_error(fmt::format("--arch applies to --target cuda, not {}", o.target));
  if (o.autotune && o.target != "cpu")
    return report_error(fmt::format(
        "--autotune measures kernels on the device they run on; kiln tunes the cpu target only "
        "(not {})", o.target));
  auto graphs = collect_graphs(o.paths);
  if (!graphs) return report_error(graphs.error().message);
  auto config = runtime::load_config(fs::current_path().string());
  if (!config) return report_error(config.error().message);
  for (const std::string& w : config->warnings) fmt::print(stderr, "{}\n", w);
  auto options = runtime::device_options_from_config(config->config);
  if (!options) return report_error(options.error().message);
  if (!o.scope.empty()) {
    auto path = cache_scope_path(o.scope);
    if (!path) return report_error(path.error().message);
    options->cache_path = *path;
  }
  if (options->cache_path.empty())
    return report_error("no kernel cache to warm: compilation.cache is \"none\"; pass --cache");
  options->cache_read_only = o.check;  // --check never writes
  options->autotune = o.autotune;
  std::string cache_path = options->cache_path;
  auto warmer = open_warmer(o, std::move(*options));
  if (!warmer) return report_error(warmer.error().message);

  Progress progress(graphs->size());
  std::mutex mu;
  std::vector<std::string> errors, missing;
  std::atomic<size_t> next{0};
  auto work = [&] {
    for (size_t i; (i = next.fetch_add(1)) < graphs->size();) {
      const std::string& path = (*graphs)[i];
      ir::Graph g;
      auto graph = ir::read_kg_file(g, path);
      Expected<std::pair<int, std::vector<std::string>>> r = std::unexpected(Error{});
      if (graph) {
        std::vector<const ir::Node*> outs;
        for (const auto& [name, node] : graph->outputs) outs.push_back(node);
        r = warmer->run(g, outs, o.check);
      }
      std::lock_guard lock(mu);
      if (!graph) errors.push_back(graph.error().message);
      else if (!r) errors.push_back(path + ": " + r.error().message);
      else
        for (const std::string& m : r->second) missing.push_back(path + ": " + m);
      progress.step(path, r ? r->first : 0);
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
  fmt::print("{}: {} graphs warmed for {}, {} kernels compiled\n", cache_path, graphs->size(),
             o.target == "cuda" ? "cuda " + o.arch : o.target, progress.compiled());
  return errors.empty() ? 0 : 1;
}

}  // namespace kiln::tools
