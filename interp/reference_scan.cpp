// Reference semantics of the scans: cumsum along one axis (inclusive or exclusive, forward or
// reverse), summed in scan order, one row at a time.
#include "interp/reference_ops.h"

namespace kiln::interp::reference {

Value eval_scan(const ir::Node& n, const Value& x) {
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
