// Compiled GPU kernels (generated source + device binary + loaded program) of one GPU device:
// in memory for this process, in front of the persistent kernel cache (DESIGN.md §8), whose key
// holds the device's fingerprint, so PTX/cubin/SPIR-V never cross devices or toolchains. An entry
// holds everything a launch needs (source, binary, launch shape, scratch), so a plan record can
// name it by digest and a later process loads it without the kernel's IR.
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
  // Whether the persistent cache holds the kernel intact (`kiln warm --check`; a damaged entry is
  // compiled again by warm); false without a store.
  bool contains(const kir::Kernel& kernel, const codegen::TuneParams& params) const;
  // {kernel text, tune params, target, device fingerprint, gpu codegen version, schema, check}
  cache::KeyParts key(const kir::Kernel& kernel, const codegen::TuneParams& params) const;
  // {graph structure digest, fuser, target, device fingerprint, gpu codegen version, schema,
  // check, autotune level or "off"}: a plan record names kernels keyed with the same parts.
  cache::KeyParts plan_key(const std::string& structure, const std::string& fuser,
                           const std::string& autotune) const;
  // The kernel stored under `digest` (as a plan record names it), loaded on the device; null when
  // the entry is missing, from an older writer, or damaged.
  std::shared_ptr<const GpuKernel> load(const std::string& digest);
  // Whether `digest` names an intact kernel entry (`kiln warm --check`; loads nothing, so a
  // compile-only backend can answer).
  bool has_entry(const std::string& digest) const;

  // Bumped when the key parts or the entry format change meaning.
  static constexpr const char* kSchema = "2";

 private:
  // Emits and compiles; the caller loads (or not) and stores.
  Expected<std::shared_ptr<GpuKernel>> build(const kir::Kernel& kernel, const codegen::TuneParams& params);
  void put(const cache::KeyParts& key, const GpuKernel& k);
  std::shared_ptr<GpuKernel> from_store(const cache::KeyParts& key);
  // The kernel of a stored entry, loaded; null when the entry is not intact.
  std::shared_ptr<GpuKernel> load_entry(cache::Entry entry);
  GpuBackend& backend_;
  cache::Store* store_;
  bool explain_;
  codegen::CheckMode check_;
  std::mutex mu_;
  std::unordered_map<std::string, GpuKernelLookup> kernels_;
};

}  // namespace kiln::runtime
