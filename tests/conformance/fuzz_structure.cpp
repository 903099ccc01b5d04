// The fuzz generator's reductions (over one, several or all axes, keepdim or not), arg-reductions,
// matmuls and composites (softmax, log_softmax, layernorm, attention).
#include <cmath>

#include "fuzz_steps.h"

namespace kiln::testing::fuzz {

using ir::DType;
using ir::Op;

namespace {

// v's node in its frame's shape, so that axes index the base shape.
const ir::Node* in_frame(Generator& g, const FuzzValue& v) {
  if (v.node->shape == v.frame) return v.node;
  return g.ok(g.b().reshape(v.node, std::vector<int64_t>(v.frame.begin(), v.frame.end())), "reshape");
}

bool full_frame(const Generator& g, const FuzzValue& v) { return v.frame == g.base(); }

// Some axes (nullopt: all of them, which gives a scalar without keepdim) and how many elements
// each output element combines.
std::pair<std::optional<std::vector<int64_t>>, int64_t> random_axes(Generator& g, const ir::Shape& frame) {
  if (g.chance(0.3)) return {std::nullopt, ir::shape_numel(frame)};
  std::vector<int64_t> axes;
  int64_t count = 1;
  for (int64_t a = 0; a < g.rank(); ++a)
    if (g.chance(0.5)) axes.push_back(a), count *= frame[static_cast<size_t>(a)];
  if (axes.empty()) {
    axes.push_back(g.pick(g.rank()));
    count = frame[static_cast<size_t>(axes[0])];
  }
  return {axes, count};
}

ir::Shape reduced_frame(const Generator& g, ir::Shape frame, const std::optional<std::vector<int64_t>>& axes) {
  for (int64_t a = 0; a < g.rank(); ++a)
    if (!axes || std::find(axes->begin(), axes->end(), a) != axes->end()) frame[static_cast<size_t>(a)] = 1;
  return frame;
}

// Factors in [0.75, 1.25], so that a product of up to 32 of them stays well inside every dtype.
// The factors of an f16 or bf16 value are f32 (step_reduce casts their product back): in its own
// dtype, each plan rounds a factor where it stores it (docs/graph-format.md) and the product
// amplifies that rounding by its count: 32 bf16 factors of 1.1155 fused and 1.1171875 stored gave
// 33 and 34.75 (fuzz seed 20263372), past bf16's tolerance of 3% though both plans keep kiln's
// rule.
FuzzValue prod_guard(Generator& g, const FuzzValue& v) {
  const bool half_float = v.dtype() == DType::f16 || v.dtype() == DType::bf16;
  const DType ct = half_float ? DType::f32 : v.dtype();
  const ir::Node* x = half_float ? g.ok(g.b().cast(v.node, ct), "cast") : v.node;
  const ir::Node* s = g.ok(g.b().unary(Op::Sigmoid, x), "sigmoid");
  const ir::Node* half = g.ok(g.b().binary(Op::Mul, s, literal(g, ct, 0.5).node), "mul");
  FuzzValue r = derive(g.ok(g.b().binary(Op::Add, half, literal(g, ct, 0.75).node), "add"), v);
  r.exact = false, r.grid = -1, r.zero_sign = false, r.lo = 0.75, r.hi = 1.25;
  return r;
}

// Bounds and exactness of a reduction of `count` elements of v.
bool settle_reduction(FuzzValue& r, const FuzzValue& v, int which, int64_t count) {
  const double n = static_cast<double>(count);
  switch (which) {
    case 0:  // sum: exact while the total is representable
      settle_bounds(r, std::min(v.lo * n, v.lo), std::max(v.hi * n, v.hi));
      r.zero_sign = false;
      settle_exactness(r);
      return !r.special || r.exact;
    case 1:  // mean
      r.exact = false, r.grid = -1, r.zero_sign = false;
      return true;
    case 4:  // prod
      if (ir::is_float(r.dtype())) {
        r.exact = false, r.grid = -1, r.zero_sign = false;
        settle_bounds(r, std::pow(v.lo, n), std::pow(v.hi, n));
      } else {
        settle_bounds(r, -std::pow(v.bound(), n), std::pow(v.bound(), n));
      }
      return true;
    default:  // max, min: bounds and exactness carry over
      return true;
  }
}

}  // namespace

StepResult step_reduce(Generator& g) {
  const int which = static_cast<int>(g.pick(5));  // sum mean max min prod
  auto v = g.pick_value([&](const FuzzValue& v) {
    if (!numeric(v) || (which == 1 && !smooth_float(v))) return false;
    if (which == 4) return v.smooth_ok() && (ir::is_int(v.dtype()) || v.exact || smooth_float(v));
    return v.exact || v.smooth_ok();
  });
  if (!v) return std::nullopt;
  auto [axes, count] = random_axes(g, v->frame);
  FuzzValue x = *v;
  if (which == 4) {
    if (count > 32) return std::nullopt;
    if (ir::is_float(x.dtype())) x = prod_guard(g, x);
  }
  const bool keepdim = g.chance(0.5);
  const ir::Node* in = in_frame(g, x);
  constexpr Op kOps[] = {Op::Sum, Op::Sum, Op::ReduceMax, Op::ReduceMin, Op::Prod};
  ir::NodeResult n = which == 1 ? g.b().mean(in, axes, keepdim) : g.b().reduce(kOps[which], in, axes, keepdim);
  FuzzValue r = derive(g.ok(n, "reduction"), x);
  r.frame = reduced_frame(g, x.frame, axes);
  if (!settle_reduction(r, x, which, count)) return std::nullopt;
  if (r.dtype() != v->dtype())
    r.node = g.ok(g.b().cast(r.node, v->dtype()), "cast");  // prod_guard's f32
  return r;
}

StepResult step_arg_reduce(Generator& g) {
  auto v = g.pick_value([](const FuzzValue& v) { return v.exact; });
  if (!v) return std::nullopt;
  const int64_t axis = g.pick(g.rank());
  const bool keepdim = g.chance(0.5);
  const Op op = g.chance(0.5) ? Op::ArgMax : Op::ArgMin;
  FuzzValue r = derive(g.ok(g.b().arg_reduce(op, in_frame(g, *v), axis, keepdim), "arg reduction"), *v);
  r.frame = reduced_frame(g, v->frame, std::vector<int64_t>{axis});
  r.special = false, r.grid = 0, r.zero_sign = true, r.loosest = DType::f64;
  settle_bounds(r, 0, static_cast<double>(v->frame[static_cast<size_t>(axis)] - 1));
  return r;
}

// Rank 1: a dot product (a scalar). Rank >= 2: tanh(x @ y^T) @ x, which keeps x's shape.
StepResult step_matmul(Generator& g) {
  auto fits = [&](const FuzzValue& v) { return smooth_float(v) && full_frame(g, v); };
  // x @ y^T is [..., M, M]: only for M small enough that it stays a small tensor.
  if (g.rank() >= 2 && g.base()[g.base().size() - 2] > 64) return std::nullopt;
  auto x = g.pick_value(fits);
  if (!x) return std::nullopt;
  auto y = g.pick_value([&](const FuzzValue& v) { return fits(v) && v.dtype() == x->dtype(); });
  const ir::Node *xn = in_frame(g, *x), *yn = in_frame(g, *y);
  const double k = static_cast<double>(g.base().back());
  if (g.rank() == 1) {
    FuzzValue r = derive(g.ok(g.b().matmul(xn, yn), "dot"), *x, *y);
    r.frame = {1};
    r.exact = false, r.grid = -1, r.zero_sign = false;
    settle_bounds(r, -k * x->bound() * y->bound(), k * x->bound() * y->bound());
    return r;
  }
  std::vector<int64_t> swap(static_cast<size_t>(g.rank()));
  for (size_t i = 0; i < swap.size(); ++i) swap[i] = static_cast<int64_t>(i);
  std::swap(swap[swap.size() - 1], swap[swap.size() - 2]);
  FuzzValue z = derive(g.ok(g.b().matmul(xn, g.ok(g.b().permute(yn, swap), "permute")), "matmul"), *x, *y);
  z.exact = false, z.grid = -1, z.zero_sign = false;
  settle_bounds(z, -k * x->bound() * y->bound(), k * x->bound() * y->bound());
  FuzzValue t = scale_down(g, z, 2);
  t = derive(g.ok(g.b().unary(Op::Tanh, t.node), "tanh"), t);
  FuzzValue r = derive(g.ok(g.b().matmul(t.node, xn), "matmul"), t, *x);
  const double m = static_cast<double>(g.base()[g.base().size() - 2]);
  settle_bounds(r, -m * x->bound(), m * x->bound());
  return r;
}

StepResult step_composite(Generator& g) {
  const int which = static_cast<int>(g.pick(g.rank() >= 2 ? 4 : 3));
  const int64_t last = g.base().back();
  auto v = g.pick_value([&](const FuzzValue& v) {
    if (!smooth_float(v)) return false;
    // attention: scores of q.k/sqrt(d) stay O(1) only for short heads of bounded values.
    if (which == 3) return full_frame(g, v) && last <= 64;
    // layernorm divides by the row's deviation: only rows of continuous random data, long
    // enough that the deviation is never tiny, are well conditioned.
    if (which == 2) return v.grid < 0 && !v.exact && v.frame.back() == last && (last == 1 || last >= 8);
    return true;
  });
  if (!v) return std::nullopt;
  const ir::Node* x = in_frame(g, *v);
  FuzzValue r;
  if (which <= 1) {
    const int64_t axis = g.pick(g.rank());
    r = derive(g.ok(which == 0 ? g.b().softmax(x, axis) : g.b().log_softmax(x, axis), "softmax"), *v);
    const double n = static_cast<double>(v->frame[static_cast<size_t>(axis)]);
    settle_bounds(r, which == 0 ? 0 : -(2 * v->bound() + std::log(n)), which == 0 ? 1 : 0);
  } else if (which == 2) {
    ir::Shape row(static_cast<size_t>(g.rank()), 1);
    row.back() = last;
    FuzzValue gamma = g.input(v->dtype(), row, InputKind::positive);
    FuzzValue beta = g.input(v->dtype(), row, InputKind::normal);
    auto flat = [&](const FuzzValue& p) { return g.ok(g.b().reshape(p.node, {last}), "reshape"); };
    r = derive(g.ok(g.b().layernorm(x, flat(gamma), flat(beta), -1, 1e-5), "layernorm"), *v, gamma);
    const double b = std::sqrt(static_cast<double>(last)) * 4.25 + 4;
    settle_bounds(r, -b, b);
  } else {
    auto k = g.pick_value([&](const FuzzValue& o) { return smooth_float(o) && full_frame(g, o) && o.dtype() == v->dtype(); });
    FuzzValue q = scale_down(g, *v, 1), kk = scale_down(g, *k, 1);
    r = derive(g.ok(g.b().attention(in_frame(g, q), in_frame(g, kk), x, g.chance(0.5), std::nullopt), "attention"), *v, *k);
  }
  r.exact = false, r.grid = -1, r.zero_sign = false;
  return r;
}

}  // namespace kiln::testing::fuzz
