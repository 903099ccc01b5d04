// Scalar evaluation of elementwise ops on literals, exact in the result dtype.
#include "passes/scalar_fold.h"

#include <cmath>
#include <cstdint>

#include "ir/scalar_semantics.h"

namespace kiln::passes {

namespace {

using ir::DType;
using ir::Op;

bool foldable(DType t) {
  return t != DType::f16 && t != DType::bf16;
}

// Wraps an integer to the dtype's width, like the two's-complement arithmetic of the targets.
double wrap_int(int64_t v, DType t) {
  switch (t) {
    case DType::i32:
      return static_cast<int32_t>(static_cast<uint32_t>(v));
    case DType::i8:
      return static_cast<int8_t>(static_cast<uint8_t>(v));
    case DType::u8:
      return static_cast<uint8_t>(v);
    case DType::boolean:
      return v != 0;
    default:
      return static_cast<double>(v);
  }
}

double round_to(double v, DType t) {
  if (t == DType::f32) return static_cast<float>(v);
  return v;
}

// Integer operands: only the ops that stay exact in int64, wrapped to the result dtype.
std::optional<double> fold_int(Op op, const std::vector<double>& x, DType result) {
  std::optional<double> v;
  switch (op) {
    case Op::Add:
    case Op::Sub:
    case Op::Mul:
    case Op::Div:
      return wrap_int(*ir::eval_int_binary(op, ir::wrap_to_int64(x[0]), ir::wrap_to_int64(x[1])),
                      result);
    case Op::Neg:
    case Op::Abs:
    case Op::Relu:
    case Op::Sign:
      v = ir::eval_float_unary(op, x[0]);
      break;
    case Op::Max:
    case Op::Min:
      v = ir::eval_float_binary(op, x[0], x[1]);
      break;
    default:
      return std::nullopt;
  }
  return wrap_int(ir::wrap_to_int64(*v), result);
}

std::optional<double> fold_float(Op op, const std::vector<double>& x, DType result) {
  std::optional<double> v =
      x.size() == 1 ? ir::eval_float_unary(op, x[0]) : ir::eval_float_binary(op, x[0], x[1]);
  if (!v) return std::nullopt;
  return round_to(*v, result);
}

std::optional<double> fold_cast(double v, DType to) {
  if (ir::is_float(to)) return round_to(v, to);
  if (to == DType::boolean) return v != 0;
  if (!std::isfinite(v)) return std::nullopt;
  double t = std::trunc(v);
  // Casting an out-of-range float to an integer differs between targets: leave it to them.
  if (std::fabs(t) >= 9.2e18) return std::nullopt;
  auto i = static_cast<int64_t>(t);
  if (wrap_int(i, to) != static_cast<double>(i)) return std::nullopt;
  return static_cast<double>(i);
}

}  // namespace

std::optional<double> fold_elementwise(Op op, DType result_dtype, DType operand_dtype,
                                       const std::vector<double>& args) {
  if (!foldable(result_dtype) || !foldable(operand_dtype)) return std::nullopt;
  if (op == Op::Where) return args[0] != 0 ? args[1] : args[2];
  if (op == Op::Cast) return fold_cast(args[0], result_dtype);
  if (op == Op::Not) return ir::eval_float_unary(op, args[0]);
  if (result_dtype == DType::boolean) {
    if (args.size() != 2) return std::nullopt;
    return ir::eval_compare(op, args[0], args[1]);
  }
  if (ir::is_float(operand_dtype)) return fold_float(op, args, result_dtype);
  return fold_int(op, args, result_dtype);
}

}  // namespace kiln::passes
