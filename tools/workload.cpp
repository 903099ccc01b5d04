// Workloads of the `kiln` tools: graphs from .kg files and KILN_RECORD directories, and the device
// of a target that compiles or looks up their kernels.
#include "tools/workload.h"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>

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
  return graphs;
}

Expected<std::vector<const ir::Node*>> read_graph_outputs(ir::Graph& g, const std::string& path) {
  auto graph = read_graph_file(g, path);
  if (!graph) return std::unexpected(graph.error());
  std::vector<const ir::Node*> outs;
  for (const auto& [name, node] : graph->graph.outputs) outs.push_back(node);
  return outs;
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
  return runtime::Executor::create(std::make_unique<runtime::GpuTarget>(std::move(*backend)),
                                   std::move(options));
}

}  // namespace kiln::tools
