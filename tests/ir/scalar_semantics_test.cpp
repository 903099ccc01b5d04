// The scalar elementwise semantics shared by the reference interpreter and literal folding.
#include "ir/scalar_semantics.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

namespace kiln::ir {
namespace {

constexpr int64_t kMin64 = std::numeric_limits<int64_t>::min();
constexpr int64_t kMax64 = std::numeric_limits<int64_t>::max();

double unary(Op op, double x) {
  std::optional<double> v = eval_float_unary(op, x);
  EXPECT_TRUE(v.has_value()) << op_enum_name(op);
  return v.value_or(-12345);
}

double binary(Op op, double a, double b) {
  std::optional<double> v = eval_float_binary(op, a, b);
  EXPECT_TRUE(v.has_value()) << op_enum_name(op);
  return v.value_or(-12345);
}

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

TEST(ScalarSemantics, EachFamilyRejectsOtherOps) {
  EXPECT_FALSE(eval_float_unary(Op::Add, 1.0).has_value());
  EXPECT_FALSE(eval_float_unary(Op::Cast, 1.0).has_value());
  EXPECT_FALSE(eval_float_binary(Op::Eq, 1.0, 1.0).has_value());
  EXPECT_FALSE(eval_compare(Op::Add, 1.0, 1.0).has_value());
  EXPECT_FALSE(eval_int_binary(Op::Max, 1, 2).has_value());
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

TEST(ScalarSemantics, IntegerArithmeticWrapsModulo2To64) {
  EXPECT_EQ(eval_int_binary(Op::Add, kMax64, 1), kMin64);
  EXPECT_EQ(eval_int_binary(Op::Sub, kMin64, 1), kMax64);
  EXPECT_EQ(eval_int_binary(Op::Mul, int64_t{1} << 62, 4), 0);
  // 3037000500^2 = 9223372037000250000 = 2^63 + 145474192: beyond int64, exact after wrapping.
  EXPECT_EQ(eval_int_binary(Op::Mul, 3037000500, 3037000500), kMin64 + 145474192);
  EXPECT_EQ(eval_int_binary(Op::Div, -7, 2), -4);
  EXPECT_EQ(eval_int_binary(Op::Div, 9, 0), 0);
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
