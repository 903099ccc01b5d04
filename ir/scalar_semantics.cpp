// The graph IR's elementwise semantics on scalars (see ir/scalar_semantics.h).
#include "ir/scalar_semantics.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numbers>

namespace kiln::ir {

double ieee_maximum(double a, double b) {
  if (std::isnan(a) || std::isnan(b)) return std::numeric_limits<double>::quiet_NaN();
  if (a == b) return std::signbit(a) ? b : a;  // +-0: +0 unless both are -0
  return a > b ? a : b;
}

double ieee_minimum(double a, double b) {
  if (std::isnan(a) || std::isnan(b)) return std::numeric_limits<double>::quiet_NaN();
  if (a == b) return std::signbit(a) ? a : b;  // +-0: -0 unless both are +0
  return a < b ? a : b;
}

std::optional<double> eval_float_unary(Op op, double x) {
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
      return ieee_maximum(x, 0.0);
    case Op::Gelu: {
      const double c = std::sqrt(2.0 / std::numbers::pi);  // the tanh approximation
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
      return std::nullopt;
  }
}

std::optional<double> eval_float_binary(Op op, double a, double b) {
  switch (op) {
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
    // std::fmax/fmin would drop the NaN instead.
    case Op::Max:
      return ieee_maximum(a, b);
    case Op::Min:
      return ieee_minimum(a, b);
    default:
      return std::nullopt;
  }
}

std::optional<double> eval_compare(Op op, double a, double b) {
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

int64_t floor_div(int64_t a, int64_t b) {
  if (b == 0) return 0;
  // INT64_MIN / -1 overflows (and traps on x86); negation modulo 2^64 is what the targets give.
  if (b == -1) return static_cast<int64_t>(0 - static_cast<uint64_t>(a));
  int64_t q = a / b;
  if (a % b != 0 && ((a < 0) != (b < 0))) --q;
  return q;
}

std::optional<int64_t> eval_int_binary(Op op, int64_t a, int64_t b) {
  // Unsigned arithmetic wraps without UB; a double product of two i32 values could exceed 2^53
  // and lose the low bits that wrap-around keeps.
  const auto x = static_cast<uint64_t>(a);
  const auto y = static_cast<uint64_t>(b);
  switch (op) {
    case Op::Add:
      return static_cast<int64_t>(x + y);
    case Op::Sub:
      return static_cast<int64_t>(x - y);
    case Op::Mul:
      return static_cast<int64_t>(x * y);
    case Op::Div:
      return floor_div(a, b);
    default:
      return std::nullopt;
  }
}

int64_t wrap_to_int64(double v) {
  if (!std::isfinite(v)) return 0;
  const double t = std::trunc(v);
  constexpr double k2p63 = 9223372036854775808.0;
  if (t >= -k2p63 && t < k2p63) return static_cast<int64_t>(t);
  constexpr double k2p64 = 18446744073709551616.0;
  double m = std::fmod(t, k2p64);  // exact; |t| >= 2^63 so m is a multiple of 2^11
  if (m < 0) m += k2p64;           // exact for the same reason
  return static_cast<int64_t>(static_cast<uint64_t>(m));
}

}  // namespace kiln::ir
