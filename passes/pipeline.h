// The lowering script (DESIGN.md §2), read top to bottom like Halide's Lower.cpp: a graph's
// outputs go through these named steps in order, each IR -> IR. With `verify`, the IR is checked
// after every step (ir/verify.h, verify_fusion below); the observer sees it after every step
// (KILN_DUMP writes it: runtime/dump_writer.h).
//
//   graph IR      fold_literals   literal folding and identities          (passes.h)
//                 fold_views      chains of views collapse                (passes.h)
//                 cse             common subexpressions merge             (passes.h)
//                 ... the three repeat until a round changes nothing
//                 split_concats   wide concats become trees of narrow ones (passes.h)
//   fused groups  fuse            the device's fuser partitions the graph (fuser.h)
//   kernel IR     lower           one kernel per group                    (lower.h)
//   facts         analyze         what backends ask of each kernel: free   (ir/kernel_facts.h)
//                                 variables, matmul pattern, row reuse,
//                                 loop cuts; handed to codegen with it
//
// The executor then takes the kernels to its target (runtime/planner.h): compile each with its
// tuned schedule, then wire the buffer slots.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "ir/graph.h"
#include "passes/fuser.h"
#include "passes/lower.h"
#include "passes/passes.h"
#include "kiln/error.h"

namespace kiln::passes {

// Debug builds verify after every step unless told otherwise; release builds when asked
// (kiln.toml compilation.verify_ir; the tests turn it on).
#ifdef NDEBUG
inline constexpr bool kVerifyIrByDefault = false;
#else
inline constexpr bool kVerifyIrByDefault = true;
#endif

// The IR a step produces.
enum class IrLevel : uint8_t { graph, groups, kernels, facts };

struct LoweringStep {
  std::string_view name;
  IrLevel produces;
  std::string_view does;  // one line: what the step does, for docs and messages
};
// The script's steps in the order they first run (the graph steps repeat in rounds).
std::span<const LoweringStep> lowering_steps();

// What the steps have made so far.
struct Lowering {
  Outputs outputs;                     // graph IR: the outputs after the graph steps that ran
  FusionPlan fusion;                   // after `fuse`
  std::vector<LoweredKernel> kernels;  // after `lower`: kernels[k] computes fusion.groups[k];
                                       // after `analyze`, each with its facts
};

struct LoweringOptions {
  const Fuser* fuser = nullptr;  // null: the first fuser
  bool fold = true;              // fold_literals and fold_views (OptimizeOptions::fold)
  bool verify = kVerifyIrByDefault;
  // Labels kernel parameters with the graph value each holds (for dumps; no key reads labels).
  std::function<std::string(const ir::Node*)> label;
  // Called after every step that ran, numbered from 1 in running order, after verification.
  std::function<void(int number, const LoweringStep& step, const Lowering& ir)> observe;
};

// The fuser the script uses when LoweringOptions::fuser is null: the first fuser.
const Fuser& default_fuser();

// Runs the script. A verifier's finding is an error naming the step ("after step 4, fuse: ...");
// so is a group that cannot be lowered.
Expected<Lowering> run_lowering(ir::Graph& g, const Outputs& outputs,
                                const LoweringOptions& options);

// A fusion plan of `outputs` is sound: every group writes only nodes it computes, every node a
// group computes reads nodes of the group or its inputs, every input is a graph input or an
// earlier group's output, and every output that is not an input is written by exactly one group.
Expected<void> verify_fusion(const Outputs& outputs, const FusionPlan& fusion);

}  // namespace kiln::passes
