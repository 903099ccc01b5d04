// Builds a Plan: optimize the graph, fuse, lower each group, compile each kernel (deduplicated
// by the kernel's canonical text), and assign buffer slots with their last uses.
#pragma once

#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

#include "codegen/cpu/cpu_backend.h"
#include "ir/error.h"
#include "ir/graph.h"
#include "passes/fuser.h"
#include "runtime/plan.h"

namespace kiln::runtime {

// Names graph values for stats and dumps (e.g. from a `.kg` file); unnamed ones print as %t<id>.
using ValueNamer = std::function<std::string(const ir::Node*)>;

// Compiled kernels of this process, keyed by canonical kernel text + tune params.
class KernelCache {
 public:
  explicit KernelCache(codegen::CpuBackend& backend) : backend_(backend) {}
  // Returns the artifact and whether it was compiled now (false: reused).
  Expected<std::pair<std::shared_ptr<const codegen::CpuArtifact>, bool>> get(
      const kir::Kernel& kernel, const codegen::TuneParams& params);

 private:
  codegen::CpuBackend& backend_;
  std::mutex mu_;
  std::unordered_map<std::string, std::shared_ptr<const codegen::CpuArtifact>> kernels_;
};

struct PlannerOptions {
  const passes::Fuser* fuser = nullptr;  // null: the first fuser
  KernelCache* kernels = nullptr;        // null: lower only, do not compile
  ValueNamer namer;                      // null: %t<id> for every value
};

// `inputs` are the plan's inputs in position order (StructuralKey::inputs).
Expected<std::shared_ptr<Plan>> build_plan(ir::Graph& g, const std::vector<const ir::Node*>& outputs,
                                           const std::vector<const ir::Node*>& inputs,
                                           const PlannerOptions& options);

std::string default_value_name(const ir::Node* n);

}  // namespace kiln::runtime
