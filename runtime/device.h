// Devices by name (`cpu`, `reference`): each turns a realize request (outputs + bound inputs)
// into result buffers. No backend type leaks past this interface.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "ir/error.h"
#include "ir/graph.h"
#include "passes/fuser.h"
#include "runtime/buffer.h"
#include "runtime/plan.h"
#include "runtime/planner.h"

namespace kiln::runtime {

class Logger;

using Bindings = std::unordered_map<const ir::Node*, std::shared_ptr<Buffer>>;

struct KernelRunInfo {
  std::string name;
  std::vector<std::string> values;  // graph values the kernel computes
  int num_ops = 0;
};

struct RunStats {
  int kernels = 0;         // launched
  int compiled = 0;        // compiled during this request
  double compile_ms = 0;   // codegen time during this request
  double plan_ms = 0;      // passes + fusion + lowering + codegen during this request
  double run_ms = 0;       // kernel execution
  bool plan_cache_hit = false;
  std::string plan_source;    // "memory" (this process), "disk" (an earlier process) or "built"
  int cache_hits = 0;         // kernels linked from the persistent cache during this request
  int cache_misses = 0;       // kernels compiled because the persistent cache did not have them
  std::vector<std::string> miss_reasons;  // with DeviceOptions::explain_misses
  std::vector<KernelRunInfo> groups;
};

struct DeviceOptions {
  int num_threads = 0;  // 0: ThreadPool::default_threads() (KILN_NUM_THREADS, else all cores)
  ValueNamer namer;     // names for stats; null: %t<id>
  // The fuser: "beam" (DESIGN.md §5, with `beam`), "greedy" (beam with 1 block, width 1) or
  // "first" (the rule-based first fuser).
  std::string fuser = "beam";
  passes::BeamOptions beam;
  // The persistent kernel and plan cache (DESIGN.md §8): "" = none.
  std::string cache_path;
  bool cache_read_only = false;
  int64_t cache_max_size = 0;  // bytes; 0 = no cap
  bool explain_misses = false;  // record why each persistent-cache lookup missed
  // Bounds checks compiled into every kernel (kiln.toml compilation.check_mode, DESIGN.md §10):
  // with validate, execute() fails with the first out-of-range access of a kernel.
  codegen::CheckMode check_mode = codegen::CheckMode::none;
  // kiln.toml's per-component loggers; null: warnings go to stderr, nothing else is logged.
  std::shared_ptr<const Logger> logger;
};

struct Config;
// The device options kiln.toml asks for ([fusion], [compilation] cache and check_mode, [cache]).
Expected<DeviceOptions> device_options_from_config(const Config& config);

class Device {
 public:
  virtual ~Device() = default;
  virtual std::string_view name() const = 0;
  virtual const std::shared_ptr<BufferPool>& pool() const = 0;
  // Evaluates `outputs` of graph `g`; every reachable Input node must be bound in `inputs`
  // (with its dtype and shape). Returns one buffer per output.
  virtual Expected<std::vector<std::shared_ptr<Buffer>>> execute(
      ir::Graph& g, const std::vector<const ir::Node*>& outputs, const Bindings& inputs,
      RunStats* stats = nullptr) = 0;
};

// "cpu" or "reference"; anything else is an error listing the available devices.
Expected<std::unique_ptr<Device>> open_device(std::string_view name, DeviceOptions options = {});
std::vector<std::string> available_devices();

// Checks that every Input node among `nodes` (other nodes are skipped) is bound with the right
// dtype and shape.
Expected<void> check_bindings(const std::vector<const ir::Node*>& nodes, const Bindings& inputs);

}  // namespace kiln::runtime
