// Workloads of the `kiln` tools: graphs from .kg files and KILN_RECORD directories, and the device
// of a target that compiles or looks up their kernels.
#include "tools/workload.h"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <set>

#include "ir/kg.h"
#include "tools/graph_file.h"
#include "runtime/config.h"
#include "runtime/gpu_target.h"
#include "tools/commands.h"

namespace kiln::tools {

namespace fs = std::filesystem;

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
  if (graphs.empty())
    return make_error("no graphs given: name .kg files or a KILN_RECORD directory");
  // A file named twice (or also found in a directory given) is one graph.
  std::vector<std::string> unique;
  std::set<fs::path> seen;
  for (std::string& g : graphs) {
    std::error_code ec;
    fs::path key = fs::weakly_canonical(g, ec);
    if (seen.insert(ec ? fs::path(g) : key).second) unique.push_back(std::move(g));
  }
  return unique;
}

Expected<std::vector<const ir::Node*>> read_graph_outputs(ir::Graph& g, const std::string& path) {
  auto graph = read_graph_file(g, path);
  if (!graph) return std::unexpected(graph.error());
  return graph->graph.output_nodes();
}

Expected<runtime::DeviceOptions> workload_device_options(const std::string& scope) {
  auto config = runtime::load_config(fs::current_path().string());
  if (!config) return std::unexpected(config.error());
  for (const std::string& w : config->warnings) fmt::print(stderr, "{}\n", w);
  auto options = runtime::device_options_from_config(config->config);
  if (!options) return std::unexpected(options.error());
  if (!scope.empty()) {
    auto path = cache_scope_path(scope);
    if (!path) return std::unexpected(path.error());
    // One store to fill and ship: autotune decisions go there too, not to autotune.cache.
    options->cache_path = *path;
    options->autotune_cache_path = *path;
  }
  return options;
}

Expected<std::unique_ptr<runtime::Executor>> open_target(const TargetChoice& c,
                                                         runtime::DeviceOptions options) {
  if (c.target == "cpu") {
    return runtime::open_executor("cpu", std::move(options));
  }
  const bool on_gpu = c.target == "vulkan" || c.tune;
  auto backend = c.target == "vulkan" ? runtime::open_vulkan_backend(0)
                 : on_gpu             ? runtime::open_cuda_backend(0, options.nvrtc)
                                      : runtime::open_cuda_compiler(c.arch, options.nvrtc);
  if (!backend && c.target == "cuda" && c.tune && !c.tune_asked) {
    fmt::print(stderr,
               "kiln: note: no CUDA device to tune on ({}); compiling untuned kernels for {} "
               "(autotune.enabled is on: they are tuned where they first run on a GPU)\n",
               backend.error().message, c.arch);
    options.autotune = false;
    TargetChoice untuned = c;
    untuned.tune = false;
    return open_target(untuned, std::move(options));
  }
  if (!backend && c.target == "vulkan" && c.compile_only_fallback && !c.tune)
    backend = runtime::open_vulkan_compiler();
  if (!backend) {
    if (c.target == "cuda" && c.tune)
      return make_error(fmt::format("--autotune measures kernels on the GPU itself: {}",
                                    backend.error().message));
    return std::unexpected(backend.error());
  }
  // A CUDA fingerprint starts with the device's architecture ("sm_90 ...").
  const std::string device_arch = (*backend)->fingerprint().substr(0, (*backend)->fingerprint().find(' '));
  if (c.target == "cuda" && c.tune && c.arch_given && device_arch != c.arch)
    return make_error(fmt::format("--autotune --arch {}: cuda:0 is {}; tuning measures the device itself",
                                  c.arch, device_arch));
  const bool tensor_cores = options.tensor_core_matmul;
  return runtime::Executor::create(
      std::make_unique<runtime::GpuTarget>(std::move(*backend), tensor_cores), std::move(options));
}

Expected<runtime::Bindings> bind_inputs(runtime::Device& device, const ir::KgGraph& graph,
                                        const std::vector<ir::HostTensor>& host) {
  runtime::Bindings bindings;
  for (size_t i = 0; i < graph.inputs.size(); ++i) {
    auto b = device.pool()->from_host(host[i], "input '%" + graph.inputs[i].first + "'");
    if (!b) return std::unexpected(b.error());
    bindings[graph.inputs[i].second] = std::move(*b);
  }
  return bindings;
}

namespace {
double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}
}  // namespace

Expected<RepeatedRun> run_repeated(runtime::Device& device, ir::Graph& g,
                                   const std::vector<const ir::Node*>& outputs,
                                   const runtime::Bindings& bindings, int repeat) {
  RepeatedRun out;
  std::vector<double> run_ms, device_ms, key_ms, lookup_ms, faults;
  std::vector<std::vector<double>> kernel_ms;  // per kernel, one time per run
  for (int r = 0; r < std::max(1, repeat); ++r) {
    runtime::RunStats s;
    // The last run's results go back to the pool first, so this run writes into their memory as
    // a loop that drops each result before the next realize does, not into fresh pages.
    out.results.clear();
    auto res = device.execute(g, outputs, bindings, &s);
    if (!res) return std::unexpected(res.error());
    run_ms.push_back(s.run_ms);
    device_ms.push_back(s.device_ms);
    key_ms.push_back(s.key_ms);
    lookup_ms.push_back(s.lookup_ms);
    faults.push_back(static_cast<double>(s.page_faults));
    kernel_ms.resize(std::max(kernel_ms.size(), s.groups.size()));
    for (size_t k = 0; k < s.groups.size(); ++k) kernel_ms[k].push_back(s.groups[k].ms);
    if (r == 0) out.stats = s;
    out.last = std::move(s);
    out.results = std::move(*res);
  }
  out.first_run_ms = run_ms.front();
  out.first_page_faults = static_cast<int64_t>(faults.front());
  out.median_page_faults = static_cast<int64_t>(median(faults));
  out.stats.run_ms = median(run_ms);
  out.stats.device_ms = median(device_ms);
  out.stats.key_ms = median(key_ms);
  out.stats.lookup_ms = median(lookup_ms);
  for (size_t k = 0; k < kernel_ms.size() && k < out.stats.groups.size(); ++k)
    out.stats.groups[k].ms = median(kernel_ms[k]);
  return out;
}

}  // namespace kiln::tools
