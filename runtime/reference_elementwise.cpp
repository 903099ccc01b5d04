// Reference semantics of the elementwise ops: math in double, integers in wrapping int64.
#include <optional>

#include "ir/scalar_semantics.h"
#include "runtime/reference_ops.h"

namespace kiln::runtime::reference {

namespace {

using ir::DType;
using ir::Op;

// Float math; also used for integer and bool operands where it is exact (neg, abs, sign,
// relu, floor, ceil, not), with the result wrapped afterwards by normalize().
double unary(Op op, double x) {
  std::optional<double> v = ir::eval_float_unary(op, x);
  KILN_CHECK(v) << "not a unary op: " << ir::op_enum_name(op);
  return *v;
}

// add, sub, mul and div on integer dtypes are exact modular arithmetic (a double product of two
// i32 values can exceed 2^53 and lose the low bits that wrap-around keeps).
double binary(Op op, DType operand_dtype, double a, double b) {
  if (ir::is_int(operand_dtype)) {
    if (std::optional<int64_t> v = ir::eval_int_binary(op, to_int64(a), to_int64(b)))
      return wrap_integer(*v, operand_dtype);
  }
  std::optional<double> v = ir::eval_float_binary(op, a, b);
  if (!v) v = ir::eval_compare(op, a, b);
  KILN_CHECK(v) << "not a binary op: " << ir::op_enum_name(op);
  return *v;
}

// A cast to a float type rounds to it, so that cast(cast(x, f16), f32) sees f16 precision as
// every backend does; casts to integers truncate and wrap, to bool test against zero.
double cast(double x, DType to) {
  return ir::is_float(to) ? round_to_float(x, to) : normalize(x, to);
}

double apply(const ir::Node& n, const Args& args, const double* operands) {
  switch (n.op) {
    case Op::Cast:
      return cast(operands[0], n.attrs.dt(ir::AttrKey::to));
    case Op::Where:
      return operands[0] != 0 ? operands[1] : operands[2];
    default:
      break;
  }
  if (args.size() == 1) return unary(n.op, operands[0]);
  return binary(n.op, args[0]->dtype, operands[0], operands[1]);
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

}  // namespace kiln::runtime::reference
