// The scalar elementwise semantics shared by the reference interpreter and literal folding.
#include "ir/scalar_semantics.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <span>

namespace kiln::ir {
namespace {

constexpr int64_t kMin64 = std::numeric_limits<int64_t>::min();
constexpr int64_t kMax64 = std::numeric_limits<int64_t>::max();

double unary(Op op, double x) {
  const double args[] = {x};
  return eval_elementwise(op, DType::f64, args);
}

double binary(Op op, double a, double b, DType t = DType::f64) {
  const double args[] = {a, b};
  return eval_elementwise(op, t, args);
}

double eval_compare(Op op, double a, double b) { return binary(op, a, b); }

TEST(ScalarSemantics, UnaryHandCheckedValues) {
  EXPECT_EQ(unary(Op::Neg, 2.5), -2.5);
  EXPECT_EQ(unary(Op::Abs, -3.0), 3.0);
  EXPECT_EQ(unary(Op::Rsqrt, 4.0), 0.5);
  EXPECT_EQ(unary(Op::Recip, -8.0), -0.125);
  EXPECT_EQ(unary(Op::Sigmoid, 0.0), 0.5);
  EXPECT_DOUBLE_EQ(unary(Op::Sigmoid, std::log(3.0)), 0.75);  // 1 / (1 + 1/3)
  EXPECT_EQ(unary(Op::Relu, -2.0), 0.0);
  EXPECT_EQ(unary(Op::Relu, 1.5), 1.5);
  EXPECT_EQ(unary(Op::Gelu, 0.0), 0.0);
  // tanh form: 0.5 * 1 * (1 + tanh(sqrt(2/pi) * 1.044715)) = 0.841191990...
  EXPECT_NEAR(unary(Op::Gelu, 1.0), 0.8411919906, 1e-9);
  EXPECT_NEAR(unary(Op::Erf, 0.5), 0.5204998778, 1e-9);
  EXPECT_EQ(unary(Op::Floor, -1.5), -2.0);
  EXPECT_EQ(unary(Op::Ceil, -1.5), -1.0);
  EXPECT_EQ(unary(Op::Sign, -7.0), -1.0);
  EXPECT_EQ(unary(Op::Sign, 0.0), 0.0);
  EXPECT_EQ(unary(Op::Not, 0.0), 1.0);
  EXPECT_EQ(unary(Op::Not, -3.0), 0.0);
}

TEST(ScalarSemantics, ReluAndSignPropagateNaN) {
  EXPECT_TRUE(std::isnan(unary(Op::Relu, NAN)));
  EXPECT_TRUE(std::isnan(unary(Op::Sign, NAN)));
}

TEST(ScalarSemantics, BinaryHandCheckedValues) {
  EXPECT_EQ(binary(Op::Add, 1.5, 2.25), 3.75);
  EXPECT_EQ(binary(Op::Sub, 1.5, 2.25), -0.75);
  EXPECT_EQ(binary(Op::Mul, -1.5, 4.0), -6.0);
  EXPECT_EQ(binary(Op::Div, 7.0, 2.0), 3.5);  // float div is true division
  EXPECT_EQ(binary(Op::Pow, 2.0, 10.0), 1024.0);
  EXPECT_EQ(binary(Op::Max, -1.0, 2.0), 2.0);
  EXPECT_EQ(binary(Op::Min, -1.0, 2.0), -1.0);
}

TEST(ScalarSemantics, MaxMinPropagateNaNFromEitherSide) {
  EXPECT_TRUE(std::isnan(binary(Op::Max, NAN, 1.0)));
  EXPECT_TRUE(std::isnan(binary(Op::Max, 1.0, NAN)));
  EXPECT_TRUE(std::isnan(binary(Op::Min, NAN, 1.0)));
  EXPECT_TRUE(std::isnan(binary(Op::Min, 1.0, NAN)));
}

TEST(ScalarSemantics, ComparisonsAndLogicGiveZeroOrOne) {
  EXPECT_EQ(eval_compare(Op::Lt, 1.0, 2.0), 1.0);
  EXPECT_EQ(eval_compare(Op::Ge, 1.0, 2.0), 0.0);
  EXPECT_EQ(eval_compare(Op::Ne, NAN, NAN), 1.0);
  EXPECT_EQ(eval_compare(Op::Eq, NAN, NAN), 0.0);
  EXPECT_EQ(eval_compare(Op::And, NAN, 2.0), 1.0);  // NaN is true, as in C
  EXPECT_EQ(eval_compare(Op::Or, 0.0, 0.0), 0.0);
}

// Every elementwise row of kiln/ops.def evaluates its arity of operands (a row without scalar
// semantics does not compile, so this checks the table's arities against the functions).
TEST(ScalarSemantics, EveryElementwiseRowEvaluates) {
  int rows = 0;
  for (int i = 0; i < kOpCount; ++i) {
    const Op op = static_cast<Op>(i);
    if (!is_elementwise(op)) continue;
    const double args[] = {1.0, 1.0, 1.0};
    const double v = eval_elementwise(op, DType::f32, std::span(args, op_arity(op)));
    EXPECT_FALSE(std::isnan(v)) << op_enum_name(op);
    ++rows;
  }
  EXPECT_EQ(rows, 36);
  const double where_args[] = {0.0, 2.0, 3.0};
  EXPECT_EQ(eval_elementwise(Op::Where, DType::boolean, where_args), 3.0);
  const double clip_args[][3] = {{5, 1, 3}, {-5, 1, 3}, {2, 1, 3}, {2, 3, 1}, {NAN, 1, 3}, {2, NAN, 3}};
  const double clip_want[] = {3, 1, 2, 1, NAN, NAN};
  for (int k = 0; k < 6; ++k) {
    const double v = eval_elementwise(Op::Clip, DType::f32, clip_args[k]);
    if (std::isnan(clip_want[k])) {
      EXPECT_TRUE(std::isnan(v)) << k;
    } else {
      EXPECT_EQ(v, clip_want[k]) << k;
    }
  }
  EXPECT_EQ(unary(Op::Cast, 2.75), 2.75);  // converting is the caller's
}

TEST(ScalarSemantics, FloorDivisionRoundsTowardMinusInfinity) {
  EXPECT_EQ(floor_div(7, 2), 3);
  EXPECT_EQ(floor_div(-7, 2), -4);
  EXPECT_EQ(floor_div(7, -2), -4);
  EXPECT_EQ(floor_div(-7, -2), 3);
  EXPECT_EQ(floor_div(-6, 2), -3);  // exact: no adjustment
  EXPECT_EQ(floor_div(5, 0), 0);
  EXPECT_EQ(floor_div(-5, 0), 0);
  EXPECT_EQ(floor_div(kMin64, -1), kMin64);  // wraps instead of trapping
}

// add sub mul div on integers are exact modulo 2^64, then wrapped to the operand dtype; the
// other ops on integers are exact in double.
TEST(ScalarSemantics, IntegerArithmeticWrapsToTheDtype) {
  EXPECT_EQ(binary(Op::Add, 2147483647, 1, DType::i32), -2147483648.0);
  EXPECT_EQ(binary(Op::Add, 100, 100, DType::i8), -56);
  EXPECT_EQ(binary(Op::Sub, 3, 5, DType::u8), 254);
  EXPECT_EQ(binary(Op::Mul, 65536, 65536, DType::i32), 0);
  // 2147483647^2 = 4611686014132420609 is past 2^53: in double its low bit is lost (the i32
  // would wrap to 0), modulo 2^64 it wraps to 1.
  EXPECT_EQ(binary(Op::Mul, 2147483647, 2147483647, DType::i32), 1);
  EXPECT_EQ(binary(Op::Div, -7, 2, DType::i32), -4);
  EXPECT_EQ(binary(Op::Div, 7, 2, DType::f32), 3.5);
  EXPECT_EQ(binary(Op::Div, 9, 0, DType::i64), 0);
  EXPECT_EQ(binary(Op::Div, -2147483648.0, -1, DType::i32), -2147483648.0);  // wraps, no trap
  EXPECT_EQ(binary(Op::Max, -3, 2, DType::i8), 2);
}

TEST(ScalarSemantics, WrapToDtype) {
  EXPECT_EQ(wrap_to_dtype(kMax64, DType::i64), kMax64);
  EXPECT_EQ(wrap_to_dtype(int64_t{1} << 32 | 7, DType::i32), 7);
  EXPECT_EQ(wrap_to_dtype(-1, DType::u8), 255);
  EXPECT_EQ(wrap_to_dtype(128, DType::i8), -128);
  EXPECT_EQ(wrap_to_dtype(-5, DType::boolean), 1);
  EXPECT_EQ(wrap_to_dtype(0, DType::boolean), 0);
}

TEST(ScalarSemantics, WrapToInt64TruncatesAndWraps) {
  EXPECT_EQ(wrap_to_int64(-1.5), -1);
  EXPECT_EQ(wrap_to_int64(2.9), 2);
  EXPECT_EQ(wrap_to_int64(-0.5), 0);
  // 2^64 + 5 is not a double: it rounds to 2^64, which wraps to 0.
  EXPECT_EQ(wrap_to_int64(18446744073709551616.0 + 5.0), 0);
  EXPECT_EQ(wrap_to_int64(18446744073709551616.0 + 4096.0), 4096);  // the next double up
  EXPECT_EQ(wrap_to_int64(9223372036854775808.0), kMin64);          // 2^63
  EXPECT_EQ(wrap_to_int64(-9223372036854775808.0), kMin64);         // -2^63 fits
  EXPECT_EQ(wrap_to_int64(-18446744073709551616.0 - 4096.0), -4096);
  EXPECT_EQ(wrap_to_int64(NAN), 0);
  EXPECT_EQ(wrap_to_int64(INFINITY), 0);
  EXPECT_EQ(wrap_to_int64(-INFINITY), 0);
}

}  // namespace
}  // namespace kiln::ir
