// The compiled kernels of one target: this process's, in front of the persistent kernel cache
// (DESIGN.md §8) when there is one, whose key holds everything the artifact depends on (the
// kernel's canonical text, its schedule, the target's identity, the check mode), so object code,
// cubins and SPIR-V never cross CPUs, devices or toolchains. An entry holds everything a launch
// needs, so a plan record names it by digest and a later process loads it without the kernel IR.
#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

#include "cache/store.h"
#include "codegen/check_mode.h"
#include "codegen/tune_params.h"
#include "ir/kernel_ir.h"
#include "runtime/target.h"
#include "support/recently_used.h"

namespace kiln::runtime {

struct KernelLookup {
  std::shared_ptr<const Artifact> artifact;
  enum class Source { memory, disk, compiled } source = Source::compiled;
  std::string digest;       // the persistent cache key ("" without a persistent cache)
  std::string miss_reason;  // with explain: why the persistent cache missed
};

// Why a lookup of `key` in `table` missed, for --stats at the verbose cache level: the closest
// stored entry with the same identity and each part that differs.
std::string explain_miss(cache::Store& store, cache::Table table, const cache::KeyParts& key);

class KernelCache {
 public:
  static constexpr size_t kMaxKernels = 1024;
  // `store` may be null (no persistent cache). Every kernel is compiled with `check`, which is
  // part of both keys. With `load` false (a compile-only target), artifacts are compiled and
  // read from the store without being loaded.
  // `max_kernels`: how many it keeps in memory (kMaxKernels; fewer in tests).
  KernelCache(Target& target, cache::Store* store, bool explain, codegen::CheckMode check,
              bool load = true, size_t max_kernels = kMaxKernels)
      : target_(target),
        store_(store),
        explain_(explain),
        check_(check),
        load_(load),
        kernels_(max_kernels) {}

  // From this process, the persistent cache, or compiled now (and stored). `kernel_text`: the
  // kernel's kir::print_kernel(kernel, false), when the caller has it (printed here otherwise).
  Expected<KernelLookup> get(const kir::Kernel& kernel, const kir::KernelFacts& facts,
                             const codegen::TuneParams& params,
                             const std::string* kernel_text = nullptr);
  // `kiln warm`: compiles the kernel into the persistent cache unless it holds it intact; true
  // when it compiled. Loads nothing, so a compile-only target works.
  Expected<bool> warm(const kir::Kernel& kernel, const kir::KernelFacts& facts,
                      const codegen::TuneParams& params);

  // kernel_key (runtime/cache_keys.h) with this cache's check mode.
  cache::KeyParts key(const kir::Kernel& kernel, const codegen::TuneParams& params) const;
  // The artifact a plan record names by digest, loaded; null when the entry is missing, from an
  // older writer, or damaged. Steps of one plan that run the same kernel share one artifact.
  std::shared_ptr<const Artifact> load(const std::string& digest);
  // Whether `digest` names an intact kernel entry of this target (loads nothing).
  bool has_entry(const std::string& digest) const;
  // A dynamic kernel's artifact (kir::Kernel::dynamic_outer), or a kernel's with run-time sizes
  // (kir::Kernel::sizes), compiled for one instance, bound to `instance` (its outer extent, and its
  // sizes); get() returns it bound to its kernel.
  Expected<std::shared_ptr<const Artifact>> bind(const Artifact& artifact,
                                                 const kir::Kernel& instance) const;
  codegen::CheckMode check_mode() const { return check_; }

 private:
  void put(const cache::KeyParts& key, const Artifact& artifact);
  Expected<KernelLookup> bound(const kir::Kernel& kernel, KernelLookup lookup) const;
  // The artifact of a stored entry; null, with a warning saying why, when the target cannot use it.
  std::shared_ptr<const Artifact> usable(const cache::Entry& e, bool load) const;
  Target& target_;
  cache::Store* store_;
  bool explain_;
  codegen::CheckMode check_;
  bool load_;
  std::mutex mu_;
  // By kernel text + schedule: the `max_kernels` looked up last. A program whose kernels are
  // specialized to each size it meets compiled one per size, and kept every one (with its JIT
  // code); one that went stays alive in the plans that run it, and is compiled (or read from the
  // persistent cache) again if met again.
  support::RecentlyUsed<std::string, KernelLookup> kernels_;
  // By digest, while any plan (or kernels_) holds them.
  std::unordered_map<std::string, std::weak_ptr<const Artifact>> by_digest_;
};

}  // namespace kiln::runtime
