// Reference semantics of the scans: cumsum along one axis (inclusive or exclusive, forward or
// reverse), summed in scan order, one row at a time; and top-k's indices, a stable sort of each
// row.
#include <algorithm>
#include <cmath>
#include <numeric>

#include "interp/reference_ops.h"

namespace kiln::interp::reference {

namespace {

// TopKIndices: each row's positions stably sorted by value (larger first when largest), NaN
// above every number, equal values keeping ascending index order; the first k are the result.
Value eval_topk_indices(const ir::Node& n, const Value& x) {
  const auto axis = static_cast<size_t>(n.attrs.i(ir::AttrKey::axis));
  const int64_t k = n.attrs.i(ir::AttrKey::k);
  const bool largest = n.attrs.b(ir::AttrKey::largest);
  int64_t outer = 1, inner = 1;
  for (size_t d = 0; d < axis; ++d) outer *= x.shape[d];
  for (size_t d = axis + 1; d < x.shape.size(); ++d) inner *= x.shape[d];
  const int64_t len = x.shape[axis];
  // `a` ranks before `b`: NaN is the largest value (torch.topk, numpy's sort).
  const auto before = [largest](double a, double b) {
    if (std::isnan(a) || std::isnan(b)) return largest ? !std::isnan(b) : !std::isnan(a);
    return largest ? a > b : a < b;
  };
  Value out = make_value(n.dtype, n.shape);
  std::vector<int64_t> order(static_cast<size_t>(len));
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < inner; ++i) {
      const auto at = [&](int64_t j) {
        return x.data[static_cast<size_t>((o * len + j) * inner + i)];
      };
      std::iota(order.begin(), order.end(), int64_t{0});
      std::stable_sort(order.begin(), order.end(),
                       [&](int64_t a, int64_t b) { return before(at(a), at(b)); });
      for (int64_t j = 0; j < k; ++j)
        out.data[static_cast<size_t>((o * k + j) * inner + i)] =
            static_cast<double>(order[static_cast<size_t>(j)]);
    }
  return out;
}

}  // namespace

Value eval_scan(const ir::Node& n, const Value& x) {
  if (n.op == ir::Op::TopKIndices) return eval_topk_indices(n, x);
  KILN_CHECK(n.op == ir::Op::CumSum) << "not a scan: " << ir::op_enum_name(n.op);
  const auto axis = static_cast<size_t>(n.attrs.i(ir::AttrKey::axis));
  const bool exclusive = n.attrs.b(ir::AttrKey::exclusive);
  const bool reverse = n.attrs.b(ir::AttrKey::reverse);
  KILN_CHECK(axis < x.shape.size()) << "cumsum axis " << axis << " of " << ir::shape_str(x.shape);
  int64_t outer = 1, inner = 1;
  for (size_t d = 0; d < axis; ++d) outer *= x.shape[d];
  for (size_t d = axis + 1; d < x.shape.size(); ++d) inner *= x.shape[d];
  const int64_t len = x.shape[axis];
  const bool integer = ir::is_int(x.dtype);
  Value out = make_value(n.dtype, n.shape);
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < inner; ++i) {
      // Integer sums wrap (exact int64 arithmetic), like the sum reduction.
      double acc = 0;
      uint64_t iacc = 0;
      for (int64_t step = 0; step < len; ++step) {
        const int64_t k = reverse ? len - 1 - step : step;
        const int64_t at = (o * len + k) * inner + i;
        const double v = x.data[static_cast<size_t>(at)];
        if (exclusive)
          out.data[static_cast<size_t>(at)] =
              integer ? wrap_integer(static_cast<int64_t>(iacc), n.dtype) : acc;
        if (integer)
          iacc += static_cast<uint64_t>(to_int64(v));
        else
          acc += v;
        if (!exclusive)
          out.data[static_cast<size_t>(at)] =
              integer ? wrap_integer(static_cast<int64_t>(iacc), n.dtype) : acc;
      }
    }
  return out;
}

}  // namespace kiln::interp::reference
