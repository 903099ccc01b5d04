// NodeLowering of the resize row: the reader's position along the axis becomes an input
// coordinate, computed per element in f64 with the operations (and their order) of ONNX's
// reference, as ir/resize_taps.cpp computes it on the host, so nearest picks the same index. The
// value is the input there (nearest) or the weighted sum of the filter's taps, each a load at a
// position clamped into the axis (the edge repeats, as in the reference).
#include <algorithm>
#include <cmath>

#include "ir/resize_taps.h"
#include "passes/lower_context.h"

namespace kiln::passes {

namespace {

using ir::AttrKey;
using ir::DType;
using ir::Node;
using ir::ResizeAxis;
using ir::ResizeCoord;
using ir::ResizeMode;
using ir::ResizeNearest;
using kir::Alu;
using kir::Expr;

// f64 (and bool) arithmetic in the kernel's arena.
class F64 {
 public:
  explicit F64(kir::ExprArena& ar) : ar_(ar) {}
  const Expr* c(double v) { return ar_.constant(DType::f64, v); }
  const Expr* add(const Expr* a, const Expr* b) { return op(Alu::Add, a, b); }
  const Expr* sub(const Expr* a, const Expr* b) { return op(Alu::Sub, a, b); }
  const Expr* mul(const Expr* a, const Expr* b) { return op(Alu::Mul, a, b); }
  const Expr* div(const Expr* a, const Expr* b) { return op(Alu::Div, a, b); }
  // a / b, snapped to the multiple of 1/2 it equals exactly: GPU f64 division need not round
  // correctly (Mesa's lavapipe gives 21 / 3 = 6.999...), and the nearest rounding and the
  // integer test of the taps depend on exact integer and half-integer quotients, which IEEE
  // division (the CPU's, the reference's) gives. A product is correctly rounded everywhere, so
  // m * b == a holds exactly when the quotient is m.
  const Expr* exact_div(const Expr* a, const Expr* b) {
    const Expr* q = div(a, b);
    const Expr* m = mul(floor(add(mul(q, c(2.0)), c(0.5))), c(0.5));
    return where(cmp(Alu::Eq, mul(m, b), a), m, q);
  }
  const Expr* max(const Expr* a, const Expr* b) { return op(Alu::Max, a, b); }
  const Expr* min(const Expr* a, const Expr* b) { return op(Alu::Min, a, b); }
  const Expr* floor(const Expr* a) { return ar_.alu(Alu::Floor, DType::f64, {a}); }
  const Expr* ceil(const Expr* a) { return ar_.alu(Alu::Ceil, DType::f64, {a}); }
  const Expr* abs(const Expr* a) { return ar_.alu(Alu::Abs, DType::f64, {a}); }
  const Expr* cmp(Alu op, const Expr* a, const Expr* b) {
    return ar_.alu(op, DType::boolean, {a, b});
  }
  const Expr* both(const Expr* a, const Expr* b) {
    return ar_.alu(Alu::And, DType::boolean, {a, b});
  }
  const Expr* where(const Expr* cond, const Expr* a, const Expr* b) {
    return ar_.alu(Alu::Where, DType::f64, {cond, a, b});
  }

