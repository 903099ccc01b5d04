// The C++ API's elementwise functions, generated from the op table (kiln/ops.def's `api` column):
// each computes its own row's op. Run on the reference device against ir::eval_elementwise, on
// inputs where every op of one arity gives a different answer.
#include <gtest/gtest.h>

#include <cmath>
#include <kiln/kiln.h>
#include <span>
#include <string>
#include <vector>

#include "ir/scalar_semantics.h"

namespace {

using kiln::Tensor;
using kiln::ir::Op;

kiln::Device reference() {
  static kiln::Device dev = kiln::Device::open("reference").value();
  return dev;
}

const std::vector<double> kA = {0.75, -1.5, 2.5, 1.0};
const std::vector<double> kB = {2.5, -1.5, 0.75, 3.0};
const std::vector<double> kC = {1.0, 0.0, 2.0, -2.0};
const std::vector<double> kCond = {1, 0, 1, 0};

// The row's operands: bools for logic, f64 otherwise (where: a bool condition, then f64).
Tensor operand(Op op, int i) {
  const std::vector<double>& v = i == 0 ? kA : i == 1 ? kB : kC;
  const kiln::ir::OpDtypes d = kiln::ir::op_dtypes(op);
  if (d == kiln::ir::OpDtypes::Bool) {
    std::vector<bool> b;
    for (double x : i == 0 ? kCond : std::vector<double>{1, 1, 0, 0}) b.push_back(x != 0);
    return Tensor::from_host_bool(reference(), b, {4});
  }
  return Tensor::from_host(reference(), std::span<const double>(v), {4});
}

std::vector<double> operand_values(Op op, int i) {
  if (kiln::ir::op_dtypes(op) == kiln::ir::OpDtypes::Bool)
    return i == 0 ? kCond : std::vector<double>{1, 1, 0, 0};
  return i == 0 ? kA : i == 1 ? kB : kC;
}

void expect_row(Op op, const Tensor& got, int arity) {
  auto out = got.cast(kiln::DType::f64).to_vector<double>();
  ASSERT_TRUE(out.has_value()) << kiln::ir::op_enum_name(op) << ": " << out.error().message;
  const bool logic = kiln::ir::op_dtypes(op) == kiln::ir::OpDtypes::Bool;
  // The first operand's dtype (where: its condition).
  const kiln::DType first = logic || op == Op::Where ? kiln::DType::boolean : kiln::DType::f64;
  for (size_t j = 0; j < 4; ++j) {
    std::vector<double> args;
    if (op == Op::Where) {
      args = {kCond[j], kA[j], kB[j]};
    } else {
      for (int i = 0; i < arity; ++i) args.push_back(operand_values(op, i)[j]);
    }
    const double want = kiln::ir::eval_elementwise(op, first, args);
    if (std::isnan(want)) {
      EXPECT_TRUE(std::isnan((*out)[j])) << kiln::ir::op_enum_name(op) << " at " << j;
    } else {
      EXPECT_EQ((*out)[j], want) << kiln::ir::op_enum_name(op) << " at " << j;
    }
  }
}

TEST(ApiTable, EachElementwiseFunctionComputesItsRow) {
  int checked = 0;
#define KILN_API_unary(fn) \
  expect_row(op, kiln::fn(operand(op, 0)), 1), ++checked;
#define KILN_API_binary(fn) \
  expect_row(op, kiln::fn(operand(op, 0), operand(op, 1)), 2), ++checked;
#define KILN_API_ternary(fn)                                                        \
  expect_row(op, kiln::fn(Tensor::from_host_bool(reference(), {true, false, true, false}, {4}), \
                          operand(op, 0), operand(op, 1)),                          \
             3),                                                                    \
      ++checked;
#define KILN_API_member(fn) (void)op;  // Tensor::cast, tested with the other casts
#define KILN_API_manual(fn) /* clip: its three-tensor form */ \
  expect_row(op, kiln::fn(operand(op, 0), operand(op, 1), operand(op, 2)), 3), ++checked;
#define KILN_ELEMENTWISE(Enum, name, arity, dtypes, cost, api) \
  {                                                            \
    const Op op = Op::Enum;                                    \
    KILN_API_##api                                             \
  }
#include "kiln/ops.def"
#undef KILN_API_unary
#undef KILN_API_binary
#undef KILN_API_ternary
#undef KILN_API_member
#undef KILN_API_manual
  EXPECT_EQ(checked, 35);  // every elementwise row but cast
}

// The inputs tell the rows of one arity apart, so a function wired to another row fails above.
TEST(ApiTable, InputsSeparateTheOps) {
  for (int arity : {1, 2, 3}) {
    std::vector<std::vector<double>> seen;
    for (int i = 0; i < kiln::ir::kOpCount; ++i) {
      const Op op = static_cast<Op>(i);
      if (!kiln::ir::is_elementwise(op) || kiln::ir::op_arity(op) != arity || op == Op::Cast)
        continue;
      std::vector<double> r;
      for (size_t j = 0; j < 4; ++j) {
        std::vector<double> args;
        for (int k = 0; k < arity; ++k) args.push_back(operand_values(op, k)[j]);
        const double v = kiln::ir::eval_elementwise(op, kiln::DType::f64, args);
        r.push_back(std::isnan(v) ? -999 : v);
      }
      for (const auto& s : seen) EXPECT_NE(s, r) << kiln::ir::op_enum_name(op);
      seen.push_back(r);
    }
  }
}

}  // namespace
