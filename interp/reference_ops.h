// The reference interpreter's op families: each evaluates one graph node from its input values.
#pragma once

#include <vector>

#include "interp/reference_value.h"
#include "ir/graph.h"
#include "kiln/error.h"

namespace kiln::interp::reference {

using Args = std::vector<const Value*>;

// Every elementwise op of kiln/ops.def (unary, binary, comparisons, logic, where, cast), with
// implicit numpy broadcasting of the inputs to the node's shape.
Value eval_elementwise(const ir::Node& n, const Args& args);
// Sum, ReduceMax, ReduceMin, Prod, ArgMax, ArgMin. Max, min and arg reductions over an empty
// axis have no identity and are errors.
Expected<Value> eval_reduce(const ir::Node& n, const Value& x);
// Reshape, Permute, Expand, Slice, Pad, Concat, Flip, Roll, Unfold, Gather, GatherElements.
Value eval_movement(const ir::Node& n, const Args& args);
// ScatterElements: data with the updates written or folded in C order of the indices
// (ir/builder.h).
Value eval_scatter(const ir::Node& n, const Value& x, const Value& idx, const Value& upd);
// Batched matmul with broadcast batch dims.
Value eval_matmul(const ir::Node& n, const Value& a, const Value& b);
// CumSum: the running sum along `axis` in scan order (reverse: from the end; exclusive: the sum
// of the elements before, 0 for the first). TopKIndices: each row's k best positions (stable).
Value eval_scan(const ir::Node& n, const Value& x);

}  // namespace kiln::interp::reference
