// Matmuls on the tensor cores (kiln.toml compilation.matmul_precision = "high", CUDA devices of
// sm_80 and later: codegen/gpu/mma_matmul_writer.cpp) against the reference interpreter: f32
// operands rounded to tf32, f16 and bf16 operands; tile-aligned and ragged sides, a depth that is
// no multiple of the staged slice, batches, a transposed operand, prologues and epilogues. Runs
// where the device under test is a CUDA device with tensor cores; elsewhere each test is skipped
// with the reason (the option changes nothing on other devices).
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <memory>
#include <vector>

#include "harness.h"

namespace kiln::testing {
namespace {

using ir::DType;
using ir::Op;

// tf32 keeps 10 of f32's 23 mantissa bits (unit roundoff 2^-11 for each operand): relative to
// the output's scale, the error of a K-long dot product of normal(0, 1) operands stays far below
// 2e-3 at the depths here (the default f32 tolerance, 2e-5, would fail them: the check is real).
// f16 and bf16 operands are exact on the tensor cores, their products too (the reference rounds
// each product to the operand dtype): their usual tolerances hold.
constexpr double kTf32Tolerance = 2e-3;

class TensorCoreMatmul : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!device_under_test_name().starts_with("cuda"))
      GTEST_SKIP() << "tensor-core matmuls are CUDA's; the device under test is "
                   << device_under_test_name();
    auto device = open_device_under_test(
        [](runtime::DeviceOptions& o) { o.tensor_core_matmul = true; });
    if (!device) GTEST_SKIP() << "no CUDA device: " << device.error().message;
    device_ = std::move(*device);
  }

  void check(Case& c, const ir::Node* out, const std::string& what, DType t = DType::f32) {
    expect_matches_reference_on(*device_, c, {out}, what,
                                t == DType::f32 ? kTf32Tolerance : tolerance(t));
  }

  std::unique_ptr<runtime::Device> device_;
};

TEST_F(TensorCoreMatmul, EveryOperandDtypeAndSide) {
  struct Sides {
    int64_t m, k, n;
  };
  // Tile-aligned, ragged on every side (k not a multiple of 8 or 32), tall, wide, and one large
  // enough for the 128-wide tiles.
  const std::vector<Sides> sides = {{128, 96, 160}, {100, 50, 72}, {513, 33, 65},
                                    {64, 300, 1000}, {1024, 256, 1024}, {16, 16, 16}};
  for (DType t : {DType::f32, DType::f16, DType::bf16})
    for (const Sides& s : sides) {
      Case c;
      const ir::Node* a = c.input(t, {s.m, s.k});
      const ir::Node* b = c.input(t, {s.k, s.n});
      auto y = c.b.matmul(a, b);
      ASSERT_TRUE(y.has_value()) << y.error().message;
      check(c, *y,
            fmt::format("matmul {} [{},{}]x[{},{}]", ir::dtype_name(t), s.m, s.k, s.k, s.n), t);
    }
}

TEST_F(TensorCoreMatmul, BatchedWithBiasAndRelu) {
  for (DType t : {DType::f32, DType::bf16}) {
    Case c;
    const ir::Node* x = c.input(t, {3, 70, 40});
    const ir::Node* w = c.input(t, {3, 40, 90});
    const ir::Node* bias = c.input(t, {90});
    auto y = c.b.matmul(x, w);
    ASSERT_TRUE(y.has_value()) << y.error().message;
    auto z = c.b.binary(Op::Add, *y, bias);
    ASSERT_TRUE(z.has_value()) << z.error().message;
    auto r = c.b.unary(Op::Relu, *z);
    ASSERT_TRUE(r.has_value()) << r.error().message;
    check(c, *r, fmt::format("relu(bmm {} [3,70,40]x[3,40,90] + b)", ir::dtype_name(t)), t);
  }
}

TEST_F(TensorCoreMatmul, TransposedOperandAndAPrologue) {
  Case c;
  const ir::Node* x = c.input(DType::f32, {200, 120});
  const ir::Node* w = c.input(DType::f32, {136, 120});  // used as w^T: [120, 136]
  auto wt = c.b.permute(w, {1, 0});
  ASSERT_TRUE(wt.has_value()) << wt.error().message;
  auto xs = c.b.unary(Op::Tanh, x);  // evaluated as the operand is staged
  ASSERT_TRUE(xs.has_value()) << xs.error().message;
  auto y = c.b.matmul(*xs, *wt);
  ASSERT_TRUE(y.has_value()) << y.error().message;
  check(c, *y, "matmul(tanh(x) [200,120], w^T [120,136])");
}

}  // namespace
}  // namespace kiln::testing
