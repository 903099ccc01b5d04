// ONNX's quantization ops (linear, 8-bit) on kiln primitives: QuantizeLinear, DequantizeLinear and
// DynamicQuantizeLinear as elementwise arithmetic with round-half-to-even and saturation;
// MatMulInteger, ConvInteger, QLinearMatMul and QLinearConv as i32 matmuls and convolutions of the
// zero-point-shifted operands (exact), requantized in f64 as ONNX's reference does.
#include <fmt/format.h>

#include "onnx/import_context.h"

namespace kiln::onnx {

namespace {

using ir::DType;
using ir::Node;
using ir::Op;

struct Range8 {
  double lo, hi;
};

Expected<Range8> range_of(Context& c, DType t) {
  if (t == DType::u8) return Range8{0, 255};
  if (t == DType::i8) return Range8{-128, 127};
  return c.unsupported(fmt::format("quantized type {} (uint8 and int8 are)", ir::dtype_name(t)));
}

// A scale or zero point: a scalar, or one value per index of `axis` of a tensor of `rank` axes
// (reshaped to broadcast there).
Expected<const Node*> per_axis(Context& c, const Node* v, int64_t axis, size_t rank, int64_t extent,
                               std::string_view what) {
  if (v->shape.empty() || (v->shape.size() == 1 && v->shape[0] == 1)) return v;
  if (axis < 0)
    return c.fail(fmt::format("{} has shape {}: expected a scalar (no axis of the rank-{} operand takes it)", what,
                              ir::shape_str(v->shape), rank));
  if (v->shape.size() != 1 || v->shape[0] != extent)
    return c.fail(fmt::format("{} has shape {}: expected a scalar or {} values along axis {}", what,
                              ir::shape_str(v->shape), extent, axis));
  ir::Shape s(rank, 1);
  s[size_t(axis)] = extent;
  return c.check(c.b().reshape(v, std::vector<int64_t>(s.begin(), s.end())));
}

// The `axis` attribute of a per-axis scale or zero point (ignored, and unchecked, for scalars).
struct Axis {
  int64_t axis = 0;  // normalized; -1 when out of range
  int64_t extent = 1;
};
Axis axis_attr(Context& c, const ir::Shape& shape) {
  const int64_t r = int64_t(shape.size()), a = c.attr_i("axis", 1);
  if (a < -r || a >= r) return {-1, 0};
  const int64_t axis = a < 0 ? a + r : a;
  return {axis, shape[size_t(axis)]};
}

// a / b correctly rounded to `to`: the quotient in f64, then one rounding. A backend may divide
// by multiplying with the reciprocal (a loop-invariant divisor), which is within tolerance for
// any float result but moves a quotient that ties at .5 before rounding to an integer, where
// ONNX's reference divides in f32 exactly.
Expected<const Node*> quotient(Context& c, const Node* a, const Node* b, DType to) {
  ir::Builder& B = c.b();
  KILN_ONNX_TRY(a, c.check(B.cast(a, DType::f64)));
  KILN_ONNX_TRY(b, c.check(B.cast(b, DType::f64)));
  KILN_ONNX_TRY(const Node* q, c.check(B.binary(Op::Div, a, b)));
  return c.check(B.cast(q, to));
}

// saturate(round_half_even(v) + zero_point) as `to` (v and zero_point of one float dtype).
Expected<const Node*> requantize(Context& c, const Node* v, const Node* zero_point, DType to) {
  Expr e{c};
  KILN_ONNX_TRY(Range8 r, range_of(c, to));
  KILN_ONNX_TRY(const Node* y, round_half_even(c, v));
  if (zero_point) { KILN_ONNX_TRY(y, e.bin(Op::Add, y, zero_point)); }
  KILN_ONNX_TRY(y, e.bin(Op::Max, y, r.lo));
  KILN_ONNX_TRY(y, e.bin(Op::Min, y, r.hi));
  return c.check(c.b().cast(y, to));
}

Outs quantize_linear(Context& c) {
  if (c.attr("saturate")) return c.unsupported("attribute saturate (float8 targets)");
  KILN_ONNX_TRY(const Node* x, c.x(0));
  KILN_ONNX_TRY(const Node* scale, c.x(1));
  if (!ir::is_float(x->dtype)) return c.fail("x must be floating point");
  const auto [axis, extent] = axis_attr(c, x->shape);
  KILN_ONNX_TRY(scale, per_axis(c, scale, axis, x->shape.size(), extent, "y_scale"));
  DType to = DType::u8;
  const Node* zp = nullptr;
  if (c.has(2)) {
    KILN_ONNX_TRY(zp, c.x(2));
    to = zp->dtype;
    KILN_ONNX_TRY(zp, per_axis(c, zp, axis, x->shape.size(), extent, "y_zero_point"));
    KILN_ONNX_TRY(zp, c.check(c.b().cast(zp, x->dtype)));
  }
  KILN_ONNX_TRY(const Node* v, quotient(c, x, scale, x->dtype));
  KILN_ONNX_TRY(const Node* y, requantize(c, v, zp, to));
  return std::vector<Value>{c.out(y)};
}

Outs dequantize_linear(Context& c) {
  KILN_ONNX_TRY(const Node* x, c.x(0));
  KILN_ONNX_TRY(const Node* scale, c.x(1));
  if (x->dtype != DType::u8 && x->dtype != DType::i8 && x->dtype != DType::i32)
    return c.unsupported(fmt::format("DequantizeLinear of {}", ir::dtype_name(x->dtype)));
  if (!ir::is_float(scale->dtype)) return c.fail("x_scale must be floating point");
  const auto [axis, extent] = axis_attr(c, x->shape);
  KILN_ONNX_TRY(scale, per_axis(c, scale, axis, x->shape.size(), extent, "x_scale"));
  ir::Builder& B = c.b();
  KILN_ONNX_TRY(const Node* v, c.check(B.cast(x, scale->dtype)));
  if (c.has(2)) {
    KILN_ONNX_TRY(const Node* zp, c.x(2));
    if (zp->dtype != x->dtype) return c.fail("x_zero_point's type differs from x's");
    KILN_ONNX_TRY(zp, per_axis(c, zp, axis, x->shape.size(), extent, "x_zero_point"));
    KILN_ONNX_TRY(zp, c.check(B.cast(zp, scale->dtype)));
    KILN_ONNX_TRY(v, c.check(B.binary(Op::Sub, v, zp)));
  }
  return one(c, B.binary(Op::Mul, v, scale));
}

// uint8 quantization of x over its own range (widened to include 0): y, y_scale, y_zero_point.
Outs dynamic_quantize_linear(Context& c) {
  KILN_ONNX_TRY(const Node* x, c.x(0));
  if (x->dtype != DType::f32) return c.fail("x must be float");
  ir::Builder& B = c.b();
  Expr e{c};
  KILN_ONNX_TRY(const Node* lo, c.check(B.reduce(Op::ReduceMin, x, std::nullopt, false)));
  KILN_ONNX_TRY(const Node* hi, c.check(B.reduce(Op::ReduceMax, x, std::nullopt, false)));
  KILN_ONNX_TRY(lo, e.bin(Op::Min, lo, 0.0));
  KILN_ONNX_TRY(hi, e.bin(Op::Max, hi, 0.0));
  KILN_ONNX_TRY(const Node* span, e.bin(Op::Sub, hi, lo));
  KILN_ONNX_TRY(const Node* range, e.k(255, DType::f32));
  KILN_ONNX_TRY(const Node* scale, quotient(c, span, range, DType::f32));
  // zero point: round(saturate(0 - lo / scale))
  KILN_ONNX_TRY(const Node* z, quotient(c, lo, scale, DType::f32));
  KILN_ONNX_TRY(z, e.un(Op::Neg, z));
  KILN_ONNX_TRY(z, e.bin(Op::Max, z, 0.0));
  KILN_ONNX_TRY(z, e.bin(Op::Min, z, 255.0));
  KILN_ONNX_TRY(z, round_half_even(c, z));
  KILN_ONNX_TRY(const Node* v, quotient(c, x, scale, DType::f32));
  KILN_ONNX_TRY(const Node* y, requantize(c, v, z, DType::u8));
  KILN_ONNX_TRY(const Node* zp, c.check(B.cast(z, DType::u8)));
  return std::vector<Value>{c.out(y), c.out(scale), c.out(zp)};
}

// x - zero_point in i32 (x 8-bit); the zero point a scalar or one per index of `axis`.
Expected<const Node*> shifted(Context& c, const Node* x, size_t zp_input, int64_t axis, std::string_view what) {
  if (x->dtype != DType::u8 && x->dtype != DType::i8)
    return c.unsupported(fmt::format("{} of {} (uint8 and int8 are supported)", c.node().op_type,
                                     ir::dtype_name(x->dtype)));
  ir::Builder& B = c.b();
  KILN_ONNX_TRY(const Node* v, c.check(B.cast(x, DType::i32)));
  if (!c.has(zp_input)) return v;
  KILN_ONNX_TRY(const Node* zp, c.x(zp_input));
  if (zp->dtype != x->dtype) return c.fail(fmt::format("{}'s type differs from its tensor's", what));
  if (axis >= 0) {
    KILN_ONNX_TRY(zp, per_axis(c, zp, axis, x->shape.size(), x->shape[size_t(axis)], what));
  } else if (ir::shape_numel(zp->shape) != 1) {
    return c.fail(fmt::format("{} must be a scalar", what));
  }
  KILN_ONNX_TRY(zp, c.check(B.cast(zp, DType::i32)));
  return c.check(B.binary(Op::Sub, v, zp));
}

// The axis a per-row (A) or per-column (B) zero point of a matmul operand runs along.
int64_t row_axis(const Node* a) { return a->shape.size() >= 2 ? int64_t(a->shape.size()) - 2 : -1; }
int64_t column_axis(const Node* b) { return int64_t(b->shape.size()) - 1; }

Outs matmul_integer(Context& c) {
  KILN_ONNX_TRY(const Node* a, c.x(0));
  KILN_ONNX_TRY(const Node* b, c.x(1));
  KILN_ONNX_TRY(a, shifted(c, a, 2, row_axis(a), "a_zero_point"));
  KILN_ONNX_TRY(b, shifted(c, b, 3, column_axis(b), "b_zero_point"));
  return one(c, c.b().matmul(a, b));
}

Outs conv_integer(Context& c) {
  KILN_ONNX_TRY(const Node* x, c.x(0));
  KILN_ONNX_TRY(const Node* w, c.x(1));
  KILN_ONNX_TRY(x, shifted(c, x, 2, -1, "x_zero_point"));
  KILN_ONNX_TRY(w, shifted(c, w, 3, 0, "w_zero_point"));
  KILN_ONNX_TRY(const Node* y, conv_of(c, x, w, nullptr));
  return std::vector<Value>{c.out(y)};
}

// The i32 accumulator times a_scale * b_scale / y_scale (in the scales' f32, as ONNX's reference
// multiplies them), then in f64 plus y_zero_point, rounded half to even and saturated.
Expected<const Node*> requantize_product(Context& c, const Node* acc, const Node* a_scale, const Node* b_scale,
                                         size_t y_scale_input, size_t y_zp_input) {
  ir::Builder& B = c.b();
  KILN_ONNX_TRY(const Node* y_scale, c.x(y_scale_input));
  KILN_ONNX_TRY(const Node* y_zp, c.x(y_zp_input));
  KILN_ONNX_TRY(const Node* m, c.check(B.binary(Op::Mul, a_scale, b_scale)));
  KILN_ONNX_TRY(m, quotient(c, m, y_scale, m->dtype));
  KILN_ONNX_TRY(m, c.check(B.cast(m, DType::f64)));
  KILN_ONNX_TRY(const Node* v, c.check(B.cast(acc, DType::f64)));
  KILN_ONNX_TRY(v, c.check(B.binary(Op::Mul, v, m)));
  KILN_ONNX_TRY(const Node* zp, c.check(B.cast(y_zp, DType::f64)));
  return requantize(c, v, zp, y_zp->dtype);
}

Outs qlinear_matmul(Context& c) {
  KILN_ONNX_TRY(const Node* a, c.x(0));
  KILN_ONNX_TRY(const Node* b, c.x(3));
  KILN_ONNX_TRY(const Node* a_scale, c.x(1));
  KILN_ONNX_TRY(const Node* b_scale, c.x(4));
  KILN_ONNX_TRY(a_scale, per_axis(c, a_scale, row_axis(a), a->shape.size(),
                                  a->shape.size() >= 2 ? a->shape[a->shape.size() - 2] : 1, "a_scale"));
  KILN_ONNX_TRY(b_scale, per_axis(c, b_scale, column_axis(b), b->shape.size(), b->shape.back(), "b_scale"));
  KILN_ONNX_TRY(a, shifted(c, a, 2, row_axis(a), "a_zero_point"));
  KILN_ONNX_TRY(b, shifted(c, b, 5, column_axis(b), "b_zero_point"));
  KILN_ONNX_TRY(const Node* acc, c.check(c.b().matmul(a, b)));
  KILN_ONNX_TRY(const Node* y, requantize_product(c, acc, a_scale, b_scale, 6, 7));
  return std::vector<Value>{c.out(y)};
}

Outs qlinear_conv(Context& c) {
  KILN_ONNX_TRY(const Node* x, c.x(0));
  KILN_ONNX_TRY(const Node* w, c.x(3));
  KILN_ONNX_TRY(const Node* x_scale, c.x(1));
  KILN_ONNX_TRY(const Node* w_scale, c.x(4));
  if (w->shape.size() < 3) return c.fail("w must be [M, C/group, k...]");
  // x is quantized per tensor (ONNX: x_scale and x_zero_point are scalars).
  KILN_ONNX_TRY(x_scale, per_axis(c, x_scale, -1, x->shape.size(), 0, "x_scale"));
  KILN_ONNX_TRY(x, shifted(c, x, 2, -1, "x_zero_point"));
  KILN_ONNX_TRY(w, shifted(c, w, 5, 0, "w_zero_point"));
  const Node* bias = nullptr;
  if (c.has(8)) {
    KILN_ONNX_TRY(bias, c.x(8));
    if (bias->dtype != DType::i32) return c.fail("B must be int32");
  }
  KILN_ONNX_TRY(const Node* acc, conv_of(c, x, w, bias));
  // A per-channel w_scale runs along the output's channel axis.
  KILN_ONNX_TRY(w_scale, per_axis(c, w_scale, 1, acc->shape.size(), acc->shape[1], "w_scale"));
  KILN_ONNX_TRY(const Node* y, requantize_product(c, acc, x_scale, w_scale, 6, 7));
  return std::vector<Value>{c.out(y)};
}

}  // namespace

void add_quant_ops(OpTable& t) {
  t["QuantizeLinear"] = quantize_linear;
  t["DequantizeLinear"] = dequantize_linear;
  t["DynamicQuantizeLinear"] = dynamic_quantize_linear;
  t["MatMulInteger"] = matmul_integer;
  t["ConvInteger"] = conv_integer;
  t["QLinearMatMul"] = qlinear_matmul;
  t["QLinearConv"] = qlinear_conv;
}

}  // namespace kiln::onnx
