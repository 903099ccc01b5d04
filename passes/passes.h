// The catalogue of graph passes. Each pass takes the graph arena (for the nodes it creates) and
// the outputs, and returns the new outputs; a pass that changes nothing returns its input.
// Nodes are interned, so common-subexpression elimination happens at construction, and anything
// not reachable from the outputs is dead by construction (topo_order visits only live nodes).
#pragma once

#include <functional>
#include <string_view>
#include <unordered_set>
#include <vector>

#include "ir/graph.h"
#include "kiln/error.h"

namespace kiln::passes {

using Outputs = std::vector<const ir::Node*>;

// Re-interns every live node bottom-up, so structurally equal subgraphs built through different
// paths (e.g. after other rewrites) collapse into one node.
Outputs eliminate_common_subexpressions(ir::Graph& g, const Outputs& outputs);
// Literal folding: elementwise ops whose operands are all `full` become one `full` of the op's
// shape (not for f16/bf16, whose rounding is left to the targets); identities x*1, 1*x, x+0, 0+x,
// x-0, x/1, neg(neg x), cast to the same dtype, where(literal, a, b) are removed, but only where
// the replacement has exactly the node's dtype and shape (x*1 that broadcasts x is kept).
Outputs fold_literals(ir::Graph& g, const Outputs& outputs);
// View folding: chains of movement ops collapse (reshape∘reshape, permute∘permute,
// expand∘expand; identity reshape/permute/expand/slice/pad/roll/flip/concat-of-one removed,
// flip∘flip of the same axes removed); a view (not pad) of a `full` becomes a `full`.
Outputs fold_views(ir::Graph& g, const Outputs& outputs);
// Wide concats: a concat of more than kConcatFanIn operands becomes a tree of concats of at most
// kConcatFanIn each (the first ones full, in order). Lowered, a concat is a chain of one select
// and one load per operand at every element it writes (passes/lower_movement.cpp), so a concat
// of n pieces costs O(n) per element and O(n^2) in all: the 2000 steps of an unrolled LSTM
// stacked into its output took 18 ms of a 20 ms run and compiled a kernel of 2000 parameters.
// As a tree whose inner concats are written to buffers (is_written_concat_piece), each element
// costs at most kConcatFanIn selects per level, log_16(n) levels, and each kernel reads at most
// kConcatFanIn buffers. Run once after the graph rounds, whatever OptimizeOptions::fold says.
inline constexpr size_t kConcatFanIn = 16;
Outputs split_wide_concats(ir::Graph& g, const Outputs& outputs);
// Whether every fuser writes `piece`, an operand of `reader`, to a buffer: both are concats along
// one axis, and inlining the piece would give the reader's chain more than kConcatFanIn operands
// (the inner nodes of split_wide_concats's trees; concat(concat(a, b), c) stays one kernel).
bool is_written_concat_piece(const ir::Node* reader, const ir::Node* piece);
// Adds to `written` every operand of a node of `live` that is_written_concat_piece names.
void add_written_concat_pieces(const std::vector<const ir::Node*>& live,
                               std::unordered_set<const ir::Node*>& written);
// Dead-code elimination over the output list: returns the live nodes in topological order.
std::vector<const ir::Node*> live_nodes(const Outputs& outputs);

struct OptimizeOptions {
  bool fold = true;
  // After every step ("fold_literals", "fold_views", "cse") with the outputs it left; an error
  // stops the rounds and is returned (the lowering script verifies and dumps here).
  std::function<Expected<void>(std::string_view step, const Outputs&)> after_step;
};
// The graph steps of the lowering script (passes/pipeline.h): fold_literals, fold_views, cse, in
// rounds until one changes nothing.
Expected<Outputs> optimize_steps(ir::Graph& g, const Outputs& outputs,
                                 const OptimizeOptions& options);
// optimize_steps without a hook (it cannot fail then).
Outputs optimize(ir::Graph& g, const Outputs& outputs, const OptimizeOptions& options = {});

}  // namespace kiln::passes
