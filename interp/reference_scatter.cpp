// Reference semantics of scatter_elements: the updates applied to a copy of the data one by one,
// in C order of the indices (ir/builder.h's contract, evaluated directly).
#include "interp/reference_ops.h"
#include "ir/scalar_semantics.h"

namespace kiln::interp::reference {

namespace {

// out[q] combined with one update. Integer sums and products wrap; max and min propagate NaN
// (numpy maximum / minimum).
double combine(std::string_view reduction, ir::DType dtype, double acc, double u) {
  const bool integer = ir::is_int(dtype);
  if (reduction == "add") {
    if (!integer) return acc + u;
    return wrap_integer(static_cast<int64_t>(static_cast<uint64_t>(to_int64(acc)) +
                                             static_cast<uint64_t>(to_int64(u))),
                        dtype);
  }
  if (reduction == "mul") {
    if (!integer) return acc * u;
    return wrap_integer(static_cast<int64_t>(static_cast<uint64_t>(to_int64(acc)) *
                                             static_cast<uint64_t>(to_int64(u))),
                        dtype);
  }
  if (reduction == "max") return ir::ieee_maximum(acc, u);
  if (reduction == "min") return ir::ieee_minimum(acc, u);
  return u;  // none: the later update replaces the earlier one
}

}  // namespace

Value eval_scatter(const ir::Node& n, const Value& x, const Value& idx, const Value& upd) {
  KILN_CHECK(n.op == ir::Op::ScatterElements) << "not a scatter: " << ir::op_enum_name(n.op);
  KILN_CHECK(idx.shape == upd.shape && idx.shape.size() == x.shape.size())
      << "scatter_elements of " << ir::shape_str(x.shape) << ", " << ir::shape_str(idx.shape)
      << ", " << ir::shape_str(upd.shape);
  const auto axis = static_cast<size_t>(n.attrs.i(ir::AttrKey::axis));
  const std::string& reduction = n.attrs.s(ir::AttrKey::reduction);
  const std::vector<int64_t> strides = ir::contiguous_strides(x.shape);
  const int64_t len = x.shape[axis];
  Value out = x;
  out.ints.clear();  // the scatter computes through doubles
  std::vector<int64_t> q;
  int64_t flat = 0;
  for_each_index(idx.shape, [&](const std::vector<int64_t>& p) {
    const auto at = static_cast<size_t>(flat++);
    int64_t j = int_at(idx, static_cast<int64_t>(at));
    if (j < 0) j += len;
    if (j < 0 || j >= len) return;  // out of range after one wrap: dropped
    q = p;
    q[axis] = j;
    double& o = out.data[static_cast<size_t>(offset_of(q, strides))];
    o = combine(reduction, n.dtype, o, upd.data[at]);
  });
  return out;
}

}  // namespace kiln::interp::reference
