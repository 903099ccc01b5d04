// The `cpu` codegen backend: kernel IR -> LLVM IR (vector-friendly math, fast-math where it is
// safe) -> O3 -> ORC LLJIT -> a native function. The one place that includes LLVM headers.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "codegen/check_mode.h"
#include "codegen/tune_params.h"
#include "ir/error.h"
#include "ir/kernel_ir.h"

namespace kiln::codegen {

// Runs the points of the parallel domain whose outermost index lies in [begin, end) (all inner
// axes fully). buffers[i] is parameter i of the kernel. Safe to call concurrently on disjoint
// ranges: that is how the runtime splits work over threads.
using CpuKernelFn = void (*)(void* const* buffers, int64_t begin, int64_t end);

struct CpuArtifact {
  CpuKernelFn fn = nullptr;
  std::string symbol;
  std::string llvm_ir;  // the optimized module, for `kiln dump --stage llvm`
  int64_t outer_extent = 1;  // fn's range: cpu::parallel_extent (rows, or a gemv's column blocks)
  double compile_ms = 0;
  // The relocatable object code of the kernel's module (what the persistent cache stores): a
  // later process on the same CPU, features and LLVM version loads it with CpuBackend::load.
  std::vector<uint8_t> object;
};

// Thread safety: one backend serves any number of threads. compile() and load() may run at once
// from several threads; a compile's LLVM work (emission, O3, code generation) runs in parallel
// with the others', each with its own LLVMContext and TargetMachine, and only taking a serial
// number and linking into the shared JIT are serialized. Concurrency never changes the object
// code: a kernel compiled next to others gives the same bytes as compiled alone (up to the
// serial number in its symbol). The accessors are const and safe from any thread.
class CpuBackend {
 public:
  static Expected<std::unique_ptr<CpuBackend>> create();
  ~CpuBackend();
  CpuBackend(const CpuBackend&) = delete;
  CpuBackend& operator=(const CpuBackend&) = delete;

  // Compiles one kernel; the artifact lives as long as the backend. With CheckMode::validate the
  // function takes one more buffer after the parameters: the error slot (codegen/check_mode.h),
  // which the caller zeroes before and reads after each launch.
  Expected<std::shared_ptr<const CpuArtifact>> compile(const kir::Kernel& kernel,
                                                       const TuneParams& params,
                                                       CheckMode mode = CheckMode::none);
  // Links object code from compile() (possibly of another process) without running LLVM's
  // code generation: no IR, no optimization. `symbol` is the artifact's symbol; loading the same
  // object several times, or next to compiled kernels, never clashes.
  Expected<std::shared_ptr<const CpuArtifact>> load(const std::vector<uint8_t>& object,
                                                    const std::string& symbol, int64_t outer_extent);
  // Everything besides the kernel that changes the object code, for cache keys.
  std::string llvm_version() const;      // e.g. "19.1.7"
  static constexpr const char* kCodegenVersion = "kiln-cpu-2";  // bump when emission changes
  // Host CPU name and feature string (e.g. "znver3", "+avx2,+fma,..."), part of cache keys.
  std::string cpu_name() const;
  std::string cpu_features() const;

 private:
  CpuBackend();
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace kiln::codegen
