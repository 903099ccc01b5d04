// The persistent side of the cpu device's caches (DESIGN.md §8): cache keys for kernels and plans
// (every part that can change the artifact), object-code loads, and plan records, over a
// cache::Store. A missing or failing store only costs compilation: nothing here fails a run.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "cache/store.h"
#include "codegen/check_mode.h"
#include "codegen/cpu/cpu_backend.h"
#include "runtime/plan.h"

namespace kiln::runtime {

class PersistentCache {
 public:
  PersistentCache(std::unique_ptr<cache::Store> store, codegen::CpuBackend& backend);
  cache::Store& store() { return *store_; }

  // {kernel text, tune params, target, cpu, features, llvm, codegen, schema, check}: checked and
  // unchecked object code of one kernel differ (and so does its calling convention).
  cache::KeyParts kernel_key(const kir::Kernel& kernel, const codegen::TuneParams& params,
                             codegen::CheckMode check = codegen::CheckMode::none) const;
  // {graph structure digest, fuser and its options, target, cpu, features, llvm, codegen, schema}
  cache::KeyParts plan_key(const std::string& structure, const std::string& fuser) const;

  // A kernel compiled by an earlier process: linked from its object code (no LLVM codegen).
  std::shared_ptr<const codegen::CpuArtifact> load_kernel(const cache::KeyParts& key);
  void store_kernel(const cache::KeyParts& key, const codegen::CpuArtifact& artifact);

  // A plan built by an earlier process, with every kernel loaded; null on a miss.
  std::shared_ptr<Plan> load_plan(const cache::KeyParts& key);
  void store_plan(const cache::KeyParts& key, const Plan& plan,
                  const std::vector<std::string>& kernel_digests);

  // Why the last lookup of `key` in `table` missed ("" when it hit), for --stats at verbose level.
  std::string explain_miss(cache::Table table, const cache::KeyParts& key);

 private:
  std::vector<std::pair<std::string, std::string>> target_parts() const;
  std::unique_ptr<cache::Store> store_;
  codegen::CpuBackend& backend_;
};

}  // namespace kiln::runtime
