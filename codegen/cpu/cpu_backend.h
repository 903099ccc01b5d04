// The `cpu` codegen backend: kernel IR -> LLVM IR (vector-friendly math, fast-math where it is
// safe) -> O3 -> ORC LLJIT -> a native function. The one place that includes LLVM headers.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "codegen/check_mode.h"
#include "codegen/tune_params.h"
#include "ir/kernel_facts.h"
#include "ir/kernel_ir.h"
#include "kiln/error.h"

namespace kiln::codegen {

// Runs the points of the parallel domain whose outermost index lies in [begin, end) (all inner
// axes fully). buffers[i] is parameter i of the kernel. Safe to call concurrently on disjoint
// ranges: that is how the runtime splits work over threads.
using CpuKernelFn = void (*)(void* const* buffers, int64_t begin, int64_t end);

struct CpuArtifact {
  // [0, extent) of fn's range in units of chunk_align points (the last one partial): how callers
  // cut it between threads; run_units runs the units [begin, end).
  int64_t units(int64_t extent) const { return (extent + align() - 1) / align(); }
  void run_units(void* const* args, int64_t begin, int64_t end, int64_t extent) const {
    fn(args, begin * align(), std::min(end * align(), extent));
  }
  int64_t align() const { return std::max<int64_t>(1, chunk_align); }

  CpuKernelFn fn = nullptr;
  std::string symbol;
  // The optimized module, for `kiln dump --stage llvm`; for a kernel of more than
  // cpu::kLargeKernelOps operations, the module as emitted (a comment line first says so).
  std::string llvm_ir;
  int64_t outer_extent = 1;  // fn's range: cpu::parallel_extent (rows, or a gemv's column blocks)
  // An instance's range where it is neither outer_extent nor its outer extent: the query rows of
  // one unit of attention over a run-time count of them (cpu::unit_rows; 0: none).
  int64_t unit_rows = 0;
  // Compiled from a dynamic kernel (kir::Kernel::dynamic_outer): fn serves every outer extent.
  bool dynamic_outer = false;
  // Compiled from a kernel with run-time sizes (kir::Kernel::sizes): how many. fn then takes an
  // array of that many int64_t after the buffers (codegen/cpu/llvm_emitter.h serves_any_sizes).
  int32_t size_slots = 0;
  // Per slot, the largest value fn takes (-1: any; cpu::size_limits): a row it keeps on the
  // stack is that long at most. A launch of larger sizes is refused.
  std::vector<int64_t> size_limits;
  // Chunks of [0, outer_extent) per thread that the caller should cut the range into: 0, as
  // many as balance best (support::ThreadPool's default); 1 for a matrix-vector product, whose
  // chunks are column stripes that read each row of the matrix in one run (cpu::chunks_per_thread).
  int chunks_per_thread = 0;
  // Where the caller may cut [0, outer_extent): at multiples of this (cpu::chunk_alignment), so
  // that each chunk of a one-axis kernel fills whole vector iterations.
  int64_t chunk_align = 1;
  double compile_ms = 0;
  // The relocatable object code of the kernel's module (what the persistent cache stores): a
  // later process on the same CPU, features and LLVM version loads it with CpuBackend::load.
  std::vector<uint8_t> object;
  // The JIT code `fn` points into (its JITDylib), shared by the copies of this artifact: removed
  // from the JIT when the last of them goes, so a program that compiles a kernel per size (or
  // tunes many candidates) does not keep every kernel it ever compiled. Null when not linked.
  std::shared_ptr<const void> linked;
};

// Where perf finds the names of JIT code (its "perf map"): /tmp/perf-PID.map. With KILN_PERF_MAP=1
// in the environment, every kernel a cpu backend links (compiled, or loaded from the cache) adds
// its entry point's line there, so that `perf record` / `perf report` name kiln's kernels
// (docs/config.md). The file is left for perf to read after the process ends.
std::string perf_map_path();

// Thread safety: one backend serves any number of threads. compile() and load() may run at once
// from several threads; a compile's LLVM work (emission, O3, code generation) runs in parallel
// with the others', each with its own LLVMContext and TargetMachine, and only linking into the
// shared JIT is serialized. Concurrency never changes the object code: a kernel compiled next
// to others gives the same bytes as compiled alone. The accessors are const and safe from any
// thread.
class CpuBackend {
 public:
  // `cpu_target` (kiln.toml compilation.cpu_target): "native" compiles for this host's CPU and
  // features; "x86-64-v3", "x86-64-v4" or an LLVM x86-64 CPU name ("znver3", "skylake-avx512")
  // compiles for that CPU's features only, so that a cache warmed here runs on any machine that
  // has them. A name LLVM does not know, or a CPU whose features this host lacks (its kernels
  // could not run here), is an error naming the setting and the missing features.
  // `llc_bytes`, the last-level cache's size that decides streaming stores (streaming_stores.h):
  // absent, the host's for "native" (host_llc_bytes) and 0 (unknown) for a named CPU, whose
  // kernels may run on any machine; tests pin it.
  static Expected<std::unique_ptr<CpuBackend>> create(std::string_view cpu_target = "native",
                                                      std::optional<int64_t> llc_bytes = {});
  // This host's last-level cache in bytes, as Linux reports it for CPU 0 (sysfs); 0 when it
  // reports none.
  static int64_t host_llc_bytes();
  // Why `cpu_target` is not a CPU LLVM knows ("" when it is one, or "native"), for kiln.toml
  // checks before any backend exists.
  static std::string cpu_target_problem(std::string_view cpu_target);
  ~CpuBackend();
  CpuBackend(const CpuBackend&) = delete;
  CpuBackend& operator=(const CpuBackend&) = delete;

