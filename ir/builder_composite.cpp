// The composites of ir/builder.h (softmax, log_softmax, layernorm, attention) expanded into
// primitives. Their structure is part of the contract: the fuser pattern-matches it.
#include <cmath>
#include <limits>

#include "ir/builder.h"
#include "ir/builder_support.h"

namespace kiln::ir {

namespace {

using detail::op_error;

Expected<void> need_float(std::string_view op, DType t) {
  if (!is_float(t)) return op_error(op, "needs a floating dtype, got {}", dtype_name(t));
  return {};
}

}  // namespace

NodeResult Builder::softmax(const Node* x, int64_t axis) {
  KILN_IR_OK(need_float("softmax", x->dtype));
  KILN_IR_TRY(int64_t a, detail::normalize_one_axis("softmax", axis, x->shape));
  // Over an empty axis there is nothing to normalize: the result is as empty as x (numpy, torch).
  if (x->shape[a] == 0) return x;
  // m = max(x, keepdim); e = exp(x - m); s = sum(e, keepdim); y = e / s
  KILN_IR_TRY(const Node* m, reduce(Op::ReduceMax, x, std::vector<int64_t>{a}, true));
  KILN_IR_TRY(const Node* d, binary(Op::Sub, x, m));
  KILN_IR_TRY(const Node* e, unary(Op::Exp, d));
  KILN_IR_TRY(const Node* s, reduce(Op::Sum, e, std::vector<int64_t>{a}, true));
  return binary(Op::Div, e, s);
}

NodeResult Builder::log_softmax(const Node* x, int64_t axis) {
  KILN_IR_OK(need_float("log_softmax", x->dtype));
  KILN_IR_TRY(int64_t a, detail::normalize_one_axis("log_softmax", axis, x->shape));
  // Over an empty axis there is nothing to normalize: the result is as empty as x (numpy, torch).
  if (x->shape[a] == 0) return x;
  // y = (x - m) - log(sum(exp(x - m), keepdim))
  KILN_IR_TRY(const Node* m, reduce(Op::ReduceMax, x, std::vector<int64_t>{a}, true));
  KILN_IR_TRY(const Node* d, binary(Op::Sub, x, m));
  KILN_IR_TRY(const Node* e, unary(Op::Exp, d));
  KILN_IR_TRY(const Node* s, reduce(Op::Sum, e, std::vector<int64_t>{a}, true));
  KILN_IR_TRY(const Node* lse, unary(Op::Log, s));
  return binary(Op::Sub, d, lse);
}

NodeResult Builder::layernorm(const Node* x, const Node* gamma, const Node* beta, int64_t axis,
                              double eps) {
  KILN_IR_OK(need_float("layernorm", x->dtype));
  // f16 and bf16 are normalized in f32 and rounded once (mean's rule): a variance past 65504
  // stored as f16 between two of its kernels was inf, and the whole column came out as beta.
  if ((x->dtype == DType::f16 || x->dtype == DType::bf16) && gamma->dtype == x->dtype &&
      beta->dtype == x->dtype) {
    KILN_IR_TRY(const Node* x32, cast(x, DType::f32));
    KILN_IR_TRY(const Node* g32, cast(gamma, DType::f32));
    KILN_IR_TRY(const Node* b32, cast(beta, DType::f32));
    KILN_IR_TRY(const Node* y, layernorm(x32, g32, b32, axis, eps));
    return cast(y, x->dtype);
  }
  KILN_IR_TRY(int64_t a, detail::normalize_one_axis("layernorm", axis, x->shape));
  int64_t n = x->shape[a];
  // gamma and beta are per-element along the normalized axis ([n]) or scalars ([]); a [n] operand
  // gets trailing unit axes so that it lines up with `axis` when it is not the last one.
  Shape aligned{n};
  aligned.resize(x->shape.size() - a, 1);
  std::vector<const Node*> affine;
  for (auto [what, p] : {std::pair{"gamma", gamma}, std::pair{"beta", beta}}) {
    if (p->dtype != x->dtype)
      return op_error("layernorm", "{} dtype {} does not match x dtype {}", what,
                      dtype_name(p->dtype), dtype_name(x->dtype));
    if (!p->shape.empty() && p->shape != Shape{n})
      return op_error("layernorm",
                      "{} shape {} does not match axis {} of x {} (expected [{}] or [])", what,
                      shape_str(p->shape), a, shape_str(x->shape), n);
    const Node* q = p;
    if (!p->shape.empty() && aligned.size() > 1) {
      KILN_IR_TRY(q, reshape(p, aligned));
    }
    affine.push_back(q);
  }
  std::vector<int64_t> ax{a};
  KILN_IR_TRY(const Node* mu, mean(x, ax, true));
  KILN_IR_TRY(const Node* d, binary(Op::Sub, x, mu));
  KILN_IR_TRY(const Node* sq, binary(Op::Mul, d, d));
  KILN_IR_TRY(const Node* var, mean(sq, ax, true));
  KILN_IR_TRY(const Node* eps_node, scalar(eps, x->dtype));
  KILN_IR_TRY(const Node* ve, binary(Op::Add, var, eps_node));
  KILN_IR_TRY(const Node* r, unary(Op::Rsqrt, ve));
  KILN_IR_TRY(const Node* nrm, binary(Op::Mul, d, r));
  KILN_IR_TRY(const Node* scaled, binary(Op::Mul, nrm, affine[0]));
  return binary(Op::Add, scaled, affine[1]);
}

NodeResult Builder::attention(const Node* q, const Node* k, const Node* v, bool causal,
                              std::optional<double> scale) {
  const Shape &qs = q->shape, &ks = k->shape, &vs = v->shape;
  if (qs.size() < 2 || ks.size() < 2 || vs.size() < 2)
    return op_error("attention", "q, k and v must be at least 2-D, got {}, {} and {}",
                    shape_str(qs), shape_str(ks), shape_str(vs));
  if (q->dtype != k->dtype || q->dtype != v->dtype)
    return op_error("attention", "dtypes of q, k and v ({}, {}, {}) do not match",
                    dtype_name(q->dtype), dtype_name(k->dtype), dtype_name(v->dtype));
  KILN_IR_OK(need_float("attention", q->dtype));
  int64_t lq = qs[qs.size() - 2], d = qs.back(), lk = ks[ks.size() - 2];
  if (ks.back() != d)
    return op_error("attention", "head dims of q {} and k {} differ ({} vs {})", shape_str(qs),
                    shape_str(ks), d, ks.back());
  if (vs[vs.size() - 2] != lk)
    return op_error("attention", "key lengths of k {} and v {} differ ({} vs {})", shape_str(ks),
                    shape_str(vs), lk, vs[vs.size() - 2]);
  auto qk = broadcast_shapes(Shape(qs.begin(), qs.end() - 2), Shape(ks.begin(), ks.end() - 2));
  if (!qk || !broadcast_shapes(*qk, Shape(vs.begin(), vs.end() - 2)))
    return op_error("attention", "batch dimensions of q {}, k {} and v {} do not broadcast",
                    shape_str(qs), shape_str(ks), shape_str(vs));

  std::vector<int64_t> swap(ks.size());
  for (size_t i = 0; i < swap.size(); ++i) swap[i] = static_cast<int64_t>(i);
  std::swap(swap[swap.size() - 1], swap[swap.size() - 2]);
  KILN_IR_TRY(const Node* kt, permute(k, swap));
  KILN_IR_TRY(const Node* raw, matmul(q, kt));
  double sc = scale ? *scale : 1.0 / std::sqrt(static_cast<double>(d));
  KILN_IR_TRY(const Node* sc_node, scalar(sc, q->dtype));
  KILN_IR_TRY(const Node* s, binary(Op::Mul, raw, sc_node));
  if (causal) {
    // Top-left aligned like torch SDPA is_causal: query i sees keys j <= i.
    KILN_IR_TRY(const Node* qi, arange(0, lq, 1, DType::i32));
    KILN_IR_TRY(const Node* kj, arange(0, lk, 1, DType::i32));
    KILN_IR_TRY(const Node* col, reshape(qi, {lq, 1}));
    KILN_IR_TRY(const Node* row, reshape(kj, {1, lk}));
    KILN_IR_TRY(const Node* mask, binary(Op::Ge, col, row));
    KILN_IR_TRY(const Node* ninf, scalar(-std::numeric_limits<double>::infinity(), q->dtype));
    KILN_IR_TRY(s, where(mask, s, ninf));
  }
  KILN_IR_TRY(const Node* p, softmax(s, -1));
  return matmul(p, v);
}

}  // namespace kiln::ir
