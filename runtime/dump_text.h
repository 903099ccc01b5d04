// Text dumps of a Plan, shared by `kiln dump` and KILN_DUMP: the standalone `.kg` of a subgraph,
// the fused groups with their cost estimates and fusion reasons, the kernel IR and the source.
#pragma once

#include <string>
#include <string_view>
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

// The plan's optimized graph as a standalone `.kg` graph with the names of `outputs` (the
// original outputs) and `namer` (the caller's names of the original graph): each output keeps its
// own name, one that optimized to an input too (the printer writes it as an alias).
ir::KgGraph optimized_graph(const Plan& plan, const std::vector<const ir::Node*>& outputs,
                            const std::vector<const ir::Node*>& inputs, const ValueNamer& namer);

// Names values of the optimized graph: each optimized output takes the name of the original
// output it replaces (as build_plan names them), unless it is an input, which keeps its own;
// other values go to `namer` (null: defaults).
ValueNamer optimized_namer(const Plan& plan, const std::vector<const ir::Node*>& outputs,
                           const ValueNamer& namer);
// The same for any rewrite of `outputs`: now[i] takes the name of outputs[i].
ValueNamer rewritten_namer(const std::vector<const ir::Node*>& now,
                           const std::vector<const ir::Node*>& outputs, const ValueNamer& namer);

// The plan's cost estimates, or `model`'s estimates when the fuser recorded none.
struct PlanCosts {
  std::vector<passes::GroupCost> groups;
  double total_seconds = 0;
};
PlanCosts plan_costs(const Plan& plan, const passes::CostModel& model);
PlanCosts fusion_costs(const passes::FusionPlan& fusion, const passes::CostModel& model);

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
// The two estimates behind a boundary, by `model`: where the producer's and the consumer's kernels
// have one shape, "apart: k0 A + k1 B = S; as one kernel: T" (one kernel computing both groups,
// writing both groups' outputs); else "k1 reading %p: B; recomputing it there: T" (the consumer's
// kernel computing the producer's value itself). "" when the reason names no two kernels.
std::string boundary_estimates(const passes::FusionReason& r, const passes::FusionPlan& fusion,
                               const passes::CostModel& model, const ValueNamer& namer);
// reason_line with the estimates in parentheses: "%h -> %y0: matmul operand (apart: ...)".
std::string reason_line(const passes::FusionReason& r, const ValueNamer& namer,
                        const passes::FusionPlan& fusion, const passes::CostModel& model);
// "12.345 µs"
std::string format_micros(double seconds);

// The groups stage: one block per kernel (ops, bytes, launches, flops, cost), the total, and with
// `why` every boundary reason. `namer` names the optimized graph (optimized_namer).
std::string groups_text(const Plan& plan, const ValueNamer& namer, const passes::CostModel& model,
                        bool why);
// The same for a fusion plan alone (the lowering script's `fuse` step); kernel k is named
// kernel_names[k], or k<k> past their end.
std::string fusion_text(const passes::FusionPlan& fusion, std::string_view fuser,
                        const std::vector<std::string>& kernel_names, const ValueNamer& namer,
                        const passes::CostModel& model, bool why);
// The values a group computes, by id (sources and inputs left out), and with `num_ops` the count
// of them that are ops (views left out): a plan step's values and num_ops.
std::vector<std::string> group_values(const passes::FusedGroup& group, const ValueNamer& namer,
                                      int* num_ops = nullptr);
// The kernels stage: the kernel IR of every step. With the plan's inputs (in plan order), a
// kernel with run-time sizes names the size symbol each slot is (size_symbols).
std::string kernels_text(const Plan& plan, const std::vector<const ir::Node*>& inputs = {});
// Per run-time size slot of `step`'s kernel, the size symbol it holds, as `.kg` writes it: "?n"
// where an input parameter's axis of that slot is a symbolic axis of the plan input it reads
// (`inputs`, in plan order; ir::input_symbols), "1/?n" for a float slot that is exactly one over
// such a slot's value (a mean's scale); "" where neither says.
std::vector<std::string> size_symbols(const Plan& plan, const PlanStep& step,
                                      const std::vector<const ir::Node*>& inputs);
// The analyze stage: what codegen is told of each kernel (ir/kernel_facts.h), headed like the
// kernels stage; "" for a kernel without its facts (a plan read back from its record).
std::string facts_text(const Plan& plan);
// One kernel of it: "# k0: %y %h" (the values it computes), then its kernel IR.
// `symbols` (size_symbols) and `outer` (a dynamic kernel's outer axis, `?`: its size symbol): a
// line that names them.
std::string kernel_block(const kir::Kernel& kernel, const std::vector<std::string>& values,
                         const std::vector<std::string>& symbols = {},
                         const std::string& outer = "");
// The plan's buffer wiring: each slot (dtype, shape, input position), each step's slot per
// parameter and the temporaries released after it, the output slots.
std::string slots_text(const Plan& plan);
// A step's head in the source stages, as comments: its name and values, its parameters, and
// what Artifact::summary says of it (a GPU kernel's strategy and launch shape), each on a line.
std::string step_header(const PlanStep& step, std::string_view comment);
// The line comment of a source language by its file extension: ";" for LLVM IR ("ll") and SPIR-V
// assembly ("spvasm"), "//" for CUDA C and GLSL.
std::string_view comment_marker(std::string_view extension);
// The source stage: the generated source of every step (the target's: LLVM IR, CUDA C, GLSL,
// named by its file extension), each headed by its values, its parameters and (GPU kernels) its
// launch strategy and shape (Artifact::summary); the plan must have been compiled.
std::string source_text(const Plan& plan, std::string_view extension = "ll");
// "parameters: %x %W1 %b1 %h": each kernel parameter's value, in parameter order (the source of
// every target numbers its buffers in this order).
std::string parameters_line(const PlanStep& step);

}  // namespace kiln::runtime
