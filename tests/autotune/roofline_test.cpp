// The roofline bound: bytes and flops of hand-built kernels, counted by hand.
#include <gtest/gtest.h>

#include "autotune/roofline.h"
#include "ir/kernel_sizes.h"
#include "tests/autotune/tune_test_kernels.h"

namespace kiln::autotune {
namespace {

TEST(Roofline, ElementwiseWork) {
  // 3 f32 buffers of 4x8; per point: mul, exp, add (the index arithmetic is free).
  const KernelWork w = kernel_work(testing::elementwise_kernel(4, 8));
  EXPECT_DOUBLE_EQ(w.bytes, 3 * 32 * 4);
  EXPECT_DOUBLE_EQ(w.flops, 3 * 32);
}

TEST(Roofline, ReductionsMultiplyByTheirExtents) {
  // 4 rows of 10: one mul and one reduction step per element.
  const KernelWork rows = kernel_work(testing::row_reduce_kernel(4, 10));
  EXPECT_DOUBLE_EQ(rows.bytes, (40 + 4) * 4);
  EXPECT_DOUBLE_EQ(rows.flops, 80);
  // 2x3 outputs over k = 5: 30 muls, 30 steps, 6 epilogue adds.
  const KernelWork mm = kernel_work(testing::matmul_kernel(2, 3, 5));
  EXPECT_DOUBLE_EQ(mm.bytes, (10 + 15 + 6) * 4);
  EXPECT_DOUBLE_EQ(mm.flops, 66);
}

// A kernel with run-time sizes keeps one instance's extents in its text; a symbolic plan's
// instance changes its sizes (Kernel::sizes, the domain, the shapes), not its text, and its work
// is that instance's: a row sum of 30 is counted 30 steps a row, not the 10 the text keeps.
TEST(Roofline, ARunTimeReductionExtentCountsAtTheInstancesSize) {
  const std::optional<kir::Kernel> general =
      kir::generalize(testing::row_reduce_kernel(4, 10), testing::row_reduce_kernel(4, 20));
  ASSERT_TRUE(general.has_value());
  ASSERT_TRUE(general->has_sizes());
  const std::optional<kir::Kernel> at30 =
      kir::match_sizes(*general, testing::row_reduce_kernel(4, 30));
  ASSERT_TRUE(at30.has_value());
  kir::Kernel instance = *general;  // what instantiate_plan makes: the text of the first size
  instance.sizes = at30->sizes;
  instance.domain = at30->domain;
  for (size_t p = 0; p < instance.params.size(); ++p)
    instance.params[p].shape = at30->params[p].shape;
  const KernelWork want = kernel_work(testing::row_reduce_kernel(4, 30));
  EXPECT_DOUBLE_EQ(want.flops, 240);
  EXPECT_DOUBLE_EQ(kernel_work(instance).flops, want.flops);
  EXPECT_DOUBLE_EQ(kernel_work(instance).bytes, want.bytes);
}

// Softmax's shape: a row reduction read at every point of a [4, 10] domain is computed once per
// row (backends hoist it), so it costs 4 x 10 steps, not 4 x 10 x 10.
TEST(Roofline, RowReductionsReadPerPointAreCountedOncePerRow) {
  kir::Kernel k;
  k.arena = std::make_shared<kir::ExprArena>();
  kir::ExprArena& a = *k.arena;
  k.params = {{ir::DType::f32, {4, 10}, false, "x"}, {ir::DType::f32, {4, 10}, true, "y"}};
  k.domain = {4, 10};
  const kir::Expr* row = a.alu(kir::Alu::Mul, ir::DType::i64, {a.var(0), a.index(10)});
  const kir::Expr* at = a.alu(kir::Alu::Add, ir::DType::i64, {row, a.var(1)});
  const kir::Expr* along = a.alu(kir::Alu::Add, ir::DType::i64, {row, a.var(2)});
  const kir::Expr* max = a.reduce(kir::ReduceOp::Max, ir::DType::f32,
                                  a.load(0, ir::DType::f32, along), {2}, {10});
  k.stores = {{1, at, a.alu(kir::Alu::Sub, ir::DType::f32, {a.load(0, ir::DType::f32, at), max})}};
  EXPECT_DOUBLE_EQ(kernel_work(k).flops, 4 * 10 + 40);  // reduction steps + one sub per point
}

// Softmax's denominator: a row sum over v3 of exp(x - rowmax), where the row max (over v2) does
// not read v3: it is counted once per row, not once per step of the sum that reads it.
TEST(Roofline, AReductionInsideAnotherIsCountedPerPointOfWhatItReads) {
  kir::Kernel k;
  k.arena = std::make_shared<kir::ExprArena>();
  kir::ExprArena& a = *k.arena;
  k.params = {{ir::DType::f32, {4, 10}, false, "x"}, {ir::DType::f32, {4}, true, "y"}};
  k.domain = {4};
  const kir::Expr* row = a.alu(kir::Alu::Mul, ir::DType::i64, {a.var(0), a.index(10)});
  auto x_at = [&](int32_t v) {
    return a.load(0, ir::DType::f32, a.alu(kir::Alu::Add, ir::DType::i64, {row, a.var(v)}));
  };
  const kir::Expr* max = a.reduce(kir::ReduceOp::Max, ir::DType::f32, x_at(2), {2}, {10});
  const kir::Expr* e = a.alu(kir::Alu::Exp, ir::DType::f32,
                             {a.alu(kir::Alu::Sub, ir::DType::f32, {x_at(3), max})});
  const kir::Expr* sum = a.reduce(kir::ReduceOp::Sum, ir::DType::f32, e, {3}, {10});
  k.stores = {{1, a.var(0), sum}};
  // max: 4 x 10 steps; sum: 4 x 10 steps, each with a sub and an exp.
  EXPECT_DOUBLE_EQ(kernel_work(k).flops, 40 + 40 * 3);
}

TEST(Roofline, TheSlowerResourceBounds) {
  const kir::Kernel k = testing::elementwise_kernel(4, 8);  // 384 bytes, 96 flops
  EXPECT_DOUBLE_EQ(roofline_ms(k, 384e3, 0), 1.0);
  EXPECT_DOUBLE_EQ(roofline_ms(k, 0, 96e3), 1.0);
  EXPECT_DOUBLE_EQ(roofline_ms(k, 384e3, 48e3), 2.0);  // compute bound
  EXPECT_DOUBLE_EQ(roofline_ms(k, 192e3, 96e6), 2.0);  // memory bound
  EXPECT_DOUBLE_EQ(roofline_ms(k, 0, 0), 0.0);
}

}  // namespace
}  // namespace kiln::autotune
