// Builds a Plan: the lowering script (optimize the graph, fuse, lower each group), then compile
// each kernel through a target's kernel cache (runtime/kernel_cache.h, deduplicated by the
// kernel's canonical text and schedule), and assign buffer slots with their last uses.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "codegen/tune_params.h"
#include "ir/graph.h"
#include "ir/kg.h"
#include "passes/fuser.h"
#include "passes/pipeline.h"
#include "runtime/plan.h"
#include "kiln/error.h"

namespace kiln::runtime {

// Names graph values for stats and dumps (e.g. from a `.kg` file); unnamed ones print as %t<id>.
using ValueNamer = std::function<std::string(const ir::Node*)>;

class KernelCache;

struct PlannerOptions {
  const passes::Fuser* fuser = nullptr;  // null: the first fuser
  KernelCache* kernels = nullptr;        // null: lower only, do not compile
  ValueNamer namer;                      // null: %t<id> for every value
  // The schedule each kernel is compiled with (the autotuner's winner); null: TuneParams{}.
  std::function<Expected<codegen::TuneParams>(const kir::Kernel&)> tune;
  // The shape policy (DeviceOptions::shape_policy) for one lowered kernel: nullopt keeps it
  // specialized; a value makes it dynamic with that kir::Kernel::dynamic_bound. It may add a line
  // to `reasons` (Plan::recompile_reasons). null: every kernel specialized.
  using DynamicFn = std::function<std::optional<int64_t>(
      const kir::Kernel&, const kir::KernelFacts&, std::vector<std::string>& reasons)>;
  DynamicFn dynamic;
  // For a kernel `dynamic` left specialized: the same kernel with run-time sizes of its inner axes
  // (ir/kernel_sizes.h), an instance of a general kernel; nullopt keeps it specialized. It may add
  // a line to `reasons`. null: none.
  using SizesFn = std::function<std::optional<kir::Kernel>(
      const kir::Kernel&, const kir::KernelFacts&, std::vector<std::string>& reasons)>;
  SizesFn sizes;
  // Kernels compiled at once when there is no tuner (runtime/planner.cpp: compile_steps).
  int compile_threads = 1;
  // Verify the IR after every step of the lowering script (passes/pipeline.h).
  bool verify_ir = passes::kVerifyIrByDefault;
  // Where the build writes its dumps (KILN_DUMP, runtime/dump_writer.h): "" = nowhere.
  std::string dump_dir;
  // The extension of the compiled kernels' source in those dumps (Target::source_extension).
  std::string source_extension = "ll";
};

// `inputs` are the plan's inputs in position order (StructuralKey::inputs).
Expected<std::shared_ptr<Plan>> build_plan(ir::Graph& g, const std::vector<const ir::Node*>& outputs,
                                           const std::vector<const ir::Node*>& inputs,
                                           const PlannerOptions& options);

std::string default_value_name(const ir::Node* n);
// Values named after the `.kg` file that defined them (outputs first), others as %t<id>: a
// snapshot of the file's names, owned by the returned function.
ValueNamer kg_value_namer(const ir::KgGraph& graph);

// The plan-level conditions of an in-place candidate (PlanStep::in_place) of step `step_index`:
// `param` is an output of the step, `input_slot` a plan input of its dtype and shape that is not
// a plan output and that no later step reads. (The planner also checks the kernel's loads; a plan
// record's candidates are checked against this when read back.)
bool in_place_fits(const Plan& plan, size_t step_index, const InPlace& ip);

// Each slot's name in messages (an allocation that fails): a result's is the name `namer` gives
// the output it is in this run (a plan reused from another graph would name that graph's value);
// any other slot's is the label of the kernel parameter that writes it ("" for an input).
std::vector<std::string> slot_names(const Plan& plan, const std::vector<const ir::Node*>& outputs,
                                    const ValueNamer& namer);

}  // namespace kiln::runtime
