// The fuzz generator's elementwise steps: unary, binary, comparison/where and cast, each keeping
// its operands in a domain where the devices' rounding cannot flip a result.
#include <cmath>

#include "fuzz_steps.h"

namespace kiln::testing::fuzz {

using ir::DType;
using ir::Op;

bool numeric(const FuzzValue& v) { return v.dtype() != DType::boolean; }
bool smooth_float(const FuzzValue& v) { return ir::is_float(v.dtype()) && v.smooth_ok(); }

// Integer results that may have wrapped keep the dtype's whole range as bounds.
void settle_bounds(FuzzValue& v, double lo, double hi) {
  v.lo = lo, v.hi = hi;
  const DType t = v.dtype();
  if (ir::is_int(t)) {
    double min = t == DType::u8 ? 0 : -exact_int_limit(t) - 1, max = exact_int_limit(t);
    if (lo < min || hi > max) v.lo = min, v.hi = max;
  }
}

// After arithmetic on exact floats: still exact only if no rounding could have happened.
void settle_exactness(FuzzValue& v) {
  if (!ir::is_float(v.dtype()) || !v.exact) return;
  if (!representable(v.dtype(), v.grid, v.bound())) v.exact = false, v.grid = -1;
}

FuzzValue literal(Generator& g, DType dtype, double value) {
  FuzzValue v;
  v.node = g.ok(g.b().scalar(value, dtype), "literal");
  v.frame = ir::Shape(static_cast<size_t>(g.rank()), 1);
  v.grid = value == std::floor(value) ? 0 : 1;
  v.lo = v.hi = value;
  v.loosest = ir::is_float(dtype) ? dtype : DType::f64;
  return v;
}

// Scales v by a power of two (exact) so that its bound is at most `limit`.
FuzzValue scale_down(Generator& g, const FuzzValue& v, double limit) {
  if (v.bound() <= limit) return v;
  const int k = static_cast<int>(std::ceil(std::log2(v.bound() / limit)));
  const double f = std::ldexp(1.0, -k);
  FuzzValue r = derive(g.ok(g.b().binary(Op::Mul, v.node, literal(g, v.dtype(), f).node), "scale"), v);
  if (r.grid >= 0) r.grid += k;
  r.lo = v.lo * f, r.hi = v.hi * f;
  return r;
}

namespace {

enum class Need { any, smooth, exact };

// A partner for a binary op on `a`: a value of the same dtype (or a literal) that may meet it.
FuzzValue partner(Generator& g, const FuzzValue& a, Need need) {
  auto fits = [&](const FuzzValue& b) {
    if (b.dtype() != a.dtype()) return false;
    if (need == Need::smooth) return b.smooth_ok();
    if (need == Need::exact) return b.exact;
    return (!a.special && !b.special) || (a.exact && b.exact);
  };
  if (!g.chance(0.2))
    if (auto b = g.pick_value(fits)) return *b;
  double v = static_cast<double>(g.pick(7) - 3);
  if (ir::is_float(a.dtype()) && g.chance(0.3)) v = 0.5;
  if (a.dtype() == DType::u8) v = std::abs(v);
  if (a.dtype() == DType::boolean) v = static_cast<double>(g.pick(2));
  return literal(g, a.dtype(), v);
}

std::pair<double, double> span(std::initializer_list<double> xs) {
  return {std::min(xs), std::max(xs)};
}

}  // namespace

FuzzValue guard_positive(Generator& g, const FuzzValue& v) {
  FuzzValue a = derive(g.ok(g.b().unary(Op::Abs, v.node), "guard abs"), v);
  FuzzValue r = derive(g.ok(g.b().binary(Op::Add, a.node, literal(g, v.dtype(), 1).node), "guard add"), a);
  r.lo = 1, r.hi = v.bound() + 1;
  settle_exactness(r);
  return r;
}

StepResult step_unary_smooth(Generator& g) {
  auto v = g.pick_value(smooth_float);
  if (!v) return std::nullopt;
  constexpr Op kOps[] = {Op::Exp, Op::Log,  Op::Sqrt,    Op::Rsqrt, Op::Recip, Op::Sin,
                         Op::Cos, Op::Tanh, Op::Sigmoid, Op::Gelu,  Op::Erf};
  const Op op = kOps[g.pick(11)];
  FuzzValue x = *v;
  if (op == Op::Log || op == Op::Sqrt || op == Op::Rsqrt || op == Op::Recip)
    if (x.lo < 0.25) x = guard_positive(g, x);
  if (op == Op::Exp || op == Op::Sin || op == Op::Cos) x = scale_down(g, x, 4);
  FuzzValue r = derive(g.ok(g.b().unary(op, x.node), "unary"), x);
  r.exact = false, r.grid = -1, r.zero_sign = false;
  std::pair<double, double> b{-1, 1};  // sin cos tanh erf
  if (op == Op::Exp) b = {std::exp(x.lo), std::exp(x.hi)};
  else if (op == Op::Log) b = {std::log(x.lo), std::log(x.hi)};
  else if (op == Op::Sqrt) b = {std::sqrt(x.lo), std::sqrt(x.hi)};
  else if (op == Op::Rsqrt) b = {1 / std::sqrt(x.hi), 1 / std::sqrt(x.lo)};
  else if (op == Op::Recip) b = {1 / x.hi, 1 / x.lo};
  else if (op == Op::Sigmoid) b = {0, 1};
  else if (op == Op::Gelu) b = {-0.2, std::max(x.hi, 0.0)};
  settle_bounds(r, b.first, b.second);
  return r;
}

StepResult step_unary_exact(Generator& g) {
  constexpr Op kOps[] = {Op::Neg, Op::Abs, Op::Relu, Op::Sign, Op::Floor, Op::Ceil};
  const Op op = kOps[g.pick(6)];
  const bool discontinuous = op == Op::Sign || op == Op::Floor || op == Op::Ceil;
  const bool float_only = op == Op::Floor || op == Op::Ceil;
  auto v = g.pick_value([&](const FuzzValue& v) {
    if (!numeric(v) || (float_only && !ir::is_float(v.dtype()))) return false;
    return discontinuous ? v.exact : v.exact || v.smooth_ok();
  });
  if (!v) return std::nullopt;
  FuzzValue r = derive(g.ok(g.b().unary(op, v->node), "unary"), *v);
  if (op == Op::Neg) {
    settle_bounds(r, -v->hi, -v->lo);
  } else if (op == Op::Abs) {
    settle_bounds(r, v->lo > 0 ? v->lo : v->hi < 0 ? -v->hi : 0, v->bound());
  } else if (op == Op::Relu) {
    settle_bounds(r, std::max(v->lo, 0.0), std::max(v->hi, 0.0));
  } else if (op == Op::Sign) {
    r.zero_sign = false, r.grid = 0, settle_bounds(r, -1, 1);
  } else {  // floor, ceil
    r.grid = 0;
    settle_bounds(r, std::floor(v->lo), std::ceil(v->hi));
  }
  return r;
}

StepResult step_binary(Generator& g) {
  constexpr Op kOps[] = {Op::Add, Op::Sub, Op::Mul, Op::Div, Op::Pow, Op::Max, Op::Min};
  const Op op = kOps[g.pick(7)];
  const bool rounding_float = op == Op::Pow || op == Op::Div;  // (on float operands)
  // NaN/inf kept out of add, sub and mul too on a device that folds x*0 and x-x.
  const bool finite_only = rounding_float || (!g.special_arithmetic() && op != Op::Max && op != Op::Min);
  auto a = g.pick_value([&](const FuzzValue& v) {
    if (!numeric(v)) return false;
    if (op == Op::Pow) return smooth_float(v);
    return !(finite_only && ir::is_float(v.dtype())) || v.smooth_ok();
  });
  if (!a) return std::nullopt;
  const bool is_float = ir::is_float(a->dtype());
  FuzzValue x = *a, y = partner(g, x, finite_only && is_float ? Need::smooth : Need::any);
  if (op == Op::Pow) x = guard_positive(g, x), y = scale_down(g, y, 2);
  if (op == Op::Div && is_float) y = guard_positive(g, y);
  FuzzValue r = derive(g.ok(g.b().binary(op, g.framed(x), g.framed(y)), "binary"), x, y);
  auto [lo, hi] = span({0.0});
  if (op == Op::Add) {
    std::tie(lo, hi) = span({x.lo + y.lo, x.hi + y.hi});
  } else if (op == Op::Sub) {
    std::tie(lo, hi) = span({x.lo - y.hi, x.hi - y.lo});
  } else if (op == Op::Mul) {
    std::tie(lo, hi) = span({x.lo * y.lo, x.lo * y.hi, x.hi * y.lo, x.hi * y.hi});
    if (r.grid >= 0) r.grid = x.grid + y.grid;
  } else if (op == Op::Div) {
    if (is_float) {
      std::tie(lo, hi) = span({x.lo / y.lo, x.lo / y.hi, x.hi / y.lo, x.hi / y.hi});
    } else {
      std::tie(lo, hi) = span({-x.bound() - 1, x.bound() + 1});
    }
  } else if (op == Op::Pow) {
    std::tie(lo, hi) = span({std::pow(x.lo, y.lo), std::pow(x.lo, y.hi), std::pow(x.hi, y.lo),
                             std::pow(x.hi, y.hi)});
  } else if (op == Op::Max) {
    std::tie(lo, hi) = span({std::max(x.lo, y.lo), std::max(x.hi, y.hi)});
  } else {  // min
    std::tie(lo, hi) = span({std::min(x.lo, y.lo), std::min(x.hi, y.hi)});
  }
  if (rounding_float && is_float) r.exact = false, r.grid = -1, r.zero_sign = false;
  settle_bounds(r, lo, hi);
  settle_exactness(r);
  if (r.special && !r.exact) return std::nullopt;  // NaN/inf only through exact arithmetic
  return r;
}

// A comparison of exact values (rounding never flips it), or where() that selects by one; or
// where(a > b, a, b) on any floats, which is continuous.
StepResult step_compare_where(Generator& g) {
  if (g.chance(0.2)) {
    auto a = g.pick_value(smooth_float);
    if (!a) return std::nullopt;
    FuzzValue b = partner(g, *a, Need::smooth);
    const ir::Node* c = g.ok(g.b().binary(Op::Gt, g.framed(*a), g.framed(b)), "gt");
    FuzzValue r = derive(g.ok(g.b().where(c, g.framed(*a), g.framed(b)), "where"), *a, b);
    settle_bounds(r, std::max(a->lo, b.lo), std::max(a->hi, b.hi));
    return r;
  }
  auto a = g.pick_value([](const FuzzValue& v) { return v.exact; });
  if (!a) return std::nullopt;
  FuzzValue cond;
  if (a->dtype() == DType::boolean && g.chance(0.5)) {
    constexpr Op kLogic[] = {Op::And, Op::Or, Op::Not};
    const Op op = kLogic[g.pick(3)];
    FuzzValue b = op == Op::Not ? *a : partner(g, *a, Need::exact);
    cond = derive(g.ok(op == Op::Not ? g.b().unary(op, a->node) : g.b().binary(op, g.framed(*a), g.framed(b)), "logic"), *a, b);
  } else {
    constexpr Op kCmp[] = {Op::Eq, Op::Ne, Op::Lt, Op::Le, Op::Gt, Op::Ge};
    FuzzValue b = partner(g, *a, Need::exact);
    cond = derive(g.ok(g.b().binary(kCmp[g.pick(6)], g.framed(*a), g.framed(b)), "compare"), *a, b);
  }
  cond.special = false, cond.grid = 0, cond.zero_sign = true, cond.loosest = DType::f64;
  settle_bounds(cond, 0, 1);
  if (g.chance(0.4)) return cond;
  auto x = g.pick_value([](const FuzzValue& v) { return v.exact || v.smooth_ok(); });
  if (!x) return cond;
  FuzzValue y = partner(g, *x, x->exact ? Need::any : Need::smooth);
  FuzzValue xy = derive(x->node, *x, y);
  FuzzValue r = derive(g.ok(g.b().where(g.framed(cond), g.framed(*x), g.framed(y)), "where"), xy, cond);
  r.grid = xy.grid, r.special = xy.special, r.loosest = xy.loosest;
  settle_bounds(r, std::min(x->lo, y.lo), std::max(x->hi, y.hi));
  return r;
}

StepResult step_cast(Generator& g) {
  constexpr DType kAll[] = {DType::f32, DType::f64, DType::f16, DType::bf16, DType::i32,
                            DType::i64, DType::i8,  DType::u8,  DType::boolean};
  const DType to = kAll[g.pick(9)];
  auto v = g.pick_value([&](const FuzzValue& v) {
    if (v.dtype() == to) return false;
    // No overflow to inf (from wrapped integers or large products).
    if (ir::is_float(to)) return (v.exact || v.smooth_ok()) && v.bound() < 30000;
    if (!v.exact) return false;  // truncation and != 0 are discontinuous
    if (to == DType::boolean) return true;
    if (v.special) return false;  // NaN and inf have no integer
    return to == DType::u8 ? v.lo > -1 && v.hi < 256 : v.bound() <= exact_int_limit(to);
  });
  if (!v) return std::nullopt;
  FuzzValue r = derive(g.ok(g.b().cast(v->node, to), "cast"), *v);
  if (to == DType::boolean) {
    r.grid = 0, r.special = false, r.loosest = DType::f64;
    settle_bounds(r, 0, 1);
  } else if (!ir::is_float(to)) {
    r.grid = 0;
    settle_bounds(r, std::trunc(v->lo), std::trunc(v->hi));
  } else if (v->exact && !representable(to, v->grid, v->bound()) &&
             looser(to, v->dtype()) == to) {
    if (v->special) return std::nullopt;  // NaN/inf only through exact ops
    r.exact = false, r.grid = -1;  // rounded to a narrower type: smooth from here on
  }
  return r;
}

}  // namespace kiln::testing::fuzz
