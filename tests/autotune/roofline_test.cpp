// The roofline bound: bytes and flops of hand-built kernels, counted by hand.
#include <gtest/gtest.h>

#include "autotune/roofline.h"
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
