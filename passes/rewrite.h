// The bottom-up graph rewriter shared by the graph passes.
#pragma once

#include <functional>

#include "ir/graph.h"
#include "passes/passes.h"

namespace kiln::passes {

// Returns the replacement of a node whose inputs are already rewritten (or the node itself).
using RewriteRule = std::function<const ir::Node*(ir::Graph&, const ir::Node*)>;

// Visits the live nodes in topological order, re-interns each node whose inputs changed, then
// applies `rule` to it. Returns `outputs` itself when no output changed.
Outputs rewrite_bottom_up(ir::Graph& g, const Outputs& outputs, const RewriteRule& rule);

// A `full` node of the given dtype, shape and value (the canonical form of ir/builder.h).
const ir::Node* make_full(ir::Graph& g, ir::DType dtype, const ir::Shape& shape,
                          ir::AttrValue value);

}  // namespace kiln::passes
