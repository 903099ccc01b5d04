// Compiled GPU kernels (generated source + device binary + loaded program) of one GPU device:
// in memory for this process, in front of the persistent kernel cache (DESIGN.md §8), whose key
// holds the device's fingerprint, so PTX/cubin/SPIR-V never cross devices or toolchains.
#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "cache/store.h"
#include "codegen/check_mode.h"
#include "codegen/gpu/gpu_source.h"
#include "codegen/tune_params.h"
#include "ir/kernel_ir.h"
#include "runtime/gpu_backend.h"

namespace kiln::runtime {

struct GpuKernel {
  codegen::gpu::GpuSource source;
  std::vector<uint8_t> binary;  // GpuBackend::binary_kind()
  std::shared_ptr<const GpuProgram> program;
  double compile_ms = 0;        // source emission + toolchain (0 when loaded from the cache)
};

struct GpuKernelLookup {
  std::shared_ptr<const GpuKernel> kernel;
  enum class Source { memory, disk, compiled } source = Source::compiled;
  std::string digest;       // persistent cache key ("" without a store)
  std::string miss_reason;  // with explain: why the persistent cache missed
};

class GpuKernelCache {
 public:
  // `store` may be null (no persistent cache).
  GpuKernelCache(GpuBackend& backend, cache::Store* store, bool explain, codegen::CheckMode check)
      : backend_(backend), store_(store), explain_(explain), check_(check) {}
  Expected<GpuKernelLookup> get(const kir::Kernel& kernel, const codegen::TuneParams& params);
  // `kiln warm`: compiles the kernel into the persistent cache without loading it (no device
  // needed: a compile-only backend works). Returns true when it compiled, false when the cache
  // already had it.
  Expected<bool> warm(const kir::Kernel& kernel, const codegen::TuneParams& params);
  // Whether the persistent cache holds the kernel (`kiln warm --check`); false without a store.
  bool contains(const kir::Kernel& kernel, const codegen::TuneParams& params) const;
  // {kernel text, tune params, target, device fingerprint, gpu codegen version, schema, check}
  cache::KeyParts key(const kir::Kernel& kernel, const codegen::TuneParams& params) const;

 private:
  // Emits and compiles; the caller loads (or not) and stores.
  Expected<std::shared_ptr<GpuKernel>> build(const kir::Kernel& kernel, const codegen::TuneParams& params);
  void put(const cache::KeyParts& key, const GpuKernel& k);
  std::shared_ptr<GpuKernel> from_store(const cache::KeyParts& key, const kir::Kernel& kernel,
                                        const codegen::TuneParams& params);
  GpuBackend& backend_;
  cache::Store* store_;
  bool explain_;
  codegen::CheckMode check_;
  std::mutex mu_;
  std::unordered_map<std::string, GpuKernelLookup> kernels_;
};

}  // namespace kiln::runtime
