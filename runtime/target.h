// The narrow interface between the one executor (runtime/executor.h) and a target: `cpu`
// (runtime/cpu_target.h), `cuda:N` and `vulkan:N` (runtime/gpu_target.h). A target compiles a
// kernel with its schedule into an artifact, turns artifacts into cache entries and back, tunes a
// kernel by measuring it, gives the rates its cost model plans with, and runs: memory, copies,
// launches in order on a stream. Everything else (plans, the plan and kernel caches, tuning
// decisions, persistence, stats, dumps) is the executor's, written once.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "autotune/tune_decision.h"
#include "autotune/tune_level.h"
#include "cache/store.h"
#include "codegen/check_mode.h"
#include "codegen/tune_params.h"
#include "ir/kernel_facts.h"
#include "ir/kernel_ir.h"
#include "passes/cost_model.h"
#include "runtime/buffer.h"
#include "kiln/error.h"

namespace kiln::runtime {

// A kernel compiled for a target: its generated code, and (once loaded) what launches it: linked
// object code on the cpu, a CUDA module or a Vulkan pipeline on a GPU.
class Artifact {
 public:
  virtual ~Artifact() = default;
  // What codegen generated, for dumps: optimized LLVM IR (cpu), CUDA C, GLSL.
  virtual const std::string& source() const = 0;
  // Emission and toolchain time; 0 for an artifact read from the cache.
  virtual double compile_ms() const = 0;
  // Whether it can be launched (a compile-only target's artifacts cannot).
  virtual bool loaded() const = 0;
  // How it runs beyond its source, for dumps (a GPU kernel's launch strategy and shape); empty
  // where the source says it all.
  virtual std::string summary() const { return {}; }
};

// One form of an artifact that `kiln dump` shows or writes: `stage` is what `--stage` names
// (source, ptx, spirv, ...), `extension` the file `--out-dir` writes ("" for a form that is
// shown only, such as disassembly), `bytes` its content.
struct ArtifactForm {
  std::string stage;
  std::string extension;
  std::string bytes;
};

// Memory a kernel reads or writes: a host buffer on the cpu, a block of device memory on a GPU
// (returned to its pool when destroyed; destroying it while a stream still uses it is allowed,
// the pool reuses it only in stream order).
class DeviceMemory {
 public:
  virtual ~DeviceMemory() = default;
  virtual size_t bytes() const = 0;
  // The host buffer this memory is (targets with host_memory()); null on a device.
  virtual std::shared_ptr<Buffer> host() const { return nullptr; }
};

// An in-order queue of copies and launches. Host pointers handed to upload/download must stay
// valid until synchronize() returns; downloads are complete only then. One thread at a time per
// stream; different streams may be used from different threads at once.
class Stream {
 public:
  virtual ~Stream() = default;
  virtual Expected<void> upload(DeviceMemory& dst, const void* src, size_t bytes) = 0;
  virtual Expected<void> download(const DeviceMemory& src, void* dst, size_t bytes) = 0;
  // args[i] is kernel parameter i, and for a kernel compiled with CheckMode::validate the error
  // slot (codegen/check_mode.h) last. With `timed`, the launch's time is measured and reported by
  // launch_times_ms() after the next synchronize().
  virtual Expected<void> launch(const Artifact& artifact, const std::vector<DeviceMemory*>& args,
                                bool timed) = 0;
  // Waits for everything enqueued; errors carry the driver's message.
  virtual Expected<void> synchronize() = 0;
  // Milliseconds of each timed launch of the last synchronized batch, in launch order.
  virtual std::vector<double> launch_times_ms() const = 0;
};

// A device as `kiln devices` lists it: its name, whether it is usable here, and its properties
// (or {"absent", why}).
struct DeviceInfo {
  std::string name;
  bool present = false;
  std::vector<std::pair<std::string, std::string>> properties;
};

// Where a device's rates come from (DeviceOptions): measured on this machine and kept in the
// persistent cache per device, or the fixed reference rates of the target's kind (deterministic
// plans for tests and goldens).
enum class RatesSource { measured, reference };

class Target {
 public:
  virtual ~Target() = default;
  // "cpu", "cuda:0", "vulkan:0", or a compile-only target's "cuda (sm_90, compile only)".
  virtual std::string name() const = 0;
  // false for a compile-only target (CUDA for an sm_XX without the GPU): it compiles, stores and
  // shows kernels, and loads or runs none.
  virtual bool can_run() const = 0;
  // The file extension of the source it generates: "ll", "cu", "comp".
  virtual std::string source_extension() const = 0;
  // The key parts that name what this target's artifacts and measurements depend on besides the
  // kernel: {target, cpu, features, llvm, codegen} or {target, device, codegen}. Two targets with
  // equal parts share cache entries (a compile-only CUDA target and a device of its sm_XX).
  virtual std::vector<std::pair<std::string, std::string>> identity() const = 0;

