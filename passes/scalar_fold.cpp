// Scalar evaluation of elementwise ops on literals, exact in the result dtype.
#include "passes/scalar_fold.h"

#include <cmath>
#include <cstdint>
#include <limits>

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

std::optional<double> fold_float(Op op, const std::vector<double>& x) {
  double a = x[0], b = x.size() > 1 ? x[1] : 0;
  switch (op) {
    case Op::Neg:
      return -a;
    case Op::Abs:
      return std::fabs(a);
    case Op::Exp:
      return std::exp(a);
    case Op::Log:
      return std::log(a);
    case Op::Sqrt:
      return std::sqrt(a);
    case Op::Rsqrt:
      return 1 / std::sqrt(a);
    case Op::Recip:
      return 1 / a;
    case Op::Sin:
      return std::sin(a);
    case Op::Cos:
      return std::cos(a);
    case Op::Tanh:
      return std::tanh(a);
    case Op::Sigmoid:
      return 1 / (1 + std::exp(-a));
    case Op::Relu:
      return std::isnan(a) ? a : (a > 0 ? a : 0.0);
    case Op::Gelu: {
      const double k = std::sqrt(2 / M_PI);
      return 0.5 * a * (1 + std::tanh(k * (a + 0.044715 * a * a * a)));
    }
    case Op::Erf:
      return std::erf(a);
    case Op::Floor:
      return std::floor(a);
    case Op::Ceil:
      return std::ceil(a);
    case Op::Sign:
      return std::isnan(a) ? a : (a > 0) - (a < 0);
    case Op::Add:
      return a + b;
    case Op::Sub:
      return a - b;
    case Op::Mul:
      return a * b;
    case Op::Div:
      return a / b;
    case Op::Pow:
      return std::pow(a, b);
    case Op::Max:
      return std::isnan(a) || std::isnan(b) ? NAN : std::fmax(a, b);
    case Op::Min:
      return std::isnan(a) || std::isnan(b) ? NAN : std::fmin(a, b);
    default:
      return std::nullopt;
  }
}

int64_t floor_div(int64_t a, int64_t b) {
  if (b == 0) return 0;
  int64_t q = a / b;
  return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}

std::optional<double> fold_int(Op op, const std::vector<double>& x) {
  auto a = static_cast<int64_t>(x[0]);
  int64_t b = x.size() > 1 ? static_cast<int64_t>(x[1]) : 0;
  auto ua = static_cast<uint64_t>(a), ub = static_cast<uint64_t>(b);
  switch (op) {
    case Op::Neg:
      return static_cast<double>(static_cast<int64_t>(0 - ua));
    case Op::Abs:
      return static_cast<double>(a < 0 ? static_cast<int64_t>(0 - ua) : a);
    case Op::Relu:
      return static_cast<double>(a > 0 ? a : 0);
    case Op::Sign:
      return static_cast<double>((a > 0) - (a < 0));
    case Op::Add:
      return static_cast<double>(static_cast<int64_t>(ua + ub));
    case Op::Sub:
      return static_cast<double>(static_cast<int64_t>(ua - ub));
    case Op::Mul:
      return static_cast<double>(static_cast<int64_t>(ua * ub));
    case Op::Div:
      return static_cast<double>(floor_div(a, b));
    case Op::Max:
      return static_cast<double>(a > b ? a : b);
    case Op::Min:
      return static_cast<double>(a < b ? a : b);
    default:
      return std::nullopt;
  }
}

std::optional<double> fold_compare(Op op, double a, double b) {
  switch (op) {
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
      return std::nullopt;
  }
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
  if (op == Op::Not) return args[0] == 0;
  if (result_dtype == DType::boolean) return fold_compare(op, args[0], args[1]);
  if (ir::is_float(operand_dtype)) {
    std::optional<double> v = fold_float(op, args);
    if (!v) return std::nullopt;
    return round_to(*v, result_dtype);
  }
  std::optional<double> v = fold_int(op, args);
  if (!v) return std::nullopt;
  return wrap_int(static_cast<int64_t>(*v), result_dtype);
}

}  // namespace kiln::passes
