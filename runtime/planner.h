// Builds a Plan: optimize the graph, fuse, lower each group, compile each kernel (deduplicated
// by the kernel's canonical text), and assign buffer slots with their last uses.
#pragma once

#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

#include "codegen/cpu/cpu_backend.h"
#include "ir/graph.h"
#include "passes/fuser.h"
#include "passes/pipeline.h"
#include "runtime/plan.h"
#include "support/error.h"

namespace kiln::runtime {

// Names graph values for stats and dumps (e.g. from a `.kg` file); unnamed ones print as %t<id>.
using ValueNamer = std::function<std::string(const ir::Node*)>;

class PersistentCache;

struct KernelLookup {
  std::shared_ptr<const codegen::CpuArtifact> artifact;
  enum class Source { memory, disk, compiled } source = Source::compiled;
  std::string digest;       // the persistent cache key ("" without a persistent cache)
  std::string miss_reason;  // why the persistent cache missed, when asked to explain
};

// Compiled kernels of this process, keyed by canonical kernel text + tune params, in front of
// the persistent cache (object code from earlier processes) when there is one.
class KernelCache {
 public:
  // Every kernel is compiled with `check` (codegen/check_mode.h), which is part of both keys.
  explicit KernelCache(codegen::CpuBackend& backend, PersistentCache* disk = nullptr,
                       bool explain_misses = false,
                       codegen::CheckMode check = codegen::CheckMode::none)
      : backend_(backend), disk_(disk), explain_(explain_misses), check_(check) {}
  Expected<KernelLookup> get(const kir::Kernel& kernel, const codegen::TuneParams& params);
  codegen::CheckMode check_mode() const { return check_; }

 private:
  codegen::CpuBackend& backend_;
  PersistentCache* disk_;
  bool explain_;
  codegen::CheckMode check_;
  std::mutex mu_;
  std::unordered_map<std::string, KernelLookup> kernels_;
};

struct PlannerOptions {
  const passes::Fuser* fuser = nullptr;  // null: the first fuser
  KernelCache* kernels = nullptr;        // null: lower only, do not compile
  ValueNamer namer;                      // null: %t<id> for every value
  // The schedule each kernel is compiled with (the autotuner's winner); null: TuneParams{}.
  std::function<Expected<codegen::TuneParams>(const kir::Kernel&)> tune;
  // Verify the IR after every step of the lowering script (passes/pipeline.h).
  bool verify_ir = passes::kVerifyIrByDefault;
  // Where the build writes its dumps (KILN_DUMP, runtime/dump_writer.h): "" = nowhere.
  std::string dump_dir;
};

// `inputs` are the plan's inputs in position order (StructuralKey::inputs).
Expected<std::shared_ptr<Plan>> build_plan(ir::Graph& g, const std::vector<const ir::Node*>& outputs,
                                           const std::vector<const ir::Node*>& inputs,
                                           const PlannerOptions& options);

std::string default_value_name(const ir::Node* n);

// Each slot's name in messages (an allocation that fails): a result's is the name `namer` gives
// the output it is in this run (a plan reused from another graph would name that graph's value);
// any other slot's is the label of the kernel parameter that writes it ("" for an input).
std::vector<std::string> slot_names(const Plan& plan, const std::vector<const ir::Node*>& outputs,
                                    const ValueNamer& namer);

}  // namespace kiln::runtime
