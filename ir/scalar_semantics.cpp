// The graph IR's elementwise semantics on scalars (see ir/scalar_semantics.h): one
// `Scalar<Op::Enum>` per elementwise row of kiln/ops.def, with `eval` over doubles and, where the
// integer meaning differs from the double one, `eval_int` over wrapping int64.
#include "ir/scalar_semantics.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numbers>

#include "kiln/error.h"

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

int64_t floor_div(int64_t a, int64_t b) {
  if (b == 0) return 0;
  // INT64_MIN / -1 overflows (and traps on x86); negation modulo 2^64 is what the targets give.
  if (b == -1) return static_cast<int64_t>(0 - static_cast<uint64_t>(a));
  int64_t q = a / b;
  if (a % b != 0 && ((a < 0) != (b < 0))) --q;
  return q;
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

int64_t float_to_int(double x, DType to) {
  if (to == DType::boolean) return x != 0 ? 1 : 0;
  if (std::isnan(x)) return 0;
  const bool wide = to == DType::i64;
  const double limit = wide ? 9223372036854775808.0 : 2147483648.0;  // 2^63, 2^31
  const int64_t hi = wide ? INT64_MAX : INT32_MAX, lo = wide ? INT64_MIN : INT32_MIN;
  const int64_t v = x >= limit ? hi : x <= -limit ? lo : static_cast<int64_t>(std::trunc(x));
  return wrap_to_dtype(v, to);
}

int64_t wrap_to_dtype(int64_t v, DType t) {
  switch (t) {
    case DType::i32: return static_cast<int32_t>(static_cast<uint32_t>(v));
    case DType::i64: return v;
    case DType::i8: return static_cast<int8_t>(static_cast<uint8_t>(v));
    case DType::u8: return static_cast<uint8_t>(v);
    case DType::boolean: return v != 0;
    case DType::f32:
    case DType::f64:
    case DType::f16:
    case DType::bf16: break;
  }
  KILN_CHECK(false) << "not an integer dtype: " << dtype_name(t);
  return v;
}

namespace {

// Unsigned arithmetic wraps without UB; a double product of two i32 values could exceed 2^53
// and lose the low bits that wrap-around keeps.
uint64_t u(int64_t v) { return static_cast<uint64_t>(v); }

// The scalar function of each elementwise row of kiln/ops.def.
template <Op>
struct Scalar;  // a row with no specialization below fails to compile in kSemantics

template <> struct Scalar<Op::Neg> { static double eval(double x) { return -x; } };
template <> struct Scalar<Op::Abs> { static double eval(double x) { return std::fabs(x); } };
template <> struct Scalar<Op::Exp> { static double eval(double x) { return std::exp(x); } };
template <> struct Scalar<Op::Log> { static double eval(double x) { return std::log(x); } };
template <> struct Scalar<Op::Sqrt> { static double eval(double x) { return std::sqrt(x); } };
template <> struct Scalar<Op::Rsqrt> {
  static double eval(double x) { return 1.0 / std::sqrt(x); }
};
template <> struct Scalar<Op::Recip> { static double eval(double x) { return 1.0 / x; } };
template <> struct Scalar<Op::Sin> { static double eval(double x) { return std::sin(x); } };
template <> struct Scalar<Op::Cos> { static double eval(double x) { return std::cos(x); } };
template <> struct Scalar<Op::Tanh> { static double eval(double x) { return std::tanh(x); } };
template <> struct Scalar<Op::Sigmoid> {
  static double eval(double x) { return 1.0 / (1.0 + std::exp(-x)); }
};
template <> struct Scalar<Op::Relu> {
  static double eval(double x) { return ieee_maximum(x, 0.0); }
};
template <> struct Scalar<Op::Gelu> {
  static double eval(double x) {  // the tanh approximation
    // Its limit at -inf, as the targets give it (-inf * 0 would be NaN).
    if (x == -std::numeric_limits<double>::infinity()) return -0.0;
    const double c = std::sqrt(2.0 / std::numbers::pi);
    return 0.5 * x * (1.0 + std::tanh(c * (x + 0.044715 * x * x * x)));
  }
};
template <> struct Scalar<Op::Erf> { static double eval(double x) { return std::erf(x); } };
template <> struct Scalar<Op::Floor> { static double eval(double x) { return std::floor(x); } };
template <> struct Scalar<Op::Ceil> { static double eval(double x) { return std::ceil(x); } };
template <> struct Scalar<Op::Sign> {
  static double eval(double x) {
    return std::isnan(x) ? x : static_cast<double>((x > 0) - (x < 0));
  }
};
template <> struct Scalar<Op::Not> { static double eval(double x) { return x == 0 ? 1.0 : 0.0; } };
template <> struct Scalar<Op::Cast> { static double eval(double x) { return x; } };
template <> struct Scalar<Op::Add> {
  static double eval(double a, double b) { return a + b; }
  static int64_t eval_int(int64_t a, int64_t b) { return static_cast<int64_t>(u(a) + u(b)); }
};
template <> struct Scalar<Op::Sub> {
  static double eval(double a, double b) { return a - b; }
  static int64_t eval_int(int64_t a, int64_t b) { return static_cast<int64_t>(u(a) - u(b)); }
};
template <> struct Scalar<Op::Mul> {
  static double eval(double a, double b) { return a * b; }
  static int64_t eval_int(int64_t a, int64_t b) { return static_cast<int64_t>(u(a) * u(b)); }
};
template <> struct Scalar<Op::Div> {
  static double eval(double a, double b) { return a / b; }
  static int64_t eval_int(int64_t a, int64_t b) { return floor_div(a, b); }
};
template <> struct Scalar<Op::Pow> {
  static double eval(double a, double b) { return std::pow(a, b); }
};
// std::fmax/fmin would drop the NaN instead.
template <> struct Scalar<Op::Max> {
  static double eval(double a, double b) { return ieee_maximum(a, b); }
};
template <> struct Scalar<Op::Min> {
  static double eval(double a, double b) { return ieee_minimum(a, b); }
};
template <> struct Scalar<Op::Eq> { static double eval(double a, double b) { return a == b; } };
template <> struct Scalar<Op::Ne> { static double eval(double a, double b) { return a != b; } };
template <> struct Scalar<Op::Lt> { static double eval(double a, double b) { return a < b; } };
template <> struct Scalar<Op::Le> { static double eval(double a, double b) { return a <= b; } };
template <> struct Scalar<Op::Gt> { static double eval(double a, double b) { return a > b; } };
template <> struct Scalar<Op::Ge> { static double eval(double a, double b) { return a >= b; } };
template <> struct Scalar<Op::And> {
  static double eval(double a, double b) { return a != 0 && b != 0; }
};
template <> struct Scalar<Op::Or> {
  static double eval(double a, double b) { return a != 0 || b != 0; }
};
template <> struct Scalar<Op::Where> {
  static double eval(double c, double a, double b) { return c != 0 ? a : b; }
};
template <> struct Scalar<Op::Clip> {
  static double eval(double x, double lo, double hi) {
    return ieee_minimum(ieee_maximum(x, lo), hi);
  }
};

struct Semantics {
  double (*unary)(double) = nullptr;
  double (*binary)(double, double) = nullptr;
  double (*ternary)(double, double, double) = nullptr;
  int64_t (*int_binary)(int64_t, int64_t) = nullptr;  // null: the double one is exact
};

template <class S>
constexpr Semantics semantics_of() {
  Semantics s;
  if constexpr (requires { S::eval(0.0); }) s.unary = &S::eval;
  if constexpr (requires { S::eval(0.0, 0.0); }) s.binary = &S::eval;
  if constexpr (requires { S::eval(0.0, 0.0, 0.0); }) s.ternary = &S::eval;
  if constexpr (requires { S::eval_int(int64_t{}, int64_t{}); }) s.int_binary = &S::eval_int;
  return s;
}

// Indexed by Op; rows of other kinds have no semantics here.
constexpr Semantics kSemantics[] = {
#define KILN_OP(...) Semantics{},
#define KILN_ELEMENTWISE(Enum, ...) semantics_of<Scalar<Op::Enum>>(),
#include "kiln/ops.def"
};

}  // namespace

std::optional<int64_t> eval_elementwise_int(Op op, std::span<const int64_t> x) {
  const Semantics& s = kSemantics[static_cast<int>(op)];
  KILN_CHECK(static_cast<int>(x.size()) == op_arity(op) && is_elementwise(op))
      << op_enum_name(op) << " with " << x.size() << " operands";
  if (x.size() == 2 && s.int_binary) return s.int_binary(x[0], x[1]);
  const auto negated = [](int64_t v) { return static_cast<int64_t>(u(0) - u(v)); };
  // (An if chain: a switch would list every float op it leaves out.)
  const int64_t a = x[0], b = x.size() > 1 ? x[1] : 0;
  if (op == Op::Neg) return negated(a);
  if (op == Op::Abs) return a < 0 ? negated(a) : a;
  if (op == Op::Sign) return (a > 0) - (a < 0);
  if (op == Op::Relu) return std::max<int64_t>(a, 0);
  if (op == Op::Floor || op == Op::Ceil) return a;
  if (op == Op::Not) return a == 0;
  if (op == Op::Max) return std::max(a, b);
  if (op == Op::Min) return std::min(a, b);
  if (op == Op::Eq) return a == b;
  if (op == Op::Ne) return a != b;
  if (op == Op::Lt) return a < b;
  if (op == Op::Le) return a <= b;
  if (op == Op::Gt) return a > b;
  if (op == Op::Ge) return a >= b;
  if (op == Op::And) return a != 0 && b != 0;
  if (op == Op::Or) return a != 0 || b != 0;
  if (op == Op::Where) return a != 0 ? b : x[2];
  if (op == Op::Clip) return std::min(std::max(a, b), x[2]);  // lo > hi gives hi
  return std::nullopt;
}

bool has_int_meaning(Op op) {
  if (!is_elementwise(op)) return false;
  const int64_t probe[3] = {0, 0, 1};  // every op with an integer meaning has a value here
  return eval_elementwise_int(op, std::span(probe, static_cast<size_t>(op_arity(op)))).has_value();
}

double eval_elementwise(Op op, DType operand_dtype, std::span<const double> x) {
  const Semantics& s = kSemantics[static_cast<int>(op)];
  KILN_CHECK(static_cast<int>(x.size()) == op_arity(op) && is_elementwise(op))
      << op_enum_name(op) << " with " << x.size() << " operands";
  if (x.size() == 1) return s.unary(x[0]);
  if (x.size() == 3) return s.ternary(x[0], x[1], x[2]);
  if (s.int_binary && is_int(operand_dtype)) {
    const int64_t v = s.int_binary(wrap_to_int64(x[0]), wrap_to_int64(x[1]));
    return static_cast<double>(wrap_to_dtype(v, operand_dtype));
  }
  return s.binary(x[0], x[1]);
}

}  // namespace kiln::ir
