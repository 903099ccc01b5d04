// Reference semantics of the elementwise ops: math in double, integers in wrapping int64.
#include <cmath>
#include <numbers>

#include "runtime/reference_ops.h"

namespace kiln::runtime::reference {

namespace {

using ir::DType;
using ir::Op;

// Float math; also used for integer and bool operands where it is exact (neg, abs, sign,
// relu, floor, ceil, not), with the result wrapped afterwards by normalize().
double unary(Op op, double x) {
  switch (op) {
    case Op::Neg:
      return -x;
    case Op::Abs:
      return std::fabs(x);
    case Op::Exp:
      return std::exp(x);
    case Op::Log:
      return std::log(x);
    case Op::Sqrt:
      return std::sqrt(x);
    case Op::Rsqrt:
      return 1.0 / std::sqrt(x);
    case Op::Recip:
      return 1.0 / x;
    case Op::Sin:
      return std::sin(x);
    case Op::Cos:
      return std::cos(x);
    case Op::Tanh:
      return std::tanh(x);
    case Op::Sigmoid:
      return 1.0 / (1.0 + std::exp(-x));
    case Op::Relu:
      return std::isnan(x) || x > 0 ? x : 0.0;  // NaN propagates, like max(x, 0)
    case Op::Gelu: {
      const double c = std::sqrt(2.0 / std::numbers::pi);
      return 0.5 * x * (1.0 + std::tanh(c * (x + 0.044715 * x * x * x)));
    }
    case Op::Erf:
      return std::erf(x);
    case Op::Floor:
      return std::floor(x);
    case Op::Ceil:
      return std::ceil(x);
    case Op::Sign:
      return std::isnan(x) ? x : static_cast<double>((x > 0) - (x < 0));
    case Op::Not:
      return x == 0 ? 1.0 : 0.0;
    default:
      break;
  }
  KILN_CHECK(false) << "not a unary op: " << ir::op_enum_name(op);
  return 0;
}

// numpy floor_divide on integers, with x / 0 = 0 (kiln's rule) and INT64_MIN / -1 wrapping.
int64_t floor_div(int64_t a, int64_t b) {
  if (b == 0) return 0;
  if (b == -1) return static_cast<int64_t>(0 - static_cast<uint64_t>(a));
  int64_t q = a / b;
  if (a % b != 0 && ((a < 0) != (b < 0))) --q;
  return q;
}

// add, sub, mul and div on integer dtypes: exact modular arithmetic (a double product of two
// i32 values can exceed 2^53 and lose the low bits that wrap-around keeps).
double integer_arith(Op op, DType dtype, double a, double b) {
  const auto x = static_cast<uint64_t>(to_int64(a));
  const auto y = static_cast<uint64_t>(to_int64(b));
  switch (op) {
    case Op::Add:
      return wrap_integer(static_cast<int64_t>(x + y), dtype);
    case Op::Sub:
      return wrap_integer(static_cast<int64_t>(x - y), dtype);
    case Op::Mul:
      return wrap_integer(static_cast<int64_t>(x * y), dtype);
    case Op::Div:
      return wrap_integer(floor_div(static_cast<int64_t>(x), static_cast<int64_t>(y)), dtype);
    default:
      break;
  }
  KILN_CHECK(false) << "not an integer arithmetic op: " << ir::op_enum_name(op);
  return 0;
}

// max and min propagate NaN (numpy maximum/minimum).
double binary(Op op, DType operand_dtype, double a, double b) {
  const bool integer = ir::is_int(operand_dtype);
  switch (op) {
    case Op::Add:
      return integer ? integer_arith(op, operand_dtype, a, b) : a + b;
    case Op::Sub:
      return integer ? integer_arith(op, operand_dtype, a, b) : a - b;
    case Op::Mul:
      return integer ? integer_arith(op, operand_dtype, a, b) : a * b;
    case Op::Div:
      return integer ? integer_arith(op, operand_dtype, a, b) : a / b;
    case Op::Pow:
      return std::pow(a, b);
    case Op::Max:
      return std::isnan(a) || std::isnan(b) ? NAN : std::max(a, b);
    case Op::Min:
      return std::isnan(a) || std::isnan(b) ? NAN : std::min(a, b);
    case Op::Eq:
      return a == b;
    case Op::Ne:
      return a != b;
    case Op::Lt:
      return a < b;
    case Op::Le:
      return a <= b;
    case Op::Gt:
      return a > b;
    case Op::Ge:
      return a >= b;
    case Op::And:
      return a != 0 && b != 0;
    case Op::Or:
      return a != 0 || b != 0;
    default:
      break;
  }
  KILN_CHECK(false) << "not a binary op: " << ir::op_enum_name(op);
  return 0;
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
