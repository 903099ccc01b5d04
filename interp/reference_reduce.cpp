// Reference semantics of the reductions: sum, prod, max, min (over axes) and argmax, argmin.
#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "interp/reference_ops.h"
#include "ir/scalar_semantics.h"

namespace kiln::interp::reference {

namespace {

using ir::AttrKey;
using ir::Op;

// Folds one more element into an accumulator. Integer sums and products wrap (exact int64
// arithmetic); max and min propagate NaN like numpy.max.
double accumulate(Op op, ir::DType dtype, double acc, double x) {
  const bool integer = ir::is_int(dtype);
  std::optional<ir::Reduction> r = ir::reduction_of(op);
  KILN_CHECK(r) << "not a reduction: " << ir::op_enum_name(op);
  switch (*r) {
    case ir::Reduction::Sum:
      if (!integer) return acc + x;
      return wrap_integer(static_cast<int64_t>(static_cast<uint64_t>(to_int64(acc)) +
                                               static_cast<uint64_t>(to_int64(x))),
                          dtype);
    case ir::Reduction::Prod:
      if (!integer) return acc * x;
      return wrap_integer(static_cast<int64_t>(static_cast<uint64_t>(to_int64(acc)) *
                                               static_cast<uint64_t>(to_int64(x))),
                          dtype);
    case ir::Reduction::ReduceMax:
      return ir::ieee_maximum(acc, x);
    case ir::Reduction::ReduceMin:
      return ir::ieee_minimum(acc, x);
    case ir::Reduction::ArgMax:
    case ir::Reduction::ArgMin:  // arg_reduce compares instead of accumulating
      break;
  }
  KILN_CHECK(false) << "no accumulator for " << ir::op_enum_name(op);
  return 0;
}

Expected<Value> empty_reduction_error(const ir::Node& n, const Value& x) {
  return make_error(fmt::format("reference: {} of {}{} over an empty axis has no identity",
                                ir::op_enum_name(n.op), ir::dtype_name(x.dtype),
                                ir::shape_str(x.shape)));
}

Expected<Value> reduce_axes(const ir::Node& n, const Value& x) {
  const std::vector<int64_t>& axes = n.attrs.ints(AttrKey::axes);
  // The output in keepdim form: reduced axes have extent 1 and so stride 0 when reading it.
  ir::Shape kept = x.shape;
  bool empty_axis = false;
  for (int64_t a : axes) {
    KILN_CHECK(a >= 0 && a < static_cast<int64_t>(x.shape.size())) << "axis " << a;
    empty_axis |= x.shape[a] == 0;
    kept[a] = 1;
  }
  KILN_CHECK(ir::shape_numel(kept) == n.numel())
      << ir::shape_str(x.shape) << " reduced to " << ir::shape_str(n.shape);
  const bool has_identity = n.op == Op::Sum || n.op == Op::Prod;
  if (empty_axis && !has_identity && n.numel() > 0) return empty_reduction_error(n, x);

  Value out = make_value(n.dtype, n.shape);
  std::vector<bool> started(out.data.size(), false);
  const std::vector<int64_t> out_strides = broadcast_strides(kept, x.shape);
  int64_t flat = 0;
  if (x.exact() && make_exact(out)) {  // i64 exactly: sums and products wrap, as the kernels'
    std::vector<uint64_t> acc(out.ints.size(), n.op == Op::Prod ? 1 : 0);
    for_each_index(x.shape, [&](const std::vector<int64_t>& index) {
      const int64_t v = x.ints[static_cast<size_t>(flat++)];
      const auto o = static_cast<size_t>(offset_of(index, out_strides));
      const auto u = static_cast<uint64_t>(v);
      const auto a = static_cast<int64_t>(acc[o]);
      acc[o] = n.op == Op::Sum         ? acc[o] + u
               : n.op == Op::Prod      ? acc[o] * u
               : !started[o]           ? u
               : n.op == Op::ReduceMax ? static_cast<uint64_t>(std::max(a, v))
                                       : static_cast<uint64_t>(std::min(a, v));
      started[o] = true;
    });
    for (size_t o = 0; o < acc.size(); ++o)
      set_int(out, static_cast<int64_t>(o), static_cast<int64_t>(acc[o]));
    return out;
  }
  if (has_identity) out.data.assign(out.data.size(), n.op == Op::Sum ? 0.0 : 1.0);
  for_each_index(x.shape, [&](const std::vector<int64_t>& index) {
    const double v = x.data[flat++];
    const int64_t o = offset_of(index, out_strides);
    out.data[o] = !has_identity && !started[o] ? v : accumulate(n.op, x.dtype, out.data[o], v);
    started[o] = true;
  });
  for (double& v : out.data) v = normalize(v, n.dtype);
  return out;
}

// numpy: NaN propagates, so the first NaN wins for both argmax and argmin. Strict comparisons
// keep the first index on ties.
bool better(Op op, double candidate, double best) {
  if (op == Op::ArgMax) return (std::isnan(candidate) && !std::isnan(best)) || candidate > best;
  return (std::isnan(candidate) && !std::isnan(best)) || candidate < best;
}

Expected<Value> arg_reduce(const ir::Node& n, const Value& x) {
  const int64_t axis = n.attrs.i(AttrKey::axis);
  KILN_CHECK(axis >= 0 && axis < static_cast<int64_t>(x.shape.size())) << "axis " << axis;
  const int64_t len = x.shape[axis];
  if (len == 0 && n.numel() > 0) return empty_reduction_error(n, x);
  int64_t inner = 1, outer = 1;
  for (size_t i = 0; i < x.shape.size(); ++i) {
    if (static_cast<int64_t>(i) < axis) outer *= x.shape[i];
    if (static_cast<int64_t>(i) > axis) inner *= x.shape[i];
  }
  KILN_CHECK(outer * inner == n.numel())
      << ir::shape_str(x.shape) << " arg-reduced to " << ir::shape_str(n.shape);
  Value out = make_value(n.dtype, n.shape);
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t i = 0; i < inner; ++i) {
      const int64_t first = o * len * inner + i;
      int64_t best = 0;
      if (x.exact()) {  // i64 past 2^53: compare the integers, not their nearest doubles
        const int64_t* row = x.ints.data() + first;
        for (int64_t k = 1; k < len; ++k)
          if (n.op == Op::ArgMax ? row[k * inner] > row[best * inner]
                                 : row[k * inner] < row[best * inner])
            best = k;
      } else {
        const double* row = x.data.data() + first;
        for (int64_t k = 1; k < len; ++k)
          if (better(n.op, row[k * inner], row[best * inner])) best = k;
      }
      out.data[o * inner + i] = normalize(static_cast<double>(best), n.dtype);
    }
  }
  return out;
}

}  // namespace

Expected<Value> eval_reduce(const ir::Node& n, const Value& x) {
  if (n.op == Op::ArgMax || n.op == Op::ArgMin) return arg_reduce(n, x);
  return reduce_axes(n, x);
}

}  // namespace kiln::interp::reference
