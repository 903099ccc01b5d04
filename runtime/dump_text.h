// Text dumps of a Plan, shared by `kiln dump` and KILN_DUMP: the standalone `.kg` of a subgraph,
// the fused groups with their cost estimates and fusion reasons, the kernel IR and the source.
#pragma once

#include <string>
#include <vector>

#include "ir/kg.h"
#include "passes/cost_model.h"
#include "runtime/plan.h"
#include "runtime/planner.h"

namespace kiln::runtime {

// `outputs` as a standalone `.kg` graph: `inputs` (plan input order) are declared first, each under
// the name `namer` gives it, or in0, in1, ... (by position) when it has none; outputs take their
// names from `namer`, or out0, out1, ... . The result reads back with `kiln run`/`kiln dump`.
ir::KgGraph standalone_graph(const std::vector<const ir::Node*>& outputs,
                             const std::vector<const ir::Node*>& inputs, const ValueNamer& namer);

// Names values of the optimized graph: each optimized output takes the name of the original
// output it replaces (as build_plan names them); other values go to `namer` (null: defaults).
ValueNamer optimized_namer(const Plan& plan, const std::vector<const ir::Node*>& outputs,
                           const ValueNamer& namer);

// The plan's cost estimates, or `model`'s estimates when the fuser recorded none.
struct PlanCosts {
  std::vector<passes::GroupCost> groups;
  double total_seconds = 0;
};
PlanCosts plan_costs(const Plan& plan, const passes::CostModel& model);

// One reason per kernel boundary (a computed producer read by a group that does not compute it):
// the fuser's reasons in its order, then boundaries it gave no reason for (by group, then id),
// marked "no reason recorded by the fuser".
std::vector<passes::FusionReason> boundary_reasons(const passes::FusionPlan& fusion);

// True for nodes a dump shows as an op of a kernel (not inputs, not scalar literals).
bool is_shown_op(const ir::Node* n);
// "%name = op(%a, 2.0, axes=[1])": operands by `namer`, scalar `full` operands as literals.
std::string node_statement(const ir::Node* n, const ValueNamer& namer);
// "%producer -> %consumer: reason".
std::string reason_line(const passes::FusionReason& r, const ValueNamer& namer);
// "12.345 µs"
std::string format_micros(double seconds);

// The groups stage: one block per kernel (ops, bytes, launches, flops, cost), the total, and with
// `why` every boundary reason. `namer` names the optimized graph (optimized_namer).
std::string groups_text(const Plan& plan, const ValueNamer& namer, const passes::CostModel& model,
                        bool why);
// The kernels stage: the kernel IR of every step.
std::string kernels_text(const Plan& plan);
// The source stage: the generated LLVM IR of every step; the plan must have been compiled.
std::string source_text(const Plan& plan);
// "parameters: %x %W1 %b1 %h": each kernel parameter's value, in parameter order (the source of
// every target numbers its buffers in this order).
std::string parameters_line(const PlanStep& step);

}  // namespace kiln::runtime
