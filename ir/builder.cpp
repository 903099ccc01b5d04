// Checked construction of elementwise, source and reduction nodes (ir/builder.h); the shared
// dtype rules and axis normalization used by the other builder files live here too.
#include "ir/builder.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>

#include "ir/builder_support.h"

namespace kiln::ir {

namespace detail {

std::optional<std::string> unrepresentable(double value, DType dtype) {
  double lo = 0, hi = 0;  // inclusive range of the integer type, as doubles
  switch (dtype) {
    case DType::f32:
    case DType::f64:
    case DType::f16:
    case DType::bf16:
      return std::nullopt;
    case DType::boolean:
      if (value == 0 || value == 1) return std::nullopt;
      return std::string("is not representable as bool (expected 0 or 1)");
    case DType::i8:
      lo = -128, hi = 127;
      break;
    case DType::u8:
      lo = 0, hi = 255;
      break;
    case DType::i32:
      lo = -2147483648.0, hi = 2147483647.0;
      break;
    case DType::i64:
      lo = -9223372036854775808.0, hi = 9223372036854775807.0;
      break;
  }
  if (!std::isfinite(value) || std::trunc(value) != value)
    return fmt::format("is not representable in {} (expected an integer)", dtype_name(dtype));
  // 2^63 rounds to hi as a double, so the upper bound of i64 is exclusive.
  bool too_big = dtype == DType::i64 ? value >= hi : value > hi;
  if (value < lo || too_big) return fmt::format("is out of range for {}", dtype_name(dtype));
  return std::nullopt;
}

Expected<void> check_known_dtype(std::string_view op, DType dtype) {
  if (is_dtype(dtype)) return {};
  return op_error(op, "{} is not a kiln dtype", static_cast<int>(dtype));
}

Expected<void> check_numel(std::string_view op, const Shape& shape) {
  for (int64_t d : shape)
    if (d < 0) return op_error(op, "negative dimension in shape {}", shape_str(shape));
  if (auto problem = shape_size_problem(shape))
    return op_error(op, "shape {} {}", shape_brief(shape), *problem);
  return {};
}

Expected<int64_t> normalize_one_axis(std::string_view op, int64_t axis, const Shape& shape) {
  auto a = normalize_axis(axis, static_cast<int64_t>(shape.size()));
  if (!a) return op_error(op, "axis {} is out of range for shape {}", axis, shape_str(shape));
  return *a;
}

Expected<std::vector<int64_t>> normalize_axes(std::string_view op, const std::vector<int64_t>& axes,
                                              const Shape& shape) {
  std::vector<int64_t> out;
  out.reserve(axes.size());
  for (int64_t axis : axes) {
    KILN_IR_TRY(int64_t a, normalize_one_axis(op, axis, shape));
    out.push_back(a);
  }
  std::sort(out.begin(), out.end());
  if (auto dup = std::adjacent_find(out.begin(), out.end()); dup != out.end())
    return op_error(op, "axis {} appears twice in axes {}", *dup, ints_str(axes));
  return out;
}

}  // namespace detail

namespace {

using detail::op_error;

// The dtype rule of ir/builder.h for `op` applied to operands of dtype `t` (kiln/ops.def's Dtypes).
Expected<void> check_dtype(Op op, DType t) {
  switch (op_dtypes(op)) {
    case OpDtypes::Float:
      if (!is_float(t)) return op_error(op_name(op), "needs a floating dtype, got {}", dtype_name(t));
      return {};
    case OpDtypes::Bool:
      if (t != DType::boolean)
        return op_error(op_name(op), "needs bool operands, got {}", dtype_name(t));
      return {};
    case OpDtypes::Numeric:
      if (t == DType::boolean) return op_error(op_name(op), "needs a numeric dtype, got bool");
      return {};
    case OpDtypes::Any:
    case OpDtypes::Compare:
    case OpDtypes::Select:
    case OpDtypes::None:
      return {};
  }
  return {};
}

// The shape of reducing `axes` (normalized) of `shape`.
Shape reduced_shape(const Shape& shape, const std::vector<int64_t>& axes, bool keepdim) {
  Shape out;
  size_t next = 0;
  for (size_t i = 0; i < shape.size(); ++i) {
    bool reduced = next < axes.size() && axes[next] == static_cast<int64_t>(i);
    if (reduced) ++next;
    if (!reduced)
      out.push_back(shape[i]);
    else if (keepdim)
      out.push_back(1);
  }
  return out;
}

Expected<std::vector<int64_t>> resolve_axes(std::string_view op,
                                            const std::optional<std::vector<int64_t>>& axes,
                                            const Shape& shape) {
  if (axes) return detail::normalize_axes(op, *axes, shape);
  std::vector<int64_t> all(shape.size());
  for (size_t i = 0; i < all.size(); ++i) all[i] = static_cast<int64_t>(i);
  return all;
}

}  // namespace

Expected<ValueType> Builder::unary_type(Op op, DType x, const Shape& shape) {
  KILN_CHECK(is_elementwise(op) && op_arity(op) == 1 && op != Op::Cast) << op_enum_name(op);
  KILN_IR_OK(check_dtype(op, x));
  return ValueType{x, shape};
}

NodeResult Builder::unary(Op op, const Node* x) {
  KILN_IR_TRY(ValueType t, unary_type(op, x->dtype, x->shape));
  return g_.make(op, t.dtype, std::move(t.shape), {x}, {});
}

Expected<ValueType> Builder::binary_type(Op op, DType a, const Shape& a_shape, DType b,
                                         const Shape& b_shape) {
  KILN_CHECK(is_elementwise(op) && op_arity(op) == 2) << op_enum_name(op);
  if (a != b)
    return op_error(op_name(op), "dtypes {} and {} do not match", dtype_name(a), dtype_name(b));
  KILN_IR_OK(check_dtype(op, a));
  auto shape = broadcast_shapes(a_shape, b_shape);
  if (!shape)
    return op_error(op_name(op), "shapes {} and {} do not broadcast", shape_str(a_shape),
                    shape_str(b_shape));
  KILN_IR_OK(detail::check_numel(op_name(op), *shape));
  return ValueType{is_comparison(op) ? DType::boolean : a, std::move(*shape)};
}

NodeResult Builder::binary(Op op, const Node* a, const Node* b) {
  KILN_IR_TRY(ValueType t, binary_type(op, a->dtype, a->shape, b->dtype, b->shape));
  return g_.make(op, t.dtype, std::move(t.shape), {a, b}, {});
}

Expected<void> Builder::check_scalar(double value, DType dtype, std::string_view op) {
  if (auto why = detail::unrepresentable(value, dtype))
    return op_error(op, "{} {} {}", op == "full" ? "value" : "scalar", value, *why);
  return {};
}

NodeResult Builder::where(const Node* cond, const Node* a, const Node* b) {
  if (cond->dtype != DType::boolean)
    return op_error("where", "condition must be bool, got {}", dtype_name(cond->dtype));
  if (a->dtype != b->dtype)
    return op_error("where", "dtypes {} and {} do not match", dtype_name(a->dtype),
                    dtype_name(b->dtype));
  auto ab = broadcast_shapes(a->shape, b->shape);
  auto shape = ab ? broadcast_shapes(cond->shape, *ab) : std::nullopt;
  if (!shape)
    return op_error("where", "shapes {}, {} and {} do not broadcast", shape_str(cond->shape),
                    shape_str(a->shape), shape_str(b->shape));
  KILN_IR_OK(detail::check_numel("where", *shape));
  return g_.make(Op::Where, a->dtype, std::move(*shape), {cond, a, b}, {});
}

NodeResult Builder::clip(const Node* x, const Node* lo, const Node* hi) {
  if (x->dtype == DType::boolean) return op_error("clip", "needs a numeric dtype, got bool");
  for (const Node* bound : {lo, hi})
    if (bound && bound->dtype != x->dtype)
      return op_error("clip", "bound {}{} does not have x's dtype {}", dtype_name(bound->dtype),
                      shape_str(bound->shape), dtype_name(x->dtype));
  if (!lo || !hi) {
    if (lo) return binary(Op::Max, x, lo);
    if (hi) return binary(Op::Min, x, hi);
    return x;
  }
  auto xl = broadcast_shapes(x->shape, lo->shape);
  auto shape = xl ? broadcast_shapes(*xl, hi->shape) : std::nullopt;
  if (!shape)
    return op_error("clip", "shapes {}, {} and {} do not broadcast", shape_str(x->shape),
                    shape_str(lo->shape), shape_str(hi->shape));
  KILN_IR_OK(detail::check_numel("clip", *shape));
  return g_.make(Op::Clip, x->dtype, std::move(*shape), {x, lo, hi}, {});
}

NodeResult Builder::cast(const Node* x, DType to) {
  KILN_IR_OK(detail::check_known_dtype("cast", to));
  return g_.make(Op::Cast, to, x->shape, {x}, Attrs{{AttrKey::to, to}});
}

NodeResult Builder::scalar(double value, DType dtype) {
  const auto bits = std::bit_cast<uint64_t>(value);
  const size_t known = std::min(recent_count_, recent_.size());
  for (size_t i = 0; i < known; ++i)
    if (recent_[i].bits == bits && recent_[i].dtype == dtype) return recent_[i].node;
  NodeResult n = full({}, value, dtype);
  if (n) recent_[recent_count_++ % recent_.size()] = RecentScalar{bits, dtype, *n};
  return n;
}

NodeResult Builder::full(const Shape& shape, double value, DType dtype) {
  KILN_IR_OK(detail::check_known_dtype("full", dtype));
  KILN_IR_OK(detail::check_numel("full", shape));
  KILN_IR_OK(check_scalar(value, dtype));
  if (dtype == DType::i64)  // in range (checked), so integral
    return g_.make(Op::Full, dtype, shape, {},
                   Attrs{{AttrKey::shape, shape},
                         {AttrKey::value, static_cast<int64_t>(value)},
                         {AttrKey::dtype, dtype}});
  if (!is_float(dtype)) value += 0.0;  // integers have no -0: one canonical zero
  return g_.make(Op::Full, dtype, shape, {},
                 Attrs{{AttrKey::shape, shape}, {AttrKey::value, value}, {AttrKey::dtype, dtype}});
}

NodeResult Builder::full_int(const Shape& shape, int64_t value, DType dtype) {
  if (dtype != DType::i64) {
    // Other dtypes hold no integer a double does not: past theirs, the range error names the
    // value as written.
    KILN_IR_OK(detail::check_known_dtype("full", dtype));
    if (auto why = detail::unrepresentable(static_cast<double>(value), dtype))
      return op_error("full", "value {} {}", value, *why);
    return full(shape, static_cast<double>(value), dtype);
  }
  KILN_IR_OK(detail::check_numel("full", shape));
  return g_.make(Op::Full, dtype, shape, {},
                 Attrs{{AttrKey::shape, shape}, {AttrKey::value, value}, {AttrKey::dtype, dtype}});
}

NodeResult Builder::arange(int64_t start, int64_t end, int64_t step, DType dtype) {
  KILN_IR_OK(detail::check_known_dtype("arange", dtype));
  if (step == 0) return op_error("arange", "step must not be 0");
  if (dtype == DType::boolean) return op_error("arange", "needs a numeric dtype, got bool");
  // Python range length; __int128 keeps end - start from overflowing.
  __int128 span = static_cast<__int128>(end) - start;
  __int128 len = step > 0 ? (span + step - 1) / step : (span + step + 1) / step;
  if (len < 0) len = 0;
  if (len > kMaxNumel)
    return op_error("arange", "range [{}, {}) step {} is too long (kiln indexes at most 2^59 elements)",
                    start, end, step);
  // The values lie between start and the last element, so checking both ends suffices.
  const auto last = static_cast<int64_t>(start + (len - 1) * step);  // in range, as len says
  if (len > 0 && is_int(dtype) && dtype != DType::i64 &&
      (detail::unrepresentable(static_cast<double>(start), dtype) ||
       detail::unrepresentable(static_cast<double>(last), dtype)))
    return op_error("arange", "values from {} to {} do not fit in {}", start, last,
                    dtype_name(dtype));
  return g_.make(Op::Arange, dtype, {static_cast<int64_t>(len)}, {},
                 Attrs{{AttrKey::start, start},
                       {AttrKey::end, end},
                       {AttrKey::step, step},
                       {AttrKey::dtype, dtype}});
}

NodeResult Builder::reduce(Op op, const Node* x, std::optional<std::vector<int64_t>> axes,
                           bool keepdim) {
  KILN_CHECK(op == Op::Sum || op == Op::ReduceMax || op == Op::ReduceMin || op == Op::Prod)
      << op_enum_name(op);
  std::string_view name = op_name(op);
  KILN_IR_OK(check_dtype(op, x->dtype));
  KILN_IR_TRY(std::vector<int64_t> ax, resolve_axes(name, axes, x->shape));
  if (ax.empty()) return x;  // reducing no axis is the identity; keep the graph free of no-ops
  if (op == Op::ReduceMax || op == Op::ReduceMin)
    for (int64_t a : ax)
      if (x->shape[a] == 0)
        return op_error(name, "cannot reduce the empty axis {} of shape {}", a,
                        shape_str(x->shape));
  Shape out = reduced_shape(x->shape, ax, keepdim);
  return g_.make(op, x->dtype, std::move(out), {x},
                 Attrs{{AttrKey::axes, std::move(ax)}, {AttrKey::keepdim, keepdim}});
}

double mean_scale(int64_t count) {
  return 1.0 / static_cast<double>(count);
}

std::optional<int64_t> mean_count(double scale) {
  if (!(scale > 0.0 && scale <= 0.5)) return std::nullopt;
  const double n = std::round(1.0 / scale);
  if (!(n >= 2.0 && n <= 9007199254740992.0)) return std::nullopt;  // 2^53: every count exact
  const auto count = static_cast<int64_t>(n);
  if (std::bit_cast<uint64_t>(mean_scale(count)) != std::bit_cast<uint64_t>(scale))
    return std::nullopt;
  return count;
}

NodeResult Builder::mean(const Node* x, std::optional<std::vector<int64_t>> axes, bool keepdim) {
  if (!is_float(x->dtype))
    return op_error("mean", "needs a floating dtype, got {}", dtype_name(x->dtype));
  KILN_IR_TRY(std::vector<int64_t> ax, resolve_axes("mean", axes, x->shape));
  if (ax.empty()) return x;
  // An f16 or bf16 mean is taken in f32 and rounded once: 1/n as a constant of the dtype is off
  // by up to 2^-9 relative (a mean of 10^6 f16 ones was 1.0137), subnormal in f16 past n = 2^14
  // and 0 past 2^25, and a sum stored in the dtype between kernels overflows past 65504.
  if (x->dtype == DType::f16 || x->dtype == DType::bf16) {
    KILN_IR_TRY(const Node* wide, cast(x, DType::f32));
    KILN_IR_TRY(const Node* m, mean(wide, std::move(ax), keepdim));
    return cast(m, x->dtype);
  }
  int64_t count = 1;
  for (int64_t a : ax) count *= x->shape[a];
  KILN_IR_TRY(const Node* s, reduce(Op::Sum, x, ax, keepdim));
  KILN_IR_TRY(const Node* inv, scalar(mean_scale(count), x->dtype));
  return binary(Op::Mul, s, inv);
}

NodeResult Builder::arg_reduce(Op op, const Node* x, int64_t axis, bool keepdim) {
  KILN_CHECK(op == Op::ArgMax || op == Op::ArgMin) << op_enum_name(op);
  std::string_view name = op_name(op);
  KILN_IR_TRY(int64_t a, detail::normalize_one_axis(name, axis, x->shape));
  if (x->shape[a] == 0)
    return op_error(name, "cannot reduce the empty axis {} of shape {}", a, shape_str(x->shape));
  Shape out = reduced_shape(x->shape, {a}, keepdim);
  return g_.make(op, DType::i32, std::move(out), {x},
                 Attrs{{AttrKey::axis, a}, {AttrKey::keepdim, keepdim}});
}

NodeResult Builder::cumsum(const Node* x, int64_t axis, bool exclusive, bool reverse) {
  KILN_IR_OK(check_dtype(Op::CumSum, x->dtype));
  if (x->shape.empty())
    return op_error("cumsum", "needs an operand of rank >= 1, got the scalar {}{}",
                    dtype_name(x->dtype), shape_str(x->shape));
  KILN_IR_TRY(int64_t a, detail::normalize_one_axis("cumsum", axis, x->shape));
  return g_.make(
      Op::CumSum, x->dtype, x->shape, {x},
      Attrs{{AttrKey::axis, a}, {AttrKey::exclusive, exclusive}, {AttrKey::reverse, reverse}});
}

NodeResult Builder::topk_indices(const Node* x, int64_t k, int64_t axis, bool largest) {
  KILN_IR_OK(check_dtype(Op::TopKIndices, x->dtype));
  if (x->shape.empty())
    return op_error("topk_indices", "needs an operand of rank >= 1, got the scalar {}{}",
                    dtype_name(x->dtype), shape_str(x->shape));
  KILN_IR_TRY(int64_t a, detail::normalize_one_axis("topk_indices", axis, x->shape));
  const int64_t n = x->shape[static_cast<size_t>(a)];
  if (k < 0 || k > n)
    return op_error("topk_indices", "k = {} is out of range [0, {}] for axis {} of shape {}", k, n,
                    a, shape_str(x->shape));
  Shape out = x->shape;
  out[static_cast<size_t>(a)] = k;
  return g_.make(Op::TopKIndices, DType::i64, std::move(out), {x},
                 Attrs{{AttrKey::axis, a}, {AttrKey::k, k}, {AttrKey::largest, largest}});
}

}  // namespace kiln::ir