  // Compiles one kernel; the artifact lives as long as the backend. With CheckMode::validate the
  // function takes one more buffer after the parameters: the error slot (codegen/check_mode.h),
  // which the caller zeroes before and reads after each launch.
  // `facts` are the kernel's analyses (ir/kernel_facts.h) as the lowering script recorded them;
  // null: computed here.
  Expected<std::shared_ptr<const CpuArtifact>> compile(const kir::Kernel& kernel,
                                                       const TuneParams& params,
                                                       CheckMode mode = CheckMode::none,
                                                       const kir::KernelFacts* facts = nullptr);
  // Links object code from compile() (possibly of another process) without running LLVM's
  // code generation: no IR, no optimization. `symbol` is the artifact's symbol; loading the same
  // object several times, or next to compiled kernels, never clashes.
  Expected<std::shared_ptr<const CpuArtifact>> load(const std::vector<uint8_t>& object,
                                                    const std::string& symbol, int64_t outer_extent);
  // Whether the code compile() makes of `kernel` made dynamic (kir::Kernel::dynamic_outer)
  // serves every extent of its outer axis (cpu::serves_any_outer_extent).
  // `llc_bytes`: the last-level cache the code is compiled for (llc_bytes(); streaming stores
  // depend on it), in these four.
  static bool serves_any_outer_extent(const kir::Kernel& kernel, const kir::KernelFacts& facts,
                                      CheckMode check, int64_t llc_bytes = 0);
  // The range [0, extent) of code compiled from a kernel with run-time sizes to run `instance`:
  // its outer extent where that is a size, its blocks of query rows (CpuArtifact::unit_rows), or
  // the code's own range.
  static int64_t instance_range(const CpuArtifact& code, const kir::Kernel& instance);
  // Whether the code compile() makes of `kernel`, a kernel with run-time sizes, serves every
  // instance kir::match_sizes finds (cpu::serves_any_sizes; `facts`: the kernel's own).
  static bool serves_any_sizes(const kir::Kernel& kernel, const kir::KernelFacts& facts,
                               CheckMode check, int64_t llc_bytes = 0);
  // Whether that code runs `special`, an instance at fixed sizes, as well as its own code would
  // (cpu::serves_sizes_instance).
  static bool serves_sizes_instance(const kir::KernelFacts& general, const kir::Kernel& special,
                                    const kir::KernelFacts& special_facts, int64_t llc_bytes = 0);
  // Whether that code, compiled at another size, runs `kernel` (the sizes of one instance) as
  // the code compiled for those sizes would: no output large enough for streaming stores
  // (cpu::streams_at_its_size; `written_only`: kir::written_only of the kernel's body).
  static bool serves_instance(const kir::Kernel& kernel, const std::vector<bool>& written_only,
                              int64_t llc_bytes = 0);
  // CpuArtifact::chunks_per_thread of the code compile() makes of `kernel` (cpu::chunks_per_thread).
  static int chunks_per_thread(const kir::Kernel& kernel, const kir::KernelFacts& facts, CheckMode check);
  // Everything besides the kernel that changes the object code, for cache keys.
  std::string llvm_version() const;      // e.g. "19.1.7"
  static constexpr const char* kCodegenVersion = "kiln-cpu-43";  // bump when emission changes
  // The CPU compiled for and its feature string (e.g. "znver3", "+avx2,+fma,..."; for a named
  // target, that CPU and its features), part of cache keys.
  std::string cpu_name() const;
  std::string cpu_features() const;
  // The last-level cache size compiled for (create's llc_bytes), part of cache keys.
  int64_t llc_bytes() const;
  // How many kernels compile() has compiled (successfully or not) since create.
  int64_t compiles() const { return compiles_.load(std::memory_order_relaxed); }

 private:
  CpuBackend();
  struct Impl;
  // Shared with the code each artifact links (CpuArtifact::linked), which outlives the backend
  // when an artifact does.
  std::shared_ptr<Impl> impl_;
  std::atomic<int64_t> compiles_ = 0;
};

}  // namespace kiln::codegen
