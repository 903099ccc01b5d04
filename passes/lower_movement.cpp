// NodeLowering of movement ops: each view becomes a remapping of the index its reader asks for
// (gather and gather_elements: a remapping through a load of their index operand).
#include <algorithm>
#include <limits>

#include "passes/lower_context.h"
#include "kiln/error.h"

namespace kiln::passes {

namespace {

using ir::AttrKey;
using ir::DType;
using ir::Node;
using kir::Alu;
using kir::Expr;

size_t axis_attr(const Node* n, AttrKey k) {
  return static_cast<size_t>(n->attrs.i(k));
}

// Clamps an index into [0, n) where range analysis cannot prove it already is, so that a
// guarded (selected-away) load still reads inside its buffer.
const Expr* clamp_index(LowerContext& cx, const Expr* e, int64_t n) {
  IndexRange r = cx.ib().range(e);
  if (r.lo < 0) e = cx.arena().alu(Alu::Max, DType::i64, {e, cx.ib().constant(0)});
  if (r.hi > n - 1) e = cx.arena().alu(Alu::Min, DType::i64, {e, cx.ib().constant(n - 1)});
  return e;
}

// The condition 0 <= e < n, or nullptr when range analysis proves it.
const Expr* in_bounds(LowerContext& cx, const Expr* e, int64_t n) {
  IndexRange r = cx.ib().range(e);
  const Expr* cond = nullptr;
  auto conj = [&](const Expr* c) {
    cond = cond ? cx.arena().alu(Alu::And, DType::boolean, {cond, c}) : c;
  };
  if (r.lo < 0) conj(cx.arena().alu(Alu::Ge, DType::boolean, {e, cx.ib().constant(0)}));
  if (r.hi > n - 1) conj(cx.arena().alu(Alu::Lt, DType::boolean, {e, cx.ib().constant(n)}));
  return cond;
}

NodeLowering plan_pad(LowerContext& cx, const Node* n, const Index& idx) {
  const Node* x = n->inputs[0];
  const std::vector<int64_t>& before = n->attrs.ints(AttrKey::before);
  const Expr* padding = cx.arena().constant(n->dtype, n->attrs.f(AttrKey::value));
  Index in(idx.size());
  const Expr* cond = nullptr;
  for (size_t a = 0; a < idx.size(); ++a) {
    int64_t len = x->shape[a];
    const Expr* j = cx.ib().add(idx[a], cx.ib().constant(-before[a]));
    IndexRange r = cx.ib().range(j);
    if (len == 0 || r.hi < 0 || r.lo >= len) return lowered(padding);  // only padding is read here
    if (const Expr* c = in_bounds(cx, j, len))
      cond = cond ? cx.arena().alu(Alu::And, DType::boolean, {cond, c}) : c;
    in[a] = clamp_index(cx, j, len);
  }
  NodeLowering l = forward(x, std::move(in));
  if (!cond) return l;
  l.build = [&cx, n, cond, padding](const std::vector<const Expr*>& v) {
    return cx.arena().alu(Alu::Where, n->dtype, {cond, v[0], padding});
  };
  return l;
}

// x at the reader's own position where the column minus the row passes the triangle's test, else
// 0 (a select; range analysis drops it where every position the reader asks for passes).
NodeLowering plan_trilu(LowerContext& cx, const Node* n, const Index& idx) {
  const size_t r = idx.size();
  const int64_t k = n->attrs.i(AttrKey::k);
  const bool upper = n->attrs.b(AttrKey::upper);
  const Expr* zero = cx.arena().constant(n->dtype, 0);
  const Expr* d = cx.ib().sub(idx[r - 1], idx[r - 2]);
  const IndexRange range = cx.ib().range(d);
  if (upper ? range.lo >= k : range.hi <= k) return forward(n->inputs[0], idx);
  if (upper ? range.hi < k : range.lo > k) return lowered(zero);
  const Expr* cond = cx.arena().alu(upper ? Alu::Ge : Alu::Le, DType::boolean, {d, cx.ib().constant(k)});
  NodeLowering l = forward(n->inputs[0], idx);
  l.build = [&cx, n, cond, zero](const std::vector<const Expr*>& v) {
    return cx.arena().alu(Alu::Where, n->dtype, {cond, v[0], zero});
  };
  return l;
}

// A chain of selects over the pieces the index can reach, last piece innermost.
NodeLowering plan_concat(LowerContext& cx, const Node* n, const Index& idx) {
  size_t axis = axis_attr(n, AttrKey::axis);
  IndexRange r = cx.ib().range(idx[axis]);
  struct Piece {
    const Node* x;
    int64_t offset;
  };
  std::vector<Piece> reachable;
  int64_t offset = 0;
  for (const Node* x : n->inputs) {
    int64_t len = x->shape[axis];
    if (len > 0 && offset <= r.hi && offset + len - 1 >= r.lo) reachable.push_back({x, offset});
    offset += len;
  }
  if (reachable.empty()) return lowered(cx.arena().constant(n->dtype, 0));  // an empty domain never runs
  // needs[q] is piece reachable.size() - 1 - q; conds[q] selects it over the pieces after it.
  NodeLowering l;
  std::vector<const Expr*> conds;
  for (size_t p = reachable.size(); p-- > 0;) {
    const Piece& piece = reachable[p];
    Index in = idx;
    in[axis] = clamp_index(cx, cx.ib().add(idx[axis], cx.ib().constant(-piece.offset)),
                           piece.x->shape[axis]);
    l.needs.emplace_back(piece.x, std::move(in));
    int64_t end = piece.offset + piece.x->shape[axis];
    conds.push_back(p + 1 == reachable.size()
                        ? nullptr
                        : cx.arena().alu(Alu::Lt, DType::boolean, {idx[axis], cx.ib().constant(end)}));
  }
  l.build = [&cx, n, conds = std::move(conds)](const std::vector<const Expr*>& v) {
    const Expr* result = v[0];
    for (size_t q = 1; q < v.size(); ++q)
      result = cx.arena().alu(Alu::Where, n->dtype, {conds[q], v[q], result});
    return result;
  };
  return l;
}

Index permute_index(const Node* n, const Index& idx) {
  const std::vector<int64_t>& dims = n->attrs.ints(AttrKey::dims);
  Index in(idx.size());
  for (size_t i = 0; i < dims.size(); ++i) in[static_cast<size_t>(dims[i])] = idx[i];
  return in;
}

Index flip_index(IndexBuilder& ib, const Node* n, const Index& idx) {
  Index in = idx;
  for (int64_t a : n->attrs.ints(AttrKey::axes)) {
    auto ax = static_cast<size_t>(a);
    in[ax] = ib.sub(ib.constant(n->shape[ax] - 1), idx[ax]);
  }
  return in;
}

// out[i] = in[(i - shift) mod len]; shifts are normalized into [0, len), so i + len - shift >= 0.
Index roll_index(IndexBuilder& ib, const Node* n, const Index& idx) {
  const std::vector<int64_t>& shifts = n->attrs.ints(AttrKey::shifts);
  const std::vector<int64_t>& axes = n->attrs.ints(AttrKey::axes);
  Index in = idx;
  for (size_t s = 0; s < axes.size(); ++s) {
    auto ax = static_cast<size_t>(axes[s]);
    int64_t len = n->shape[ax];
    in[ax] = ib.mod(ib.add(in[ax], ib.constant(len - shifts[s])), len);
  }
  return in;
}

// out[..w.., k] = in[..w*step + k..]
Index unfold_index(IndexBuilder& ib, const Node* n, const Index& idx) {
  size_t dim = axis_attr(n, AttrKey::dim);
  Index in(idx.begin(), idx.end() - 1);
  in[dim] = ib.add(ib.mul(idx[dim], n->attrs.i(AttrKey::step)), idx.back());
  return in;
}

Index slice_index(IndexBuilder& ib, const Node* n, const Index& idx) {
  size_t axis = axis_attr(n, AttrKey::axis);
  Index in = idx;
  in[axis] =
      ib.add(ib.constant(n->attrs.i(AttrKey::start)), ib.mul(idx[axis], n->attrs.i(AttrKey::step)));
  return in;
}

// A loaded index normalized (i < 0 reads i + n) and clamped into [0, n), as i64. The arithmetic
// runs in the index's own dtype when n fits it and is widened only then: comparisons of a
// sign-extended i32 come out unsigned on Mesa's lavapipe (`lt(cast(i, i64), 0)` is false for
// i = -1), and this way no comparison reads a widened value.
const Expr* take_index(LowerContext& cx, const Expr* i, int64_t n) {
  const DType t = n <= std::numeric_limits<int32_t>::max() ? i->dtype : DType::i64;  // n itself is a constant
  if (i->dtype != t) i = cx.arena().alu(Alu::Cast, t, {i});
  auto c = [&](int64_t v) { return cx.arena().constant(t, static_cast<double>(v)); };
  const Expr* negative = cx.arena().alu(Alu::Lt, DType::boolean, {i, c(0)});
  const Expr* wrapped = cx.arena().alu(Alu::Add, t, {i, c(n)});
  i = cx.arena().alu(Alu::Where, t, {negative, wrapped, i});
  i = cx.arena().alu(Alu::Max, t, {i, c(0)});
  i = cx.arena().alu(Alu::Min, t, {i, c(n - 1)});
  if (t != DType::i64) i = cx.arena().alu(Alu::Cast, DType::i64, {i});
  return i;
}

// An indirect read: the index operand is lowered first, at the output's position, and its value
// (normalized and clamped, take_index) is the data operand's index along `axis`. The clamp is
// what keeps the data load in bounds whatever the index tensor holds.
NodeLowering plan_gather(LowerContext& cx, const Node* n, const Index& idx) {
  const Node* x = n->inputs[0];
  const Node* ix = n->inputs[1];
  size_t axis = axis_attr(n, AttrKey::axis);
  const bool elements = n->op == ir::Op::GatherElements;
  const size_t rank = ix->shape.size();
  Index at = elements ? idx
                      : Index(idx.begin() + static_cast<std::ptrdiff_t>(axis),
                              idx.begin() + static_cast<std::ptrdiff_t>(axis + rank));
  NodeLowering l;
  l.needs.emplace_back(ix, std::move(at));
  l.build = [&cx, x, idx, axis, elements, rank](const std::vector<const Expr*>& v) {
    Index in;
    if (elements) {
      in = idx;
    } else {
      in.assign(idx.begin(), idx.begin() + static_cast<std::ptrdiff_t>(axis));
      in.push_back(nullptr);  // the loaded index, below
      in.insert(in.end(), idx.begin() + static_cast<std::ptrdiff_t>(axis + rank), idx.end());
    }
    in[axis] = take_index(cx, v[0], x->shape[axis]);
    return cx.emit(x, in);
  };
  return l;
}

// scatter_elements at output element q: a reduction over the m positions k of the indices' axis
// that folds the updates aimed at q. With p = q but p[axis] = k (the other axes clamped into the
// indices' extent, and no match where q lies outside it), position k matches when its index,
// wrapped once (i < 0 means i + n), equals q[axis]; an index still out of range matches nothing,
// so its update is dropped. none: the last matching k wins, found as max(k + 1) over the matches
// (0: none) and then read; add/mul: data combined with the sum/product of the matching updates;
// max/min: data combined with the max/min over k of (match ? update : data), so no identity
// constant (an infinity) is needed. The index arithmetic runs in the indices' own dtype (see
// take_index). Every target computes this the same way, without atomics: each output element is
// one thread's fold, in order.
NodeLowering plan_scatter(LowerContext& cx, const Node* n, const Index& idx) {
  const Node* x = n->inputs[0];
  const Node* ix = n->inputs[1];
  const Node* up = n->inputs[2];
  if (ix->numel() == 0) return forward(x, idx);  // no update
  NodeLowering l;
  l.needs.emplace_back(x, idx);
  l.build = [&cx, n, ix, up, idx](const std::vector<const Expr*>& v) {
    IndexBuilder& ib = cx.ib();
    kir::ExprArena& ar = cx.arena();
    const size_t axis = axis_attr(n, AttrKey::axis);
    const std::string& reduction = n->attrs.s(AttrKey::reduction);
    const Expr* data = v[0];
    const int64_t m = ix->shape[axis], len = n->shape[axis];
    const int32_t k = ib.new_var(m);
    Index p = idx;
    const Expr* inside = nullptr;
    for (size_t d = 0; d < p.size(); ++d) {
      if (d == axis || ix->shape[d] == n->shape[d]) continue;
      const Expr* lt = ar.alu(Alu::Lt, DType::boolean, {idx[d], ib.constant(ix->shape[d])});
      inside = inside ? ar.alu(Alu::And, DType::boolean, {inside, lt}) : lt;
      p[d] = ar.alu(Alu::Min, DType::i64, {idx[d], ib.constant(ix->shape[d] - 1)});
    }
    p[axis] = ib.var(k);
    const Expr* j = cx.emit(ix, p);
    const DType t = len <= std::numeric_limits<int32_t>::max() ? ix->dtype : DType::i64;
    if (j->dtype != t) j = ar.alu(Alu::Cast, t, {j});
    auto c = [&](int64_t value) { return ar.constant(t, static_cast<double>(value)); };
    const Expr* negative = ar.alu(Alu::Lt, DType::boolean, {j, c(0)});
    j = ar.alu(Alu::Where, t, {negative, ar.alu(Alu::Add, t, {j, c(len)}), j});
    const Expr* here = t == DType::i64 ? idx[axis] : ar.alu(Alu::Cast, t, {idx[axis]});
    const Expr* match = ar.alu(Alu::Eq, DType::boolean, {j, here});
    if (inside) match = ar.alu(Alu::And, DType::boolean, {inside, match});
    const DType dt = n->dtype;
    if (reduction == "none") {
      const Expr* step = ar.alu(Alu::Add, DType::i64, {ib.var(k), ib.constant(1)});
      const Expr* body = ar.alu(Alu::Where, DType::i64, {match, step, ib.constant(0)});
      const Expr* last = ar.reduce(kir::ReduceOp::Max, DType::i64, body, {k}, {m});
      const Expr* found = ar.alu(Alu::Ne, DType::boolean, {last, ib.constant(0)});
      Index at = p;
      at[axis] =
          ar.alu(Alu::Where, DType::i64,
                 {found, ar.alu(Alu::Sub, DType::i64, {last, ib.constant(1)}), ib.constant(0)});
      return ar.alu(Alu::Where, dt, {found, cx.emit(up, at), data});
    }
    const Expr* u = cx.emit(up, p);
    if (reduction == "add" || reduction == "mul") {
      const bool add = reduction == "add";
      const Expr* body = ar.alu(Alu::Where, dt, {match, u, ar.constant(dt, add ? 0 : 1)});
      const Expr* r = ar.reduce(add ? kir::ReduceOp::Sum : kir::ReduceOp::Prod, dt, body, {k}, {m});
      return ar.alu(add ? Alu::Add : Alu::Mul, dt, {data, r});
    }
    const bool max = reduction == "max";
    KILN_CHECK(max || reduction == "min") << "scatter_elements reduction " << reduction;
    const Expr* body = ar.alu(Alu::Where, dt, {match, u, data});
    const Expr* r = ar.reduce(max ? kir::ReduceOp::Max : kir::ReduceOp::Min, dt, body, {k}, {m});
    return ar.alu(max ? Alu::Max : Alu::Min, dt, {data, r});
  };
  return l;
}

}  // namespace

NodeLowering plan_movement(LowerContext& cx, const Node* n, const Index& idx) {
  IndexBuilder& ib = cx.ib();
  const Node* x = n->inputs[0];
  const std::optional<ir::Movement> m = ir::movement_of(n->op);
  KILN_CHECK(m) << "not a movement op: " << ir::op_enum_name(n->op);
  switch (*m) {
    case ir::Movement::Reshape:
      return forward(x, delinearize(ib, linearize(ib, idx, n->shape), x->shape));
    case ir::Movement::Permute:
      return forward(x, permute_index(n, idx));
    case ir::Movement::Expand:
      return forward(x, broadcast_index(ib, idx, x->shape));
    case ir::Movement::Slice:
      return forward(x, slice_index(ib, n, idx));
    case ir::Movement::Pad:
      return plan_pad(cx, n, idx);
    case ir::Movement::Concat:
      return plan_concat(cx, n, idx);
    case ir::Movement::Flip:
      return forward(x, flip_index(ib, n, idx));
    case ir::Movement::Roll:
      return forward(x, roll_index(ib, n, idx));
    case ir::Movement::Unfold:
      return forward(x, unfold_index(ib, n, idx));
    case ir::Movement::Trilu:
      return plan_trilu(cx, n, idx);
    case ir::Movement::Resize:
      return plan_resize(cx, n, idx);
    case ir::Movement::Gather:
    case ir::Movement::GatherElements:
      return plan_gather(cx, n, idx);
    case ir::Movement::ScatterElements:
      return plan_scatter(cx, n, idx);
  }
  return lowered(cx.arena().constant(n->dtype, 0));
}

}  // namespace kiln::passes
