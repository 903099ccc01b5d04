// A workload of the `kiln` tools (`kiln warm`, `kiln cache export --for`, `kiln dump`): the .kg
// graphs named on the command line or recorded in KILN_RECORD directories, and the executor of a
// target (the cpu, vulkan:0, or a CUDA architecture without a GPU) that compiles or looks up their
// kernels exactly as `kiln run` on that target would.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "ir/kg.h"
#include "runtime/device.h"
#include "runtime/executor.h"

namespace kiln::tools {

// Every .kg named, or inside a named directory (sorted, so runs are reproducible).
Expected<std::vector<std::string>> collect_graphs(const std::vector<std::string>& paths);

// Reads the .kg graph at `path` into `g`; returns its outputs in file order.
Expected<std::vector<const ir::Node*>> read_graph_outputs(ir::Graph& g, const std::string& path);

// The device options kiln.toml asks for (its warnings printed to stderr), with the cache of
// `scope` (local | target | global | file=PATH) when it is not empty: kernels, plans and
// autotune decisions all go there (one store to ship).
Expected<runtime::DeviceOptions> workload_device_options(const std::string& scope);

// The executor of a target: cpu, cuda (a compiler for `arch`, e.g. sm_90: no GPU needed; its keys
// are those of a device of that architecture) or vulkan (vulkan:0; with `compile_only_fallback`, a
// compiler without a device when none is present). With `tune`, kernels are measured on the
// device itself: for cuda that is cuda:0, which must be present and, when `arch_given`, of
// architecture `arch`.
struct TargetChoice {
  std::string target = "cpu";  // cpu | cuda | vulkan
  std::string arch = "sm_90";  // cuda
  bool arch_given = false;
  bool tune = false;
  // --autotune was on the command line. Without it, tuning asked by kiln.toml's autotune.enabled
  // (on by default) gives way, on --target cuda with no CUDA device, to untuned kernels for
  // `arch` (a note on stderr says so): warming a cache for a GPU on a machine without one works
  // with the defaults.
  bool tune_asked = false;
  bool compile_only_fallback = false;
};
Expected<std::unique_ptr<runtime::Executor>> open_target(const TargetChoice& choice,
                                                         runtime::DeviceOptions options);

// `host` (one tensor per input of `graph`, in order) bound to the graph's inputs on `device`.
Expected<runtime::Bindings> bind_inputs(runtime::Device& device, const ir::KgGraph& graph,
                                        const std::vector<ir::HostTensor>& host);

// `outputs` realized `repeat` times (at least once): the first run's statistics with each time
// (run, device, key, lookup, every kernel's) the median over the runs, the last run's statistics,
// and the last run's results; the first run's own run time and page faults, and the median run's
// page faults.
struct RepeatedRun {
  runtime::RunStats stats;
  runtime::RunStats last;
  double first_run_ms = 0;
  int64_t first_page_faults = -1;
  int64_t median_page_faults = -1;
  std::vector<std::shared_ptr<runtime::Buffer>> results;
};
Expected<RepeatedRun> run_repeated(runtime::Device& device, ir::Graph& g,
                                   const std::vector<const ir::Node*>& outputs,
                                   const runtime::Bindings& bindings, int repeat);

}  // namespace kiln::tools
