// View folding: collapses chains of movement ops and removes identity views.
#include <algorithm>
#include <vector>

#include "ir/resize_taps.h"
#include "passes/passes.h"
#include "passes/rewrite.h"

namespace kiln::passes {

namespace {

using ir::AttrKey;
using ir::Node;
using ir::Op;

bool all_zero(const std::vector<int64_t>& v) {
  return std::all_of(v.begin(), v.end(), [](int64_t x) { return x == 0; });
}

bool is_identity_permutation(const std::vector<int64_t>& dims) {
  for (size_t i = 0; i < dims.size(); ++i)
    if (dims[i] != static_cast<int64_t>(i)) return false;
  return true;
}

// Flipping or rolling only size-1 axes moves nothing.
bool only_unit_axes(const Node* x, const std::vector<int64_t>& axes) {
  return std::all_of(axes.begin(), axes.end(),
                     [&](int64_t a) { return x->shape[static_cast<size_t>(a)] == 1; });
}

const Node* fold_reshape(ir::Graph& g, const Node* n, const Node* x) {
  if (x->shape == n->shape) return x;  // reshape to the same shape
  if (x->op == Op::Reshape) {          // reshape(reshape(y)) -> reshape(y)
    const Node* y = x->inputs[0];
    if (y->shape == n->shape) return y;
    return g.make(Op::Reshape, n->dtype, n->shape, {y}, n->attrs);
  }
  return n;
}

const Node* fold_permute(ir::Graph& g, const Node* n, const Node* x) {
  const std::vector<int64_t>& outer = n->attrs.ints(AttrKey::dims);
  if (is_identity_permutation(outer)) return x;
  if (x->op != Op::Permute) return n;
  // permute(permute(y, p1), p2) -> permute(y, p1[p2[i]])
  const std::vector<int64_t>& inner = x->attrs.ints(AttrKey::dims);
  std::vector<int64_t> composed(outer.size());
  for (size_t i = 0; i < outer.size(); ++i) composed[i] = inner[static_cast<size_t>(outer[i])];
  const Node* y = x->inputs[0];
  if (is_identity_permutation(composed)) return y;
  return g.make(Op::Permute, n->dtype, n->shape, {y}, ir::Attrs{{AttrKey::dims, composed}});
}

const Node* fold_expand(ir::Graph& g, const Node* n, const Node* x) {
  if (x->shape == n->shape) return x;
  if (x->op == Op::Expand)  // expand(expand(y)) -> expand(y)
    return g.make(Op::Expand, n->dtype, n->shape, {x->inputs[0]}, n->attrs);
  return n;
}

bool is_identity_slice(const Node* n, const Node* x) {
  auto axis = static_cast<size_t>(n->attrs.i(AttrKey::axis));
  return n->attrs.i(AttrKey::start) == 0 && n->attrs.i(AttrKey::step) == 1 &&
         n->shape[axis] == x->shape[axis];
}

// Views of a uniform `full` are the same `full` in the view's shape (pad is not: it adds values).
// trilu that keeps every element: upper with k <= -(rows - 1), lower with k >= cols - 1.
bool keeps_everything(const Node* n, const Node* x) {
  const int64_t rows = x->shape[x->shape.size() - 2], cols = x->shape.back();
  const int64_t k = n->attrs.i(AttrKey::k);
  return n->attrs.b(AttrKey::upper) ? k <= 1 - rows : k >= cols - 1;
}

bool moves_values_only(Op op) {
  return op == Op::Reshape || op == Op::Permute || op == Op::Expand || op == Op::Slice ||
         op == Op::Flip || op == Op::Roll || op == Op::Unfold || op == Op::Gather ||
         op == Op::GatherElements;
}

const Node* fold_view(ir::Graph& g, const Node* n) {
  const Node* x = n->inputs.empty() ? nullptr : n->inputs[0];
  if (x && x->op == Op::Full && moves_values_only(n->op))
    return make_full(g, n->dtype, n->shape, *x->attrs.find(AttrKey::value));
  const std::optional<ir::Movement> m = ir::movement_of(n->op);
  if (!m) return n;
  switch (*m) {
    case ir::Movement::Reshape:
      return fold_reshape(g, n, x);
    case ir::Movement::Permute:
      return fold_permute(g, n, x);
    case ir::Movement::Expand:
      return fold_expand(g, n, x);
    case ir::Movement::Slice:
      return is_identity_slice(n, x) ? x : n;
    case ir::Movement::Pad:
      return all_zero(n->attrs.ints(AttrKey::before)) && all_zero(n->attrs.ints(AttrKey::after))
                 ? x
                 : n;
    case ir::Movement::Concat:
      return n->inputs.size() == 1 ? x : n;
    case ir::Movement::Flip: {
      const std::vector<int64_t>& axes = n->attrs.ints(AttrKey::axes);
      if (only_unit_axes(x, axes)) return x;
      // flip(flip(y, a), a) -> y
      if (x->op == Op::Flip && x->attrs.ints(AttrKey::axes) == axes) return x->inputs[0];
      return n;
    }
    case ir::Movement::Roll: {
      const std::vector<int64_t>& axes = n->attrs.ints(AttrKey::axes);
      return all_zero(n->attrs.ints(AttrKey::shifts)) || only_unit_axes(x, axes) ? x : n;
    }
    case ir::Movement::Trilu:
      return keeps_everything(n, x) ? x : n;
    case ir::Movement::Resize:
      return ir::resize_is_identity(ir::resize_axis_of(*n)) ? x : n;
    case ir::Movement::Unfold:  // windows of y: nothing to fold
    case ir::Movement::Gather:  // reads at loaded positions: nothing to fold
    case ir::Movement::GatherElements:
    case ir::Movement::ScatterElements:  // computes: nothing to fold
      return n;
  }
  return n;
}

}  // namespace

Outputs fold_views(ir::Graph& g, const Outputs& outputs) {
  return rewrite_bottom_up(g, outputs, [](ir::Graph& gr, const Node* n) {
    return ir::is_movement(n->op) ? fold_view(gr, n) : n;
  });
}

}  // namespace kiln::passes
