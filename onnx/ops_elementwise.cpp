// ONNX's elementwise ops (unary, binary, variadic, activations, Where, Cast) on kiln primitives.
#include <fmt/format.h>
#include <cmath>
#include <limits>
#include <numbers>

#include "onnx/import_context.h"

namespace kiln::onnx {

namespace {

using ir::Op;

OpImporter unary(Op op) {
  return [op](Context& c) -> Outs {
    KILN_ONNX_TRY(const ir::Node* x, c.x(0));
    return one(c, c.b().unary(op, x));
  };
}

// Before opset 7, binary ops broadcast only with broadcast=1, B onto A at `axis` (B's axes
// placed from there); without `axis`, B's shape is a suffix of A's, as in numpy.
Expected<const ir::Node*> legacy_broadcast(Context& c, const ir::Node* a, const ir::Node* b) {
  if (c.opset() >= 7) return b;
  bool broadcast = c.attr_i("broadcast", 0) != 0;
  const AttributeProto* axis = c.attr("axis");
  if (!broadcast) {
    if (a->shape != b->shape) return c.fail("operands differ in shape without broadcast=1");
    return b;
  }
  if (!axis) return b;
  const int64_t ra = a->shape.size(), rb = b->shape.size();
  int64_t at = axis->i < 0 ? axis->i + ra : axis->i;
  if (at < 0 || at + rb > ra) return c.fail(fmt::format("broadcast axis {} is out of range", axis->i));
  ir::Shape s = b->shape;
  s.insert(s.end(), ra - at - rb, 1);
  return c.check(c.b().reshape(b, s));
}

OpImporter binary(Op op) {
  return [op](Context& c) -> Outs {
    KILN_ONNX_TRY(const ir::Node* a, c.x(0));
    KILN_ONNX_TRY(const ir::Node* b, c.x(1));
    KILN_ONNX_TRY(b, legacy_broadcast(c, a, b));
    return one(c, c.b().binary(op, a, b));
  };
}

// Helpers for activations written as small expressions of x.

// Integer Div truncates toward zero in ONNX (C semantics); kiln's integer div floors (numpy).
// a / b truncated toward zero for signed integers (ONNX Div and Mod's fmod=1 on integers): kiln's
// division floors, so the quotient is one more where a remainder is left and the signs differ.
// (|a| / |b| overflowed at the type's minimum: -128 / 2 was 64 in int8.)
Expected<const ir::Node*> truncated_div(Context& c, const ir::Node* a, const ir::Node* b) {
  Expr e{c};
  KILN_ONNX_TRY(const ir::Node* q, e.bin(Op::Div, a, b));
  KILN_ONNX_TRY(const ir::Node* qb, e.bin(Op::Mul, q, b));
  KILN_ONNX_TRY(const ir::Node* inexact, e.bin(Op::Ne, qb, a));
  KILN_ONNX_TRY(const ir::Node* a_neg, e.bin(Op::Lt, a, 0.0));
  KILN_ONNX_TRY(const ir::Node* b_neg, e.bin(Op::Lt, b, 0.0));
  KILN_ONNX_TRY(const ir::Node* differ, e.bin(Op::Ne, a_neg, b_neg));
  KILN_ONNX_TRY(const ir::Node* up, e.bin(Op::And, inexact, differ));
  KILN_ONNX_TRY(const ir::Node* step, c.check(c.b().cast(up, q->dtype)));
  return e.bin(Op::Add, q, step);
}

Outs div(Context& c) {
  KILN_ONNX_TRY(const ir::Node* a, c.x(0));
  KILN_ONNX_TRY(const ir::Node* b, c.x(1));
  KILN_ONNX_TRY(b, legacy_broadcast(c, a, b));
  if (!ir::is_signed(a->dtype) || ir::is_float(a->dtype))
    return one(c, c.b().binary(Op::Div, a, b));
  KILN_ONNX_TRY(const ir::Node* q, truncated_div(c, a, b));
  return std::vector<Value>{c.out(q)};
}

// Pow's exponent may have another dtype than its base; kiln's pow takes floats of one dtype.
// An integer base is raised in f64 and rounded to the nearest integer (exact while the result
// fits f64's 53 bits, which an integer power that fits i32 does).
Outs pow(Context& c) {
  KILN_ONNX_TRY(const ir::Node* a, c.x(0));
  KILN_ONNX_TRY(const ir::Node* b, c.x(1));
  KILN_ONNX_TRY(b, legacy_broadcast(c, a, b));
  if (a->dtype == ir::DType::boolean) return c.unsupported("Pow of a bool base");
  const ir::DType t = a->dtype;
  const ir::DType compute = ir::is_float(t) ? t : ir::DType::f64;
  if (a->dtype != compute) { KILN_ONNX_TRY(a, c.check(c.b().cast(a, compute))); }
  if (b->dtype != compute) { KILN_ONNX_TRY(b, c.check(c.b().cast(b, compute))); }
  KILN_ONNX_TRY(const ir::Node* p, c.check(c.b().binary(Op::Pow, a, b)));
  if (compute == t) return std::vector<Value>{c.out(p)};
  Expr e{c};
  KILN_ONNX_TRY(const ir::Node* ap, e.un(Op::Abs, p));
  KILN_ONNX_TRY(const ir::Node* h, e.bin(Op::Add, ap, 0.5));
  KILN_ONNX_TRY(const ir::Node* f, e.un(Op::Floor, h));
  KILN_ONNX_TRY(const ir::Node* sg, e.un(Op::Sign, p));
  KILN_ONNX_TRY(const ir::Node* r, e.bin(Op::Mul, sg, f));
  return one(c, c.b().cast(r, t));
}

Outs xor_op(Context& c) {
  KILN_ONNX_TRY(const ir::Node* a, c.x(0));
  KILN_ONNX_TRY(const ir::Node* b, c.x(1));
  if (a->dtype != ir::DType::boolean || b->dtype != ir::DType::boolean)
    return c.unsupported("Xor of non-bool operands");
  return one(c, c.b().binary(Op::Ne, a, b));
}

// Max, Min, Sum, Mean: variadic, broadcasting.
OpImporter variadic(Op op, bool mean) {
  return [op, mean](Context& c) -> Outs {
    if (c.num_inputs() == 0) return c.fail("needs at least one input");
    KILN_ONNX_TRY(const ir::Node* acc, c.x(0));
    for (size_t i = 1; i < c.num_inputs(); ++i) {
      KILN_ONNX_TRY(const ir::Node* y, c.x(i));
      KILN_ONNX_TRY(acc, c.check(c.b().binary(op, acc, y)));
    }
    if (mean && c.num_inputs() > 1) {
      KILN_ONNX_TRY(const ir::Node* n, c.check(c.b().scalar(double(c.num_inputs()), acc->dtype)));
      KILN_ONNX_TRY(acc, c.check(c.b().binary(Op::Div, acc, n)));
    }
    return std::vector<Value>{c.out(acc)};
  };
}

Outs where(Context& c) {
  KILN_ONNX_TRY(const ir::Node* cond, c.x(0));
  KILN_ONNX_TRY(const ir::Node* a, c.x(1));
  KILN_ONNX_TRY(const ir::Node* b, c.x(2));
  return one(c, c.b().where(cond, a, b));
}

Outs cast_to(Context& c, int32_t onnx_type) {
  auto to = onnx_dtype(onnx_type);
  if (!to) return c.unsupported(to.error().message);
  KILN_ONNX_TRY(const ir::Node* x, c.x(0));
  if (x->dtype == *to) return std::vector<Value>{c.out(x)};
  return one(c, c.b().cast(x, *to));
}

Outs cast(Context& c) {
  const AttributeProto* to = c.attr("to");
  if (!to) return c.fail("attribute 'to' is missing");
  if (const AttributeProto* s = c.attr("saturate"); s && s->i != 1)
    return c.unsupported("saturate=0 (only float8 targets use it)");
  return cast_to(c, static_cast<int32_t>(to->i));
}

Outs cast_like(Context& c) {
  if (!c.has(1)) return c.fail("input 1 is missing");
  if (const AttributeProto* s = c.attr("saturate"); s && s->i != 1)
    return c.unsupported("saturate=0 (only float8 targets use it)");
  KILN_ONNX_TRY(const ir::Node* x, c.x(0));
  ir::DType to = c.in(1).dtype;
  if (x->dtype == to) return std::vector<Value>{c.out(x)};
  return one(c, c.b().cast(x, to));
}

Outs identity(Context& c) {
  if (!c.has(0)) return c.fail("input 0 is missing");
  return std::vector<Value>{c.in(0)};
}


Outs float_input(Context& c, const ir::Node*& x) {
  KILN_ONNX_TRY(x, c.x(0));
  if (!ir::is_float(x->dtype))
    return c.unsupported(fmt::format("{} of {}", c.node().op_type, ir::dtype_name(x->dtype)));
  return std::vector<Value>{};
}

Outs leaky_relu(Context& c) {
  double alpha = c.attr_f("alpha", 0.01f);
  const ir::Node* x;
  if (auto r = float_input(c, x); !r) return r;
  Expr e{c};
  KILN_ONNX_TRY(const ir::Node* neg, e.bin(Op::Lt, x, 0.0));
  KILN_ONNX_TRY(const ir::Node* ax, e.bin(Op::Mul, x, alpha));
  return one(c, c.b().where(neg, ax, x));
}

Outs elu(Context& c) {
  double alpha = c.attr_f("alpha", 1.0f);
  const ir::Node* x;
  if (auto r = float_input(c, x); !r) return r;
  Expr e{c};
  KILN_ONNX_TRY(const ir::Node* neg, e.bin(Op::Lt, x, 0.0));
  KILN_ONNX_TRY(const ir::Node* ex, e.un(Op::Exp, x));
  KILN_ONNX_TRY(const ir::Node* em1, e.bin(Op::Sub, ex, 1.0));
  KILN_ONNX_TRY(const ir::Node* a, e.bin(Op::Mul, em1, alpha));
  return one(c, c.b().where(neg, a, x));
}

// Celu: max(0, x) + min(0, alpha * (exp(x / alpha) - 1)).
Outs celu(Context& c) {
  double alpha = c.attr_f("alpha", 1.0f);
  const ir::Node* x;
  if (auto r = float_input(c, x); !r) return r;
  Expr e{c};
  KILN_ONNX_TRY(const ir::Node* pos, e.bin(Op::Max, x, 0.0));
  KILN_ONNX_TRY(const ir::Node* xa, e.bin(Op::Div, x, alpha));
  KILN_ONNX_TRY(const ir::Node* ex, e.un(Op::Exp, xa));
  KILN_ONNX_TRY(const ir::Node* em1, e.bin(Op::Sub, ex, 1.0));
  KILN_ONNX_TRY(const ir::Node* a, e.bin(Op::Mul, em1, alpha));
  KILN_ONNX_TRY(const ir::Node* neg, e.bin(Op::Min, a, 0.0));
  return one(c, c.b().binary(Op::Add, pos, neg));
}

Outs selu(Context& c) {
  double alpha = c.attr_f("alpha", 1.67326319217681884765625f);
  double gamma = c.attr_f("gamma", 1.05070102214813232421875f);
  const ir::Node* x;
  if (auto r = float_input(c, x); !r) return r;
  Expr e{c};
  KILN_ONNX_TRY(const ir::Node* neg, e.bin(Op::Le, x, 0.0));
  KILN_ONNX_TRY(const ir::Node* ex, e.un(Op::Exp, x));
  KILN_ONNX_TRY(const ir::Node* aex, e.bin(Op::Mul, ex, alpha));
  KILN_ONNX_TRY(const ir::Node* a, e.bin(Op::Sub, aex, alpha));
  KILN_ONNX_TRY(const ir::Node* w, c.check(c.b().where(neg, a, x)));
  return one(c, e.bin(Op::Mul, w, gamma));
}

// max(0, min(1, alpha * x + beta))
Expected<const ir::Node*> hard_sigmoid_of(Context& c, const ir::Node* x, double alpha, double beta) {
  Expr e{c};
  KILN_ONNX_TRY(const ir::Node* ax, e.bin(Op::Mul, x, alpha));
  KILN_ONNX_TRY(const ir::Node* axb, e.bin(Op::Add, ax, beta));
  KILN_ONNX_TRY(const ir::Node* lo, e.bin(Op::Min, axb, 1.0));
  return e.bin(Op::Max, lo, 0.0);
}

Outs hard_sigmoid(Context& c) {
  double alpha = c.attr_f("alpha", 0.2f), beta = c.attr_f("beta", 0.5f);
  const ir::Node* x;
  if (auto r = float_input(c, x); !r) return r;
  return one(c, hard_sigmoid_of(c, x, alpha, beta));
}

Outs hard_swish(Context& c) {
  const ir::Node* x;
  if (auto r = float_input(c, x); !r) return r;
  KILN_ONNX_TRY(const ir::Node* h, hard_sigmoid_of(c, x, 1.0 / 6.0, 0.5));
  return one(c, c.b().binary(Op::Mul, x, h));
}

Outs softplus(Context& c) {
  const ir::Node* x;
  if (auto r = float_input(c, x); !r) return r;
  KILN_ONNX_TRY(const ir::Node* y, stable_softplus(c, x));
  return std::vector<Value>{c.out(y)};
}

Outs softsign(Context& c) {
  const ir::Node* x;
  if (auto r = float_input(c, x); !r) return r;
  Expr e{c};
  KILN_ONNX_TRY(const ir::Node* a, e.un(Op::Abs, x));
  KILN_ONNX_TRY(const ir::Node* d, e.bin(Op::Add, a, 1.0));
  return one(c, c.b().binary(Op::Div, x, d));
}

Outs thresholded_relu(Context& c) {
  double alpha = c.attr_f("alpha", 1.0f);
  const ir::Node* x;
  if (auto r = float_input(c, x); !r) return r;
  Expr e{c};
  KILN_ONNX_TRY(const ir::Node* gt, e.bin(Op::Gt, x, alpha));
  KILN_ONNX_TRY(const ir::Node* zero, e.k(0.0, x->dtype));
  return one(c, c.b().where(gt, x, zero));
}

Outs prelu(Context& c) {
  KILN_ONNX_TRY(const ir::Node* x, c.x(0));
  KILN_ONNX_TRY(const ir::Node* slope, c.x(1));
  // Before opset 7 a slope vector of one value per channel applies along axis 1.
  if (c.opset() < 7 && slope->shape.size() == 1 && x->shape.size() >= 2 &&
      slope->shape[0] == x->shape[1] && slope->shape[0] != 1) {
    ir::Shape s(x->shape.size() - 1, 1);
    s[0] = slope->shape[0];
    KILN_ONNX_TRY(slope, c.check(c.b().reshape(slope, s)));
  }
  Expr e{c};
  KILN_ONNX_TRY(const ir::Node* neg, e.bin(Op::Lt, x, 0.0));
  KILN_ONNX_TRY(const ir::Node* sx, e.bin(Op::Mul, x, slope));
  return one(c, c.b().where(neg, sx, x));
}

Outs tan(Context& c) {
  const ir::Node* x;
  if (auto r = float_input(c, x); !r) return r;
  Expr e{c};
  KILN_ONNX_TRY(const ir::Node* s, e.un(Op::Sin, x));
  KILN_ONNX_TRY(const ir::Node* co, e.un(Op::Cos, x));
  return one(c, c.b().binary(Op::Div, s, co));
}

// atan(x) from arithmetic (Cephes' atan and atanf): |x| is reduced to t in [-0.42, 0.42] (f64:
// [-0.21, 0.66]) with atan(|x|) = y0 + atan(t), y0 one of 0, pi/4 (t = (|x| - 1) / (|x| + 1)) and
// pi/2 (t = -1 / |x|); atan(t) is a polynomial in t (f64: a rational function). Within 3 ulp of
// the true value in f32, 2 in f64, checked on 1.2 million points. x is f32 or f64 (the caller
// computes f16 and bf16 in f32). x's sign, -0 and NaN are kept; atan(+-inf) = +-pi/2.
Expected<const ir::Node*> atan_of(Context& c, const ir::Node* x) {
  ir::Builder& B = c.b();
  const bool f64 = x->dtype == ir::DType::f64;
  Expr e{c};
  KILN_ONNX_TRY(const ir::Node* a, e.un(Op::Abs, x));
  KILN_ONNX_TRY(const ir::Node* big, e.bin(Op::Gt, a, 2.41421356237309504880));  // tan(3pi/8)
  KILN_ONNX_TRY(const ir::Node* mid, e.bin(Op::Gt, a, f64 ? 0.66 : 0.41421356237309504880));
  KILN_ONNX_TRY(const ir::Node* ra, e.un(Op::Recip, a));
  KILN_ONNX_TRY(const ir::Node* t_big, e.un(Op::Neg, ra));
  KILN_ONNX_TRY(const ir::Node* am1, e.bin(Op::Sub, a, 1.0));
  KILN_ONNX_TRY(const ir::Node* ap1, e.bin(Op::Add, a, 1.0));
  KILN_ONNX_TRY(const ir::Node* t_mid, e.bin(Op::Div, am1, ap1));
  KILN_ONNX_TRY(const ir::Node* t_small, c.check(B.where(mid, t_mid, a)));
  KILN_ONNX_TRY(const ir::Node* t, c.check(B.where(big, t_big, t_small)));
  KILN_ONNX_TRY(const ir::Node* z, e.bin(Op::Mul, t, t));
  // Horner's rule: ((c0 z + c1) z + ...) + cn, from `first` (c0 z, or z itself for a leading 1).
  auto horner = [&](const ir::Node* first,
                    std::initializer_list<double> coefficients) -> Expected<const ir::Node*> {
    const ir::Node* acc = first;
    bool multiply = false;
    for (double k : coefficients) {
      if (multiply) {
        KILN_ONNX_TRY(acc, e.bin(Op::Mul, acc, z));
      }
      KILN_ONNX_TRY(acc, e.bin(Op::Add, acc, k));
      multiply = true;
    }
    return acc;
  };
  const ir::Node* poly;  // atan(t) - t, over t
  if (f64) {
    KILN_ONNX_TRY(const ir::Node* p0, e.bin(Op::Mul, z, -8.750608600031904122785E-1));
    KILN_ONNX_TRY(const ir::Node* p,
                  horner(p0, {-1.615753718733365076637E1, -7.500855792314704667340E1,
                              -1.228866684490136173410E2, -6.485021904942025371773E1}));
    KILN_ONNX_TRY(
        const ir::Node* q,
        horner(z, {2.485846490142306297962E1, 1.650270098316988542046E2, 4.328810604912902668951E2,
                   4.853903996359136964868E2, 1.945506571482613964425E2}));
    KILN_ONNX_TRY(const ir::Node* zp, e.bin(Op::Mul, z, p));
    KILN_ONNX_TRY(poly, e.bin(Op::Div, zp, q));
  } else {
    KILN_ONNX_TRY(const ir::Node* p0, e.bin(Op::Mul, z, 8.05374449538e-2));
    KILN_ONNX_TRY(const ir::Node* p,
                  horner(p0, {-1.38776856032e-1, 1.99777106478e-1, -3.33329491539e-1}));
    KILN_ONNX_TRY(poly, e.bin(Op::Mul, p, z));
  }
  KILN_ONNX_TRY(const ir::Node* tp, e.bin(Op::Mul, poly, t));
  KILN_ONNX_TRY(const ir::Node* at, e.bin(Op::Add, tp, t));
  // y0, and in f64 the bits of pi/2 and pi/4 beyond the type's precision (Cephes' MOREBITS).
  const double more = f64 ? 6.123233995736765886130E-17 : 0.0;
  KILN_ONNX_TRY(const ir::Node* y_big, e.k(std::numbers::pi / 2, x->dtype));
  KILN_ONNX_TRY(const ir::Node* y_mid, e.k(std::numbers::pi / 4, x->dtype));
  KILN_ONNX_TRY(const ir::Node* y_small, e.k(0.0, x->dtype));
  KILN_ONNX_TRY(const ir::Node* m_big, e.k(more, x->dtype));
  KILN_ONNX_TRY(const ir::Node* m_mid, e.k(more / 2, x->dtype));
  KILN_ONNX_TRY(const ir::Node* y0_small, c.check(B.where(mid, y_mid, y_small)));
  KILN_ONNX_TRY(const ir::Node* y0, c.check(B.where(big, y_big, y0_small)));
  if (f64) {
    KILN_ONNX_TRY(const ir::Node* m_small, c.check(B.where(mid, m_mid, y_small)));
    KILN_ONNX_TRY(const ir::Node* m, c.check(B.where(big, m_big, m_small)));
    KILN_ONNX_TRY(at, e.bin(Op::Add, at, m));
  }
  KILN_ONNX_TRY(const ir::Node* mag, e.bin(Op::Add, y0, at));
  KILN_ONNX_TRY(const ir::Node* neg_mag, e.un(Op::Neg, mag));
  KILN_ONNX_TRY(const ir::Node* negative, e.bin(Op::Lt, x, 0.0));
  KILN_ONNX_TRY(const ir::Node* signed_, c.check(B.where(negative, neg_mag, mag)));
  KILN_ONNX_TRY(const ir::Node* zero, e.bin(Op::Eq, a, 0.0));
  return c.check(B.where(zero, x, signed_));  // -0 stays -0
}

// Atan; Asin(x) = atan(x / sqrt((1 - x)(1 + x))) and Acos(x) = 2 atan(sqrt((1 - x) / (1 + x))),
// whose differences 1 - x are exact near |x| = 1 (no cancellation in 1 - x^2). NaN beyond
// |x| = 1 (a negative square root), +-pi/2 and pi, 0 at the ends.
enum class Inverse { atan, asin, acos };
OpImporter inverse_trig(Inverse kind) {
  return [kind](Context& c) -> Outs {
    const ir::Node* x;
    if (auto r = float_input(c, x); !r) return r;
    const ir::DType out = x->dtype;
    if (out == ir::DType::f16 || out == ir::DType::bf16) {
      KILN_ONNX_TRY(x, c.check(c.b().cast(x, ir::DType::f32)));
    }
    Expr e{c};
    const ir::Node* y;
    if (kind == Inverse::atan) {
      KILN_ONNX_TRY(y, atan_of(c, x));
    } else {
      KILN_ONNX_TRY(const ir::Node* one_, e.k(1.0, x->dtype));
      KILN_ONNX_TRY(const ir::Node* om, e.bin(Op::Sub, one_, x));
      KILN_ONNX_TRY(const ir::Node* op, e.bin(Op::Add, x, 1.0));
      if (kind == Inverse::asin) {
        KILN_ONNX_TRY(const ir::Node* pr, e.bin(Op::Mul, om, op));
        KILN_ONNX_TRY(const ir::Node* r, e.un(Op::Sqrt, pr));
        KILN_ONNX_TRY(const ir::Node* u, e.bin(Op::Div, x, r));
        KILN_ONNX_TRY(y, atan_of(c, u));
        // x itself where |x| <= 1 and x / sqrt(..) is NaN: only x = NaN, which atan keeps.
      } else {
        KILN_ONNX_TRY(const ir::Node* q, e.bin(Op::Div, om, op));
        KILN_ONNX_TRY(const ir::Node* r, e.un(Op::Sqrt, q));
        KILN_ONNX_TRY(const ir::Node* h, atan_of(c, r));
        KILN_ONNX_TRY(y, e.bin(Op::Mul, h, 2.0));
      }
    }
    if (y->dtype != out) return one(c, c.b().cast(y, out));
    return std::vector<Value>{c.out(y)};
  };
}

Outs is_nan(Context& c) {
  const ir::Node* x;
  if (auto r = float_input(c, x); !r) return r;
  return one(c, c.b().binary(Op::Ne, x, x));
}

Outs is_inf(Context& c) {
  bool pos = c.attr_i("detect_positive", 1) != 0, neg = c.attr_i("detect_negative", 1) != 0;
  const ir::Node* x;
  if (auto r = float_input(c, x); !r) return r;
  Expr e{c};
  const double inf = std::numeric_limits<double>::infinity();
  KILN_ONNX_TRY(const ir::Node* p, e.bin(Op::Eq, x, inf));
  KILN_ONNX_TRY(const ir::Node* n, e.bin(Op::Eq, x, -inf));
  if (pos && neg) return one(c, c.b().binary(Op::Or, p, n));
  if (pos) return std::vector<Value>{c.out(p)};
  if (neg) return std::vector<Value>{c.out(n)};
  return one(c, c.b().binary(Op::Ne, p, p));  // all false
}

// log(1 + u) for u >= 0 to a few ulp where log(1 + u) loses u's low bits (Goldberg:
// log(w) * u / (w - 1) with w = 1 + u rounded; u itself where w rounds to 1; inf at inf).
Expected<const ir::Node*> log1p_nonneg(Context& c, const ir::Node* u) {
  Expr e{c};
  KILN_ONNX_TRY(const ir::Node* w, e.bin(Op::Add, u, 1.0));
  KILN_ONNX_TRY(const ir::Node* l, e.un(Op::Log, w));
  KILN_ONNX_TRY(const ir::Node* wm1, e.bin(Op::Sub, w, 1.0));
  KILN_ONNX_TRY(const ir::Node* ratio, e.bin(Op::Div, u, wm1));
  KILN_ONNX_TRY(const ir::Node* scaled, e.bin(Op::Mul, l, ratio));
  KILN_ONNX_TRY(const ir::Node* is_one, e.bin(Op::Eq, w, 1.0));
  KILN_ONNX_TRY(const ir::Node* is_inf, e.bin(Op::Eq, u, std::numeric_limits<double>::infinity()));
  KILN_ONNX_TRY(const ir::Node* finite, c.check(c.b().where(is_inf, u, scaled)));
  return c.check(c.b().where(is_one, u, finite));
}

// Above this a function's x*x term is dropped (x*x would overflow; 1 next to it is below the
// type's precision): asinh(x) = acosh(x) = log(x) + log(2) there. 2^27, and 128 in f16 (whose
// largest value is 65504).
double huge_argument(ir::DType t) {
  return t == ir::DType::f16 ? 128.0 : 134217728.0;
}

// The hyperbolic functions kiln has no primitive for, from exp, log, tanh and sqrt, without
// overflow in an intermediate where the result is finite and without cancellation near 0.
enum class Hyper { sinh, cosh, asinh, acosh, atanh };
OpImporter hyperbolic(Hyper kind) {
  return [kind](Context& c) -> Outs {
    const ir::Node* x;
    if (auto r = float_input(c, x); !r) return r;
    Expr e{c};
    ir::Builder& B = c.b();
    const double ln2 = std::numbers::ln2;
    KILN_ONNX_TRY(const ir::Node* a, e.un(Op::Abs, x));
    KILN_ONNX_TRY(const ir::Node* negative, e.bin(Op::Lt, x, 0.0));
    switch (kind) {
      case Hyper::sinh:
      case Hyper::cosh: {
        // e^|x| / 2 as h * (h / 2), h = e^(|x| / 2): finite up to the result's own overflow.
        KILN_ONNX_TRY(const ir::Node* half, e.bin(Op::Mul, a, 0.5));
        KILN_ONNX_TRY(const ir::Node* h, e.un(Op::Exp, half));
        KILN_ONNX_TRY(const ir::Node* h2, e.bin(Op::Mul, h, 0.5));
        KILN_ONNX_TRY(const ir::Node* big, e.bin(Op::Mul, h, h2));
        KILN_ONNX_TRY(const ir::Node* hh, e.bin(Op::Mul, h, h));
        KILN_ONNX_TRY(const ir::Node* small, e.un(Op::Recip, hh));  // e^-|x|
        KILN_ONNX_TRY(const ir::Node* small2, e.bin(Op::Mul, small, 0.5));
        if (kind == Hyper::cosh) return one(c, B.binary(Op::Add, big, small2));
        // sinh: 2t / (1 - t^2), t = tanh(x / 2), below |x| = 1 (no cancellation); above, the
        // difference of the halves with x's sign.
        KILN_ONNX_TRY(const ir::Node* diff, e.bin(Op::Sub, big, small2));
        KILN_ONNX_TRY(const ir::Node* neg_diff, e.un(Op::Neg, diff));
        KILN_ONNX_TRY(const ir::Node* outer, c.check(B.where(negative, neg_diff, diff)));
        KILN_ONNX_TRY(const ir::Node* hx, e.bin(Op::Mul, x, 0.5));
        KILN_ONNX_TRY(const ir::Node* t, e.un(Op::Tanh, hx));
        KILN_ONNX_TRY(const ir::Node* t2, e.bin(Op::Mul, t, t));
        KILN_ONNX_TRY(const ir::Node* one_, e.k(1.0, x->dtype));
        KILN_ONNX_TRY(const ir::Node* den, e.bin(Op::Sub, one_, t2));
        KILN_ONNX_TRY(const ir::Node* num, e.bin(Op::Mul, t, 2.0));
        KILN_ONNX_TRY(const ir::Node* inner, e.bin(Op::Div, num, den));
        KILN_ONNX_TRY(const ir::Node* near0, e.bin(Op::Lt, a, 1.0));
        return one(c, B.where(near0, inner, outer));
      }
      case Hyper::asinh:
      case Hyper::acosh: {
        KILN_ONNX_TRY(const ir::Node* huge, e.bin(Op::Gt, a, huge_argument(x->dtype)));
        KILN_ONNX_TRY(const ir::Node* la, e.un(Op::Log, a));
        KILN_ONNX_TRY(const ir::Node* far, e.bin(Op::Add, la, ln2));
        const ir::Node* near = nullptr;
        if (kind == Hyper::asinh) {
          // asinh(|x|) = log1p(|x| + x^2 / (1 + sqrt(1 + x^2))), with x's sign.
          KILN_ONNX_TRY(const ir::Node* sq, e.bin(Op::Mul, a, a));
          KILN_ONNX_TRY(const ir::Node* s1, e.bin(Op::Add, sq, 1.0));
          KILN_ONNX_TRY(const ir::Node* r, e.un(Op::Sqrt, s1));
          KILN_ONNX_TRY(const ir::Node* r1, e.bin(Op::Add, r, 1.0));
          KILN_ONNX_TRY(const ir::Node* f, e.bin(Op::Div, sq, r1));
          KILN_ONNX_TRY(const ir::Node* u, e.bin(Op::Add, a, f));
          KILN_ONNX_TRY(near, log1p_nonneg(c, u));
        } else {
          // acosh(x) = log1p((x - 1) + sqrt((x - 1)(x + 1))); NaN below 1.
          KILN_ONNX_TRY(const ir::Node* xm, e.bin(Op::Sub, x, 1.0));
          KILN_ONNX_TRY(const ir::Node* xp, e.bin(Op::Add, x, 1.0));
          KILN_ONNX_TRY(const ir::Node* pr, e.bin(Op::Mul, xm, xp));
          KILN_ONNX_TRY(const ir::Node* r, e.un(Op::Sqrt, pr));
          KILN_ONNX_TRY(const ir::Node* u, e.bin(Op::Add, xm, r));
          KILN_ONNX_TRY(near, log1p_nonneg(c, u));
        }
        KILN_ONNX_TRY(const ir::Node* mag, c.check(B.where(huge, far, near)));
        if (kind == Hyper::acosh) {
          KILN_ONNX_TRY(const ir::Node* below, e.bin(Op::Lt, x, 1.0));  // negative huge x too
          KILN_ONNX_TRY(const ir::Node* nan,
                        e.k(std::numeric_limits<double>::quiet_NaN(), x->dtype));
          return one(c, B.where(below, nan, mag));
        }
        KILN_ONNX_TRY(const ir::Node* neg_mag, e.un(Op::Neg, mag));
        return one(c, B.where(negative, neg_mag, mag));
      }
      case Hyper::atanh: {  // log1p(2|x| / (1 - |x|)) / 2 with x's sign
        KILN_ONNX_TRY(const ir::Node* one_, e.k(1.0, x->dtype));
        KILN_ONNX_TRY(const ir::Node* m, e.bin(Op::Sub, one_, a));
        KILN_ONNX_TRY(const ir::Node* a2, e.bin(Op::Mul, a, 2.0));
        KILN_ONNX_TRY(const ir::Node* u, e.bin(Op::Div, a2, m));
        KILN_ONNX_TRY(const ir::Node* l, log1p_nonneg(c, u));
        KILN_ONNX_TRY(const ir::Node* mag, e.bin(Op::Mul, l, 0.5));
        KILN_ONNX_TRY(const ir::Node* neg_mag, e.un(Op::Neg, mag));
        KILN_ONNX_TRY(const ir::Node* above, e.bin(Op::Gt, a, 1.0));
        KILN_ONNX_TRY(const ir::Node* nan, e.k(std::numeric_limits<double>::quiet_NaN(), x->dtype));
        KILN_ONNX_TRY(const ir::Node* signed_, c.check(B.where(negative, neg_mag, mag)));
        return one(c, B.where(above, nan, signed_));
      }
    }
    return c.fail("unknown function");
  };
}

Outs round(Context& c) {
  const ir::Node* x;
  if (auto r = float_input(c, x); !r) return r;
  KILN_ONNX_TRY(const ir::Node* y, round_half_even(c, x));
  return std::vector<Value>{c.out(y)};
}

// BitShift (opset 11) of u8, kiln's one unsigned integer dtype: x << y as x * 2^y (u8 products
// wrap, so the bits shifted out are dropped) and x >> y as x / 2^y (integer division floors), 2^y
// picked per element by y; a shift by 8 or more gives 0, as numpy's shifts of uint8 do.
Outs bit_shift(Context& c) {
  KILN_ONNX_TRY(const ir::Node* x, c.x(0));
  KILN_ONNX_TRY(const ir::Node* y, c.x(1));
  const std::string direction = c.attr_s("direction").value_or("");
  if (direction != "LEFT" && direction != "RIGHT")
    return c.fail(fmt::format("BitShift: direction must be LEFT or RIGHT, not '{}'", direction));
  if (x->dtype != y->dtype) return c.fail("BitShift: X and Y differ in dtype");
  if (x->dtype != ir::DType::u8)
    return c.fail(fmt::format("BitShift takes unsigned integers (kiln has u8), not {}",
                              ir::dtype_name(x->dtype)));
  Expr e{c};
  ir::Builder& B = c.b();
  KILN_ONNX_TRY(const ir::Node* power, e.k(1, ir::DType::u8));
  for (int k = 1; k < 8; ++k) {
    KILN_ONNX_TRY(const ir::Node* is_k, e.bin(Op::Eq, y, double(k)));
    KILN_ONNX_TRY(const ir::Node* p, e.k(double(1 << k), ir::DType::u8));
    KILN_ONNX_TRY(power, c.check(B.where(is_k, p, power)));
  }
  KILN_ONNX_TRY(const ir::Node* shifted, e.bin(direction == "LEFT" ? Op::Mul : Op::Div, x, power));
  KILN_ONNX_TRY(const ir::Node* far, e.bin(Op::Ge, y, 8.0));
  KILN_ONNX_TRY(const ir::Node* zero, e.k(0, ir::DType::u8));
  return one(c, B.where(far, zero, shifted));
}

// Mod: fmod=0 takes the divisor's sign (integers: a - floor(a / b) * b, kiln's integer division
// floors); fmod=1 the dividend's (a - trunc(a / b) * b; a itself where |a| < |b|, an infinite b
// too, as C's fmod). Floats are exact while |a / b| < 2^24 (f32) or 2^53 (f64).
Outs mod(Context& c) {
  bool fmod = c.attr_i("fmod", 0) != 0;
  KILN_ONNX_TRY(const ir::Node* a, c.x(0));
  KILN_ONNX_TRY(const ir::Node* b, c.x(1));
  Expr e{c};
  const bool fl = ir::is_float(a->dtype);
  if (fl && !fmod) return c.fail("Mod of floats needs fmod=1");
  const ir::Node* q = nullptr;
  if (fmod && ir::is_signed(a->dtype) && !fl) {
    KILN_ONNX_TRY(q, truncated_div(c, a, b));
  } else {
    KILN_ONNX_TRY(q, e.bin(Op::Div, a, b));
  }
  if (fmod && fl) {  // truncate: sign(q) * floor(|q|)
    KILN_ONNX_TRY(const ir::Node* aq, e.un(Op::Abs, q));
    KILN_ONNX_TRY(const ir::Node* fq, e.un(Op::Floor, aq));
    KILN_ONNX_TRY(const ir::Node* sq, e.un(Op::Sign, q));
    KILN_ONNX_TRY(q, e.bin(Op::Mul, sq, fq));
  }
  KILN_ONNX_TRY(const ir::Node* qb, e.bin(Op::Mul, q, b));
  KILN_ONNX_TRY(const ir::Node* r, e.bin(Op::Sub, a, qb));
  if (!fl) return std::vector<Value>{c.out(r)};
  KILN_ONNX_TRY(const ir::Node* whole, e.bin(Op::Eq, q, 0.0));  // |a| < |b|: a, -0 kept
  return one(c, c.b().where(whole, a, r));
}

Outs shrink(Context& c) {
  double lambd = c.attr_f("lambd", 0.5f), bias = c.attr_f("bias", 0.0f);
  KILN_ONNX_TRY(const ir::Node* x, c.x(0));
  Expr e{c};
  KILN_ONNX_TRY(const ir::Node* lo, e.bin(Op::Lt, x, -lambd));
  KILN_ONNX_TRY(const ir::Node* hi, e.bin(Op::Gt, x, lambd));
  KILN_ONNX_TRY(const ir::Node* xp, e.bin(Op::Add, x, bias));
  KILN_ONNX_TRY(const ir::Node* xm, e.bin(Op::Sub, x, bias));
  KILN_ONNX_TRY(const ir::Node* zero, e.k(0.0, x->dtype));
  KILN_ONNX_TRY(const ir::Node* mid, c.check(c.b().where(hi, xm, zero)));
  return one(c, c.b().where(lo, xp, mid));
}

// Clip: kiln's clip (ir/clip.h); bounds from attributes before opset 11, from optional inputs
// since.
Outs clip(Context& c) {
  KILN_ONNX_TRY(const ir::Node* x, c.x(0));
  Expr e{c};
  const ir::Node* lo = nullptr;
  const ir::Node* hi = nullptr;
  if (c.opset() < 11) {
    if (const AttributeProto* a = c.attr("min")) { KILN_ONNX_TRY(lo, e.k(a->f, x->dtype)); }
    if (const AttributeProto* a = c.attr("max")) { KILN_ONNX_TRY(hi, e.k(a->f, x->dtype)); }
  } else {
    if (c.has(1)) { KILN_ONNX_TRY(lo, c.x(1)); }
    if (c.has(2)) { KILN_ONNX_TRY(hi, c.x(2)); }
  }
  return one(c, c.b().clip(x, lo, hi));
}

}  // namespace

// Round half to even: floor, then up past .5, and at exactly .5 to the even neighbour.
Expected<const ir::Node*> round_half_even(Context& c, const ir::Node* x) {
  Expr e{c};
  KILN_ONNX_TRY(const ir::Node* f, e.un(Op::Floor, x));
  KILN_ONNX_TRY(const ir::Node* d, e.bin(Op::Sub, x, f));
  KILN_ONNX_TRY(const ir::Node* f1, e.bin(Op::Add, f, 1.0));
  KILN_ONNX_TRY(const ir::Node* h, e.bin(Op::Mul, f, 0.5));
  KILN_ONNX_TRY(const ir::Node* hf, e.un(Op::Floor, h));
  KILN_ONNX_TRY(const ir::Node* hf2, e.bin(Op::Mul, hf, 2.0));
  KILN_ONNX_TRY(const ir::Node* odd, e.bin(Op::Sub, f, hf2));  // 0 or 1
  KILN_ONNX_TRY(const ir::Node* even, e.bin(Op::Add, f, odd));
  KILN_ONNX_TRY(const ir::Node* up, e.bin(Op::Gt, d, 0.5));
  KILN_ONNX_TRY(const ir::Node* down, e.bin(Op::Lt, d, 0.5));
  KILN_ONNX_TRY(const ir::Node* lo, c.check(c.b().where(down, f, even)));
  KILN_ONNX_TRY(const ir::Node* rounded, c.check(c.b().where(up, f1, lo)));
  // An integral x is itself (-0 and the infinities too: inf - floor(inf) is NaN).
  KILN_ONNX_TRY(const ir::Node* integral, e.bin(Op::Eq, x, f));
  return c.check(c.b().where(integral, x, rounded));
}

Expected<const ir::Node*> stable_softplus(Context& c, const ir::Node* x) {
  Expr e{c};
  KILN_ONNX_TRY(const ir::Node* a, e.un(Op::Abs, x));
  KILN_ONNX_TRY(const ir::Node* na, e.un(Op::Neg, a));
  KILN_ONNX_TRY(const ir::Node* u, e.un(Op::Exp, na));
  KILN_ONNX_TRY(const ir::Node* l, log1p_nonneg(c, u));
  KILN_ONNX_TRY(const ir::Node* pos, e.bin(Op::Max, x, 0.0));
  return e.bin(Op::Add, pos, l);
}

void add_elementwise_ops(OpTable& t) {
  t["Abs"] = unary(Op::Abs);
  t["BitShift"] = bit_shift;
  t["Neg"] = unary(Op::Neg);
  t["Exp"] = unary(Op::Exp);
  t["Log"] = unary(Op::Log);
  t["Sqrt"] = unary(Op::Sqrt);
  t["Reciprocal"] = unary(Op::Recip);
  t["Sin"] = unary(Op::Sin);
  t["Cos"] = unary(Op::Cos);
  t["Tan"] = tan;
  t["Atan"] = inverse_trig(Inverse::atan);
  t["Asin"] = inverse_trig(Inverse::asin);
  t["Acos"] = inverse_trig(Inverse::acos);
  t["Tanh"] = unary(Op::Tanh);
  t["Sigmoid"] = unary(Op::Sigmoid);
  t["Relu"] = unary(Op::Relu);
  t["Erf"] = unary(Op::Erf);
  t["Floor"] = unary(Op::Floor);
  t["Ceil"] = unary(Op::Ceil);
  t["Sign"] = unary(Op::Sign);
  t["Not"] = unary(Op::Not);
  t["Add"] = binary(Op::Add);
  t["Sub"] = binary(Op::Sub);
  t["Mul"] = binary(Op::Mul);
  t["Div"] = div;
  t["Pow"] = pow;
  t["Equal"] = binary(Op::Eq);
  t["Less"] = binary(Op::Lt);
  t["LessOrEqual"] = binary(Op::Le);
  t["Greater"] = binary(Op::Gt);
  t["GreaterOrEqual"] = binary(Op::Ge);
  t["And"] = binary(Op::And);
  t["Or"] = binary(Op::Or);
  t["Xor"] = xor_op;
  t["Max"] = variadic(Op::Max, false);
  t["Min"] = variadic(Op::Min, false);
  t["Sum"] = variadic(Op::Add, false);
  t["Mean"] = variadic(Op::Add, true);
  t["Where"] = where;
  t["Cast"] = cast;
  t["CastLike"] = cast_like;
  t["Identity"] = identity;
  t["LeakyRelu"] = leaky_relu;
  t["Elu"] = elu;
  t["Selu"] = selu;
  t["Celu"] = celu;
  t["HardSigmoid"] = hard_sigmoid;
  t["HardSwish"] = hard_swish;
  t["Softplus"] = softplus;
  t["Softsign"] = softsign;
  t["ThresholdedRelu"] = thresholded_relu;
  t["PRelu"] = prelu;
  t["IsNaN"] = is_nan;
  t["IsInf"] = is_inf;
  t["Clip"] = clip;
  t["Sinh"] = hyperbolic(Hyper::sinh);
  t["Cosh"] = hyperbolic(Hyper::cosh);
  t["Asinh"] = hyperbolic(Hyper::asinh);
  t["Acosh"] = hyperbolic(Hyper::acosh);
  t["Atanh"] = hyperbolic(Hyper::atanh);
  t["Round"] = round;
  t["Mod"] = mod;
  t["Shrink"] = shrink;
}

}  // namespace kiln::onnx
