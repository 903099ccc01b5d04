// A workload of the `kiln` tools (`kiln warm`, `kiln cache export --for`): the .kg graphs named on
// the command line or recorded in KILN_RECORD directories, and one device of a target (the cpu,
// vulkan:0, or a CUDA architecture without a GPU) that compiles or looks up their kernels.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "runtime/cache_entry_ref.h"
#include "runtime/cpu_device.h"
#include "runtime/device.h"
#include "runtime/gpu_device.h"

namespace kiln::tools {

// Every .kg named, or inside a named directory (sorted, so runs are reproducible).
Expected<std::vector<std::string>> collect_graphs(const std::vector<std::string>& paths);

// Reads the .kg graph at `path` into `g`; returns its outputs in file order.
Expected<std::vector<const ir::Node*>> read_graph_outputs(ir::Graph& g, const std::string& path);

// The device options kiln.toml asks for (its warnings printed to stderr), with the cache of
// `scope` (local | target | global | file=PATH) when it is not empty: kernels, plans and
// autotune decisions all go there (one store to ship).
Expected<runtime::DeviceOptions> workload_device_options(const std::string& scope);

// The device of a target: exactly one of `cpu` and `gpu` is set.
struct TargetDevice {
  std::unique_ptr<runtime::CpuDevice> cpu;
  std::unique_ptr<runtime::GpuDevice> gpu;

  Expected<std::vector<runtime::CacheEntryRef>> cache_entries(
      ir::Graph& g, const std::vector<const ir::Node*>& outs);
};

// `target` is cpu, cuda (a compiler for `arch`, e.g. sm_90: no GPU needed) or vulkan (vulkan:0).
// With `tune`, kernels are measured on the device itself: for cuda that is cuda:0, which must be
// present and, when `arch_given`, of architecture `arch`.
Expected<TargetDevice> open_target_device(const std::string& target, const std::string& arch,
                                          bool arch_given, bool tune, runtime::DeviceOptions options);

}  // namespace kiln::tools