  // The fixed rates of the target's kind (deterministic plans), and its rates measured now with
  // the rate kernels (runtime/measured_rates.h; the executor keeps a measurement in the cache).
  virtual passes::DeviceRates reference_rates() const = 0;
  virtual Expected<passes::DeviceRates> measure_rates() = 0;
  // What a measurement depends on besides the target's identity ("threads=2" on the cpu).
  virtual std::string rates_setup() const = 0;
  // Whether the fuser plans with the measured rates (the cpu) or the reference rates (GPUs, whose
  // measured rates serve the autotuner's roofline only).
  virtual bool plans_with_measured_rates() const = 0;
  // The most buffers one kernel may bind, its outputs and a validating kernel's error slot
  // included (a Vulkan device's maxPerStageDescriptorStorageBuffers); the fuser keeps within it.
  // nullopt: no limit that kiln's kernels reach.
  virtual std::optional<size_t> max_kernel_buffers() const { return std::nullopt; }
  // Compiles `kernel` (whose analyses are `facts`: ir/kernel_facts.h) with `params` (and bounds
  // checks by `check`); with `load`, ready to launch. Thread-safe.
  virtual Expected<std::shared_ptr<const Artifact>> compile(const kir::Kernel& kernel,
                                                            const kir::KernelFacts& facts,
                                                            const codegen::TuneParams& params,
                                                            codegen::CheckMode check, bool load) = 0;
  // Whether `kernel` (ir/kernel_facts.h: `facts`), made dynamic (kir::Kernel::dynamic_outer) and
  // compiled with `check`, serves every extent of its outer axis (DESIGN.md §2 "Shapes"), so the
  // planner may share one compiled kernel between sizes. false on targets that specialize every
  // size.
  virtual bool serves_any_outer_extent(const kir::Kernel& /*kernel*/,
                                       const kir::KernelFacts& /*facts*/,
                                       codegen::CheckMode /*check*/) const {
    return false;
  }
  // Whether the code of a dynamic kernel, compiled at one size, runs `kernel` (a dynamic kernel at
  // the sizes of another instance) as the code planned and compiled for those sizes would: what
  // the target chooses by size (the cpu's streaming stores into large outputs) is the same.
  // `written_only` is kir::written_only of the kernel's body (a kernel read back from a record
  // has only its sizes). false on targets that specialize every size.
  virtual bool serves_instance(const kir::Kernel& /*kernel*/,
                               const std::vector<bool>& /*written_only*/) const {
    return false;
  }
  // Whether a dynamic kernel serves one size bucket only (kir::Kernel::dynamic_bound set under
  // every policy, not only with kiln.toml shapes.buckets): its code is chosen by its size.
  virtual bool buckets_dynamic_kernels() const { return false; }
  // A dynamic kernel's artifact, compiled for one instance, bound to an instance whose outer
  // extent is `outer_extent` (the same code; only the launch's range changes).
  virtual std::shared_ptr<const Artifact> with_outer_extent(const Artifact& artifact,
                                                            int64_t outer_extent) const {
    (void)artifact;
    (void)outer_extent;
    return nullptr;
  }
  // Whether `kernel`, a kernel with run-time sizes (kir::Kernel::sizes, ir/kernel_sizes.h), and
  // `facts`, its own analyses, compiled with `check`, serves every instance kir::match_sizes finds.
  // false on targets that keep every kernel's inner sizes.
  virtual bool serves_any_sizes(const kir::Kernel& /*kernel*/, const kir::KernelFacts& /*facts*/,
                                codegen::CheckMode /*check*/) const {
    return false;
  }
  // Whether that code (`general`: the general kernel's facts) runs `special`, an instance of it
  // at fixed sizes with its own analyses `special_facts`, as well as the code compiled for it
  // would (what the target chooses by size is the same).
  virtual bool serves_sizes_instance(const kir::KernelFacts& /*general*/,
                                     const kir::Kernel& /*special*/,
                                     const kir::KernelFacts& /*special_facts*/) const {
    return false;
  }
  // A kernel with run-time sizes: its artifact, compiled for one instance, bound to `instance`
  // (the same kernel at other sizes: its outer extent and its slots' values). null where the
  // target cannot.
  virtual std::shared_ptr<const Artifact> with_sizes(const Artifact& artifact,
                                                     const kir::Kernel& instance) const {
    (void)artifact;
    (void)instance;
    return nullptr;
  }
  // The persistent-cache entry of an artifact: binary, source, and metadata (the launch shape);
  // nullopt when there is nothing to store. (The store seals every entry against damage.)
  virtual std::optional<cache::Entry> to_entry(const Artifact& artifact) const = 0;
  // The artifact of a stored entry (of another process, perhaps), loaded with `load`; an error
  // saying why when the entry is not this target's or does not hold what it must (a bad entry
  // only costs a compile).
  virtual Expected<std::shared_ptr<const Artifact>> from_entry(const cache::Entry& entry, bool load) = 0;
  // The forms `kiln dump` shows of an artifact, its source first.
  virtual Expected<std::vector<ArtifactForm>> forms(const Artifact& artifact,
                                                    const std::string& name) = 0;
  // Tunes `kernel`'s schedule by measuring candidates on this target (autotune/tune_loop.h),
  // stopping early at a fraction of `roofline_ms` (0: no early stop).
  virtual Expected<autotune::TuneDecision> tune(const kir::Kernel& kernel, autotune::Level level,
                                                double roofline_ms) = 0;
  // The time of `candidate` over `reference`'s, two kernels of the same parameters computing the
  // same outputs, measured on this target (autotune::cpu_time_ratio): the automatic shape policy
  // asks it of a kernel with run-time sizes against its size's own code before it generalizes
  // (Executor::sized_choice). nullopt where the target does not measure it; an error when the
  // candidate's outputs do not match the reference's.
  virtual Expected<std::optional<double>> time_ratio(const kir::Kernel& /*candidate*/,
                                                     const kir::Kernel& /*reference*/) {
    return std::optional<double>();
  }
  // The largest footprint (a kernel's buffers together, in bytes) that stays in the device's
  // last-level cache from one run to the next (0: unknown). Tuning candidates are timed back to
  // back on the same buffers, so such a kernel runs from the cache there, and a bound from the
  // memory bandwidth says nothing of it.
  virtual int64_t cache_resident_bytes() const { return 0; }

  // Where kernels read and write. true (the cpu): in host buffers, so the executor binds inputs
  // and allocates results as host buffers and wraps them (no copy). false (a GPU): in the device's
  // own memory, so inputs are uploaded and results downloaded.
  virtual bool host_memory() const = 0;
  // A host buffer as kernel memory; only for host_memory() targets.
  virtual std::shared_ptr<DeviceMemory> wrap(std::shared_ptr<Buffer> buffer) = 0;
  // Device memory of `bytes` (never empty, so that a zero-element tensor binds a buffer); only for
  // targets without host_memory(). Fails with the driver's message when the device is full.
  virtual Expected<std::shared_ptr<DeviceMemory>> allocate(size_t bytes) = 0;
  virtual Expected<std::unique_ptr<Stream>> create_stream() = 0;
};

}  // namespace kiln::runtime
