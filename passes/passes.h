// The catalogue of graph passes. Each pass takes the graph arena (for the nodes it creates) and
// the outputs, and returns the new outputs; a pass that changes nothing returns its input.
// Nodes are interned, so common-subexpression elimination happens at construction, and anything
// not reachable from the outputs is dead by construction (topo_order visits only live nodes).
#pragma once

#include <functional>
#include <string_view>
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
