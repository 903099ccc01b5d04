// Devices by name (`cpu`, `cuda:N`, `vulkan:N`: the executor over their target; `reference`: the
// interpreter): each turns a realize request (outputs + bound inputs) into result buffers. No
// backend type leaks past this interface.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "ir/graph.h"
#include "passes/cost_model.h"
#include "autotune/tune_level.h"
#include "codegen/cuda/nvrtc.h"
#include "passes/fuser.h"
#include "runtime/buffer.h"
#include "runtime/plan.h"
#include "runtime/planner.h"
#include "runtime/target.h"
#include "kiln/error.h"

namespace kiln::cache {
class Store;
}

namespace kiln::runtime {

class Logger;

using Bindings = std::unordered_map<const ir::Node*, std::shared_ptr<Buffer>>;
// Bound inputs whose buffers the caller gives up (buffer donation, PlanStep::in_place): nothing
// else holds them or will read them again, so a kernel may write its output over one.
using Donated = std::unordered_set<const ir::Node*>;

struct KernelRunInfo {
  std::string name;
  std::vector<std::string> values;  // graph values the kernel computes
  int num_ops = 0;
  // With DeviceOptions::time_kernels: this launch's time (the cpu: wall time of its parallel
  // loop; GPUs: events or timestamp queries), and the work autotune::kernel_work counts (each
  // parameter moved once; ALU and reduction steps), from which the achieved rates follow.
  double ms = 0;
  double bytes = 0;
  double flops = 0;
  // The rate its flops compare with (operations per second): the device's measured contraction
  // rate (DeviceRates::matmul_rate) for a matmul or attention kernel, else its compute rate.
  double peak_flops = 0;
};

struct RunStats {
  int kernels = 0;         // launched
  int compiled = 0;        // compiled during this request
  double compile_ms = 0;   // codegen time during this request
  double plan_ms = 0;      // passes + fusion + lowering + codegen during this request
  double run_ms = 0;       // kernel execution (GPU devices: and copying the outputs back)
  // Where a realize's time goes before its kernels run: computing the graph's structural key
  // (one walk of the graph), and finding its plan (a lookup when the plan is in memory; on a
  // miss, also reading or building it: plan_ms).
  double key_ms = 0;
  double lookup_ms = 0;
  // With DeviceOptions::time_kernels: the kernels' own time, each launch timed (the cpu: the wall
  // time of its parallel loop; CUDA: events; Vulkan: timestamp queries) and summed; 0 otherwise
  // and on reference.
  double device_ms = 0;
  // With DeviceOptions::time_kernels: the minor page faults the process took while the plan ran
  // (fresh memory touched for the first time: a first run's outputs), or -1 where not counted.
  int64_t page_faults = -1;
  bool plan_cache_hit = false;
  // "memory" (this process), "disk" (an earlier process), "symbolic" (this process's symbolic
  // plan of the graph's shape family, at these sizes: nothing lowered or compiled) or "built"
  std::string plan_source;
  int cache_hits = 0;         // kernels linked from the persistent cache during this request
  int cache_misses = 0;       // kernels compiled because the persistent cache did not have them
  int tuned = 0;              // kernels autotuned during this request (DeviceOptions::autotune)
  std::vector<std::string> miss_reasons;  // with DeviceOptions::explain_misses
  // Why this request built a plan for a graph seen before at other sizes (which input dimension
  // changed), and which kernels the shape policy generalized then (docs/dynamic-shapes.md).
  std::vector<std::string> recompile_reasons;
  // kernels of the plan that take their outer extent, or their inner sizes, at run time
  int dynamic_kernels = 0;
  std::vector<KernelRunInfo> groups;
  // With DeviceOptions::time_kernels: the device's limits the achieved rates compare with, in
  // bytes and operations per second (DeviceRates), and whether they were measured on this machine
  // (kept in the cache) or are the target's reference rates (RatesSource::reference).
  double bandwidth = 0;
  double compute_rate = 0;
  double matmul_rate = 0;  // a contraction's flops per second (0: as compute_rate)
  bool rates_measured = false;
  // GPU devices: bytes copied to and from the device during this request (inputs kept on the
  // device by memory.persistent_memory are not copied again).
  int64_t upload_bytes = 0;
  int64_t download_bytes = 0;
  // Outputs written over a donated input's buffer (Donated); set when a run fails too, since the
  // donated inputs are then no longer what they were.
  int donated = 0;
};

// kiln.toml shapes.policy (docs/dynamic-shapes.md): which kernels take their outer extent at run
// time (kir::Kernel::dynamic_outer), so that one compiled kernel serves every size of that axis.
// static: none (every size compiles its own); dynamic: every kernel the target can serve so;
// automatic: a kernel is specialized to its size until the same kernel comes at a second size,
// then generalized (Inductor's automatic dynamic). Inputs marked dynamic (`?b` in `.kg`,
// Tensor::mark_dynamic) make their plans' kernels dynamic at once, except under static.
enum class ShapePolicy { static_, dynamic, automatic };

struct DeviceOptions {
  int num_threads = 0;  // the cpu's threads; 0: every core (KILN_NUM_THREADS, read at the edge)
  ValueNamer namer;     // names for stats; null: %t<id>
  // The fuser: the beam search (DESIGN.md §5, with `beam`), greedy (beam with 1 block, width 1),
  // the rule-based first fuser, or none (every op its own kernel).
  passes::FuserKind fuser = passes::FuserKind::beam;
  passes::BeamOptions beam;
  // The persistent kernel and plan cache (DESIGN.md §8): "" = none.
  std::string cache_path;
  bool cache_read_only = false;
  int64_t cache_max_size = 0;  // bytes; 0 = no cap
  bool explain_misses = false;  // record why each persistent-cache lookup missed
  // Bounds checks compiled into every kernel (kiln.toml compilation.check_mode, DESIGN.md §10):
  // with validate, execute() fails with the first out-of-range access of a kernel.
  codegen::CheckMode check_mode = codegen::CheckMode::none;
  // The IR verifier after every step of the lowering script (kiln.toml compilation.verify_ir;
  // on in debug builds and in the tests): a malformed IR fails the realize with the step's name.
  bool verify_ir = passes::kVerifyIrByDefault;
  // KILN_DUMP and KILN_RECORD (read at the edge, runtime/config.h): "" = off.
  std::string dump_dir;
  std::string record_dir;
  // The CPU the cpu device compiles for (kiln.toml compilation.cpu_target, codegen::CpuBackend::
  // create): "native", "x86-64-v3", "x86-64-v4" or an LLVM CPU name. Part of every cache key.
  std::string cpu_target = "native";
  // kiln.toml compilation.matmul_precision = "high": CUDA devices of sm_80 and later run matmuls
  // on the tensor cores, their f32 operands rounded to tf32. Part of those devices' cache keys.
  // false: f32 arithmetic everywhere.
  bool tensor_core_matmul = false;
  // The rates the cost model plans with (and the autotuner's roofline): measured on this machine
  // (kept per device), or the target kind's fixed reference rates, for the cpu and for GPUs.
  RatesSource cpu_rates = RatesSource::measured;
  RatesSource gpu_rates = RatesSource::measured;
  // Where CUDA targets find NVRTC (KILN_NVRTC_LIBRARY and CUDA_HOME, read at the edge).
  codegen::cuda::NvrtcSearch nvrtc;
  // kiln.toml's per-component loggers; null: warnings go to stderr, nothing else is logged.
  std::shared_ptr<const Logger> logger;
  // Autotuning (DESIGN.md §9) of every kernel the device compiles, at `autotune_level`
  // (kiln.toml autotune.level): decisions are kept in the persistent cache, so a kernel is tuned
  // once per machine. kiln.toml autotune.enabled (on by default) sets it; a default-constructed
  // DeviceOptions leaves it off. Off, a plan a tuned warm-up stored is still used (tuned kernels,
  // no tuning): Executor::get_plan.
  bool autotune = false;
  autotune::Level autotune_level = autotune::Level::balanced;
  // Where decisions are kept (kiln.toml autotune.cache): "" = in the kernel cache (cache_path).
  std::string autotune_cache_path;
  // streaming.max_streams: GPU devices keep up to this many streams, one per realize running at
  // once (further realizes wait for a free one); the cpu device runs at most this many realizes
  // at once (their kernels share one thread pool).
  int max_streams = 8;
  // memory.persistent_memory (runtime/buffer.h).
  PersistentMemory persistent_memory = PersistentMemory::enabled;
  // GPU devices: time every kernel launch on the device (RunStats::device_ms); `kiln run
  // --stats` turns it on. Off, launches carry no events or timestamp queries.
  bool time_kernels = false;
  ShapePolicy shape_policy = ShapePolicy::automatic;  // kiln.toml shapes.policy
  // kiln.toml shapes.buckets: a dynamic kernel serves the outer extents of one power-of-two
  // bucket (compiled and tuned once per bucket) instead of every extent.
  bool shape_buckets = false;
  // kiln.toml shapes.max_slowdown: under `automatic` with autotuning on, a kernel whose code with
  // run-time inner sizes runs more than this many times the time of its size's own code, timed
  // where it would generalize, keeps its sizes' own code (Executor::sized_choice).
  double shape_max_slowdown = 1.1;
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
  // (with its dtype and shape). Returns one buffer per output. Inputs in `donated` may come back
  // changed, as a result or not (devices with host memory write in place where the plan allows;
  // others ignore it).
  virtual Expected<std::vector<std::shared_ptr<Buffer>>> execute(
      ir::Graph& g, const std::vector<const ir::Node*>& outputs, const Bindings& inputs,
      RunStats* stats = nullptr, const Donated* donated = nullptr) = 0;
};

// What a device's options ask of the planner: its value names, the verifier, the dump directory;
// `kernels` null to lower only. (No tuning: the device sets PlannerOptions::tune when it tunes.)
PlannerOptions planner_options(const DeviceOptions& options, const passes::Fuser* fuser,
                               KernelCache* kernels);

// The fuser DeviceOptions::fuser names, with `cost` for the beam fuser; and its one-line
// description (name, options, rates), which is part of plan cache keys.
std::unique_ptr<passes::Fuser> make_fuser(const DeviceOptions& options, const passes::CostModel& cost);
std::string describe_fuser(const DeviceOptions& options, const passes::Fuser& fuser,
                           const passes::CostModel& cost);
// The persistent cache store DeviceOptions names (cache_path, read-only, size cap, the cache
// logger for warnings); null without one, or (with a warning) when it cannot be opened: a cache
// costs compilation time, never the run.
std::unique_ptr<cache::Store> open_cache_store(const DeviceOptions& options);

// RunStats of one execute: `source` is where the plan came from ("memory": nothing was built).
void fill_run_stats(const Plan& plan, const std::string& source, double plan_ms, double run_ms,
                    RunStats* stats);

// "cpu", "reference", "cuda:N" or "vulkan:N"; anything else is an error listing the devices.
Expected<std::unique_ptr<Device>> open_device(std::string_view name, DeviceOptions options = {});
std::vector<std::string> available_devices();
// Every device this machine may offer, as `kiln devices` lists them: cpu, reference, vulkan:N,
// cuda:N (a GPU API with no usable device is one entry saying why).
// `cpu_threads` and `nvrtc` as in DeviceOptions.
std::vector<DeviceInfo> list_devices(int cpu_threads = 0, const codegen::cuda::NvrtcSearch& nvrtc = {});

// Checks that every Input node among `nodes` (other nodes are skipped) is bound with the right
// dtype and shape.
Expected<void> check_bindings(const std::vector<const ir::Node*>& nodes, const Bindings& inputs);

}  // namespace kiln::runtime
