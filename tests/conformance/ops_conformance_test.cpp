// Conformance: every op of kiln/ops.def, in every dtype the builder allows, on cpu vs reference.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include "harness.h"

namespace kiln::testing {
namespace {

using ir::DType;
using ir::Op;

constexpr Op kUnary[] = {Op::Neg,  Op::Abs,     Op::Exp,  Op::Log,  Op::Sqrt, Op::Rsqrt,
                         Op::Recip, Op::Sin,    Op::Cos,  Op::Tanh, Op::Sigmoid, Op::Relu,
                         Op::Gelu, Op::Erf,     Op::Floor, Op::Ceil, Op::Sign, Op::Not};
constexpr Op kBinary[] = {Op::Add, Op::Sub, Op::Mul, Op::Div, Op::Pow, Op::Max, Op::Min, Op::Eq,
                          Op::Ne,  Op::Lt,  Op::Le,  Op::Gt,  Op::Ge,  Op::And, Op::Or};

std::string name_of(Op op, DType t) {
  return fmt::format("{}:{}", ir::op_enum_name(op), ir::dtype_name(t));
}

bool needs_positive(Op op) { return op == Op::Log || op == Op::Sqrt || op == Op::Rsqrt; }

TEST(OpsConformance, UnaryEveryAllowedDtype) {
  for (Op op : kUnary) {
    int allowed = 0;
    for (DType t : ir::kAllDTypes) {
      Case c;
      const ir::Node* x = c.input(t, {3, 17}, needs_positive(op), op == Op::Exp ? 3.0 : 2.0);
      auto y = c.b.unary(op, x);
      if (!y) continue;  // this dtype is not allowed for the op (ir/builder.h)
      ++allowed;
      expect_matches_reference(c, {*y}, name_of(op, t));
    }
    EXPECT_GT(allowed, 0) << ir::op_enum_name(op) << " allows no dtype";
  }
}

TEST(OpsConformance, BinaryEveryAllowedDtypeWithBroadcast) {
  for (Op op : kBinary) {
    int allowed = 0;
    for (DType t : ir::kAllDTypes) {
      Case c;
      bool pos_a = op == Op::Pow, pos_b = op == Op::Div && ir::is_float(t);
      const ir::Node* a = c.input(t, {3, 17}, pos_a);
      const ir::Node* b = c.input(t, {17}, pos_b);  // integer division by zero is defined: 0
      auto y = c.b.binary(op, a, b);
      if (!y) continue;
      ++allowed;
      expect_matches_reference(c, {*y}, name_of(op, t));
      auto y2 = c.b.binary(op, b, a);  // broadcast on the other side
      ASSERT_TRUE(y2.has_value());
      expect_matches_reference(c, {*y2}, name_of(op, t) + " swapped");
    }
    EXPECT_GT(allowed, 0) << ir::op_enum_name(op) << " allows no dtype";
  }
}

TEST(OpsConformance, WhereEveryDtype) {
  for (DType t : ir::kAllDTypes) {
    Case c;
    auto y = c.b.where(c.input(DType::boolean, {3, 1}), c.input(t, {3, 17}), c.input(t, {17}));
    ASSERT_TRUE(y.has_value()) << y.error().message;
    expect_matches_reference(c, {*y}, fmt::format("where:{}", ir::dtype_name(t)));
  }
}

// The clip row: three operands broadcast against each other; random bounds cross (lo > hi gives
// hi) on about half the elements.
TEST(OpsConformance, ClipEveryNumericDtypeWithBroadcast) {
  int allowed = 0;
  for (DType t : ir::kAllDTypes) {
    Case c;
    auto y = c.b.clip(c.input(t, {3, 17}), c.input(t, {3, 1}), c.input(t, {17}));
    if (!y) continue;  // bool
    ASSERT_EQ((*y)->op, Op::Clip);
    ++allowed;
    expect_matches_reference(c, {*y}, fmt::format("clip:{}", ir::dtype_name(t)));
  }
  EXPECT_EQ(allowed, 8);
}

TEST(OpsConformance, CastEveryPair) {
  for (DType from : ir::kAllDTypes) {
    for (DType to : ir::kAllDTypes) {
      Case c;
      // |x| < 100 keeps float -> narrow-int casts inside the range every dtype can represent
      // after wrap-around; negative values exercise truncation toward zero.
      auto y = c.b.cast(c.input(from, {5, 13}, false, 20.0), to);
      ASSERT_TRUE(y.has_value()) << y.error().message;
      expect_matches_reference(
          c, {*y}, fmt::format("cast {}->{}", ir::dtype_name(from), ir::dtype_name(to)));
    }
  }
}

TEST(OpsConformance, Reductions) {
  const std::vector<std::optional<std::vector<int64_t>>> axes_cases = {
      std::vector<int64_t>{0}, std::vector<int64_t>{1}, std::vector<int64_t>{2},
      std::vector<int64_t>{0, 2}, std::vector<int64_t>{-1}, std::nullopt};
  for (Op op : {Op::Sum, Op::ReduceMax, Op::ReduceMin, Op::Prod}) {
    for (DType t : ir::kAllDTypes) {
      for (const auto& axes : axes_cases) {
        for (bool keepdim : {false, true}) {
          // Integer products over many elements overflow; the reference and cpu agree on
          // wrap-around only per step, so keep integer products short.
          if (op == Op::Prod && !ir::is_float(t) && (!axes || axes->size() > 1 || (*axes)[0] != 0))
            continue;
          Case c;
          auto y = c.b.reduce(op, c.input(t, {4, 5, 6}, op == Op::Prod, 1.0), axes, keepdim);
          if (!y) continue;
          expect_matches_reference(
              c, {*y}, fmt::format("{} axes {} keepdim {}", name_of(op, t),
                                   axes ? ir::shape_str(*axes) : "all", keepdim));
        }
      }
    }
  }
}

TEST(OpsConformance, MeanFloat) {
  for (DType t : {DType::f32, DType::f64, DType::f16, DType::bf16}) {
    Case c;
    auto y = c.b.mean(c.input(t, {4, 5, 6}), std::vector<int64_t>{1, 2}, true);
    ASSERT_TRUE(y.has_value()) << y.error().message;
    expect_matches_reference(c, {*y}, "mean");
  }
}

TEST(OpsConformance, ArgMaxArgMinFirstIndexOnTies) {
  for (Op op : {Op::ArgMax, Op::ArgMin}) {
    for (DType t : {DType::f32, DType::f64, DType::f16, DType::bf16, DType::i32, DType::i8,
                    DType::u8}) {
      for (int64_t axis : {0, 1, 2, -1}) {
        for (bool keepdim : {false, true}) {
          Case c;  // integer inputs in [-8, 8] have many ties
          auto y = c.b.arg_reduce(op, c.input(t, {4, 5, 6}), axis, keepdim);
          ASSERT_TRUE(y.has_value()) << y.error().message;
          expect_matches_reference(c, {*y}, fmt::format("{} axis {}", name_of(op, t), axis));
        }
      }
    }
  }
}

TEST(OpsConformance, SourcesFullArange) {
  for (DType t : {DType::f32, DType::f64, DType::i32, DType::i64, DType::boolean}) {
    Case c;
    auto f = c.b.full({2, 3}, 1.0, t);
    ASSERT_TRUE(f.has_value());
    expect_matches_reference(c, {*f}, fmt::format("full:{}", ir::dtype_name(t)));
  }
  for (DType t : {DType::i32, DType::i64, DType::f32, DType::f64}) {
    Case c;
    auto a = c.b.arange(2, 20, 3, t);
    auto d = c.b.arange(10, -5, -4, t);
    ASSERT_TRUE(a.has_value() && d.has_value());
    expect_matches_reference(c, {*a, *d}, fmt::format("arange:{}", ir::dtype_name(t)));
  }
}

}  // namespace
}  // namespace kiln::testing
