// Reference semantics of the elementwise ops: ir/scalar_semantics.h on every element, with
// numpy broadcasting.
#include <span>

#include "interp/reference_ops.h"
#include "ir/scalar_semantics.h"

namespace kiln::interp::reference {

namespace {

using ir::DType;
using ir::Op;

// A cast to a float type rounds to it, so that cast(cast(x, f16), f32) sees f16 precision as
// every backend does; casts to integers truncate and wrap, to bool test against zero.
double cast(double x, DType to) {
  return ir::is_float(to) ? round_to_float(x, to) : normalize(x, to);
}

double apply(const ir::Node& n, const Args& args, const double* operands) {
  if (n.op == Op::Cast) return cast(operands[0], n.attrs.dt(ir::AttrKey::to));
  return ir::eval_elementwise(n.op, args[0]->dtype, std::span(operands, args.size()));
}

}  // namespace

Value eval_elementwise(const ir::Node& n, const Args& args) {
  KILN_CHECK(static_cast<int>(args.size()) == ir::op_arity(n.op))
      << ir::op_enum_name(n.op) << " with " << args.size() << " inputs";
  std::vector<std::vector<int64_t>> strides;
  for (const Value* a : args) strides.push_back(broadcast_strides(a->shape, n.shape));
  Value out = make_value(n.dtype, n.shape);
  int64_t flat = 0;
  double operands[3] = {0, 0, 0};
  for_each_index(n.shape, [&](const std::vector<int64_t>& index) {
    for (size_t i = 0; i < args.size(); ++i)
      operands[i] = args[i]->data[offset_of(index, strides[i])];
    out.data[flat++] = normalize(apply(n, args, operands), n.dtype);
  });
  return out;
}

}  // namespace kiln::interp::reference