 private:
  const Expr* op(Alu o, const Expr* a, const Expr* b) { return ar_.alu(o, DType::f64, {a, b}); }
  kir::ExprArena& ar_;
};

// The input coordinate of output position `o` (resize_taps.cpp's source_coordinate, the same
// operations in the same order; constants folded on the host as it folds them). `inside` is set
// for tf_crop_and_resize: the coordinate lies within the input.
const Expr* coordinate(kir::ExprArena& ar, const ResizeAxis& a, const Expr* o,
                       const Expr** inside) {
  F64 f(ar);
  const Expr* x = ar.alu(Alu::Cast, DType::f64, {o});
  const double in = static_cast<double>(a.in);
  const double out_width = a.scale * in;
  auto half_pixel = [&] { return f.sub(f.exact_div(f.add(x, f.c(0.5)), f.c(a.scale)), f.c(0.5)); };
  switch (a.coord) {
    case ResizeCoord::HalfPixel:
      return half_pixel();
    case ResizeCoord::HalfPixelSymmetric: {
      const double adjustment = static_cast<double>(a.out) / out_width;
      const double offset = in / 2 * (1 - adjustment);
      return f.sub(f.add(f.c(offset), f.exact_div(f.add(x, f.c(0.5)), f.c(a.scale))), f.c(0.5));
    }
    case ResizeCoord::PytorchHalfPixel:
      return out_width == 1 ? f.c(-0.5) : half_pixel();
    case ResizeCoord::AlignCorners:
      return out_width == 1 ? f.c(0.0) : f.exact_div(f.mul(x, f.c(in - 1)), f.c(out_width - 1));
    case ResizeCoord::Asymmetric:
      return f.exact_div(x, f.c(a.scale));
    case ResizeCoord::TfHalfPixelForNn:
      return f.exact_div(f.add(x, f.c(0.5)), f.c(a.scale));
    case ResizeCoord::TfCropAndResize: {
      const double span = a.roi_end - a.roi_start;
      const Expr* v = out_width == 1
                          ? f.c(span * (in - 1) / 2)
                          : f.exact_div(f.mul(f.mul(x, f.c(span)), f.c(in - 1)), f.c(out_width - 1));
      v = f.add(v, f.c(a.roi_start * (in - 1)));
      *inside = f.both(f.cmp(Alu::Ge, v, f.c(0.0)), f.cmp(Alu::Le, v, f.c(in - 1)));
      return v;
    }
  }
  return f.c(0.0);
}

// Keys's cubic convolution kernel at distance t (resize_taps.cpp's cubic_kernel).
const Expr* cubic_kernel(F64& f, const Expr* t, double A) {
  const Expr* x = f.abs(t);
  const Expr* x2 = f.mul(x, x);
  const Expr* x3 = f.mul(x2, x);
  const Expr* near = f.add(f.sub(f.mul(f.c(A + 2), x3), f.mul(f.c(A + 3), x2)), f.c(1.0));
  const Expr* far = f.sub(
      f.add(f.sub(f.mul(f.c(A), x3), f.mul(f.c(5 * A), x2)), f.mul(f.c(8 * A), x)), f.c(4 * A));
  return f.where(f.cmp(Alu::Le, x, f.c(1.0)), near,
                 f.where(f.cmp(Alu::Lt, x, f.c(2.0)), far, f.c(0.0)));
}

// The filter's weights for the taps f + start + i, given the coordinate's fraction r in (0, 1]
// (resize_taps.cpp's coefficients).
std::vector<const Expr*> weights(F64& f, const ResizeAxis& a, const Expr* r,
                                 ir::ResizeFootprint fp) {
  const double A = a.cubic_a;
  std::vector<const Expr*> w;
  if (!a.antialias) {
    if (a.mode == ResizeMode::Linear) return {f.sub(f.c(1.0), r), r};
    const Expr* q = f.sub(f.c(1.0), r);
    auto outer = [&](const Expr* t) {  // ((A t - 5A) t + 8A) t - 4A at t = r + 1 or q + 1
      return f.sub(f.mul(f.add(f.mul(f.sub(f.mul(f.c(A), t), f.c(5 * A)), t), f.c(8 * A)), t),
                   f.c(4 * A));
    };
    auto inner = [&](const Expr* t) {  // ((A + 2) t - (A + 3)) t t + 1
      return f.add(f.mul(f.mul(f.sub(f.mul(f.c(A + 2), t), f.c(A + 3)), t), t), f.c(1.0));
    };
    return {outer(f.add(r, f.c(1.0))), inner(r), inner(q), outer(f.add(q, f.c(1.0)))};
  }
  const double s = std::min(a.scale, 1.0);
  const Expr* sum = nullptr;
  for (int64_t i = 0; i < fp.taps; ++i) {
    const Expr* d = f.sub(f.c(static_cast<double>(fp.start + i)), r);
    const Expr* c =
        a.mode == ResizeMode::Linear
            ? f.min(f.max(f.sub(f.c(1.0), f.abs(f.mul(d, f.c(s)))), f.c(0.0)), f.c(1.0))
            : cubic_kernel(f, f.mul(f.c(s), d), A);
    w.push_back(c);
    sum = sum ? f.add(sum, c) : c;
  }
  for (const Expr*& c : w) c = f.div(c, sum);
  return w;
}

}  // namespace

NodeLowering plan_resize(LowerContext& cx, const Node* n, const Index& idx) {
  const Node* x = n->inputs[0];
  const auto axis = static_cast<size_t>(n->attrs.i(AttrKey::axis));
  const ResizeAxis a = ir::resize_axis_of(*n);
  if (a.in == 0 || a.out == 0) return lowered(cx.arena().constant(n->dtype, 0));  // reads nothing
  NodeLowering l;
  l.build = [&cx, n, x, axis, a, idx](const std::vector<const Expr*>&) -> const Expr* {
    kir::ExprArena& ar = cx.arena();
    F64 f(ar);
    const Expr* inside = nullptr;
    const Expr* src = coordinate(ar, a, idx[axis], &inside);
    const double last = static_cast<double>(a.in - 1);
    // x at f64 position p, clamped into the axis (the edge repeats): in f64 first, so that the
    // conversion is defined for any coordinate, then in i64 for the index analysis.
    auto at = [&](const Expr* p) {
      const Expr* i = ar.alu(Alu::Cast, DType::i64, {f.min(f.max(p, f.c(0.0)), f.c(last))});
      i = ar.alu(Alu::Max, DType::i64, {i, cx.ib().constant(0)});
      i = ar.alu(Alu::Min, DType::i64, {i, cx.ib().constant(a.in - 1)});
      Index in = idx;
      in[axis] = i;
      return cx.emit(x, in);
    };
    const Expr* fl = f.floor(src);
    const Expr* value = nullptr;
    if (a.mode == ResizeMode::Nearest) {
      const Expr* frac = f.sub(src, fl);
      const Expr* up = f.add(fl, f.c(1.0));
      const Expr* p = fl;
      switch (a.nearest) {
        case ResizeNearest::RoundPreferFloor:
          p = f.where(f.cmp(Alu::Gt, frac, f.c(0.5)), up, fl);
          break;
        case ResizeNearest::RoundPreferCeil:
          p = f.where(f.cmp(Alu::Ge, frac, f.c(0.5)), up, fl);
          break;
        case ResizeNearest::Floor:
          break;
        case ResizeNearest::Ceil:
          p = f.ceil(src);
          break;
        case ResizeNearest::Simple:  // floor when upsampling, ceil when downsampling
          if (a.scale < 1) p = f.ceil(src);
          break;
      }
      value = at(p);
    } else {
      // An integer coordinate c reads from c - 1 with fraction 1 (the reference's neighbours).
      const Expr* integer = f.cmp(Alu::Eq, src, fl);
      const Expr* base = f.where(integer, f.sub(fl, f.c(1.0)), fl);
      const Expr* r = f.where(integer, f.c(1.0), f.sub(src, fl));
      const ir::ResizeFootprint fp = ir::resize_footprint(a);
      std::vector<const Expr*> w = weights(f, a, r, fp);
      std::vector<const Expr*> pos;
      for (int64_t i = 0; i < fp.taps; ++i)
        pos.push_back(f.add(base, f.c(static_cast<double>(fp.start + i))));
      if (a.exclude_outside) {  // taps outside the input weigh 0; the rest renormalized
        const Expr* sum = nullptr;
        for (size_t i = 0; i < w.size(); ++i) {
          const Expr* in_axis = f.both(f.cmp(Alu::Ge, pos[i], f.c(0.0)),
                                       f.cmp(Alu::Le, pos[i], f.c(last)));
          w[i] = f.where(in_axis, w[i], f.c(0.0));
          sum = sum ? f.add(sum, w[i]) : w[i];
        }
        for (const Expr*& c : w) c = f.div(c, sum);
      }
      // The sum runs in f32 for f32, f16 and bf16 data, in f64 for f64.
      const DType acc = n->dtype == DType::f64 ? DType::f64 : DType::f32;
      for (size_t i = 0; i < w.size(); ++i) {
        const Expr* v = at(pos[i]);
        if (v->dtype != acc) v = ar.alu(Alu::Cast, acc, {v});
        const Expr* c = acc == DType::f64 ? w[i] : ar.alu(Alu::Cast, acc, {w[i]});
        const Expr* term = ar.alu(Alu::Mul, acc, {c, v});
        value = value ? ar.alu(Alu::Add, acc, {value, term}) : term;
      }
      if (acc != n->dtype) value = ar.alu(Alu::Cast, n->dtype, {value});
    }
    if (inside)
      value = ar.alu(Alu::Where, n->dtype,
                     {inside, value, ar.constant(n->dtype, n->attrs.f(AttrKey::value))});
    return value;
  };
  return l;
}

}  // namespace kiln::passes
