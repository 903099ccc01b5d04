// Matmuls on the tensor cores (kiln.toml compilation.matmul_precision = "high", CUDA devices of
// sm_80 and later: codegen/gpu/mma_matmul_writer.cpp) against the reference interpreter: f32
// operands rounded to tf32, f16 and bf16 operands; tile-aligned and ragged sides, a depth that is
// no multiple of the staged slice, batches, a transposed operand, prologues and epilogues. Runs
// where the device under test is a CUDA device with tensor cores; elsewhere each test is skipped
// with the reason (the option changes nothing on other devices).
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <memory>
#include <optional>
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

  // relu(x w + bias): x [batch, m, k], w [batch, k, n], bias [n].
  void check_bmm_bias_relu(DType t, int64_t batch, int64_t m, int64_t k, int64_t n) {
    Case c;
    const ir::Node* x = c.input(t, {batch, m, k});
    const ir::Node* w = c.input(t, {batch, k, n});
    const ir::Node* bias = c.input(t, {n});
    auto y = c.b.matmul(x, w);
    ASSERT_TRUE(y.has_value()) << y.error().message;
    auto z = c.b.binary(Op::Add, *y, bias);
    ASSERT_TRUE(z.has_value()) << z.error().message;
    auto r = c.b.unary(Op::Relu, *z);
    ASSERT_TRUE(r.has_value()) << r.error().message;
    check(c, *r,
          fmt::format("relu(bmm {} [{},{},{}]x[{},{},{}] + b)", ir::dtype_name(t), batch, m, k,
                      batch, k, n),
          t);
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

// Operands that are plain loads contiguous along k or along the output side, those extents
// multiples of 16 bytes, go to shared memory by cp.async (zero-filled outside the matrices) and
// to the fragments by ldmatrix (codegen/gpu/mma_matmul_writer.cpp, write_mma_async): every
// layout pair (A row- or column-major, B likewise) for each dtype, at sides that are no multiple
// of a tile (the zero-filled chunks) and with enough depth for several rounds of the stage ring;
// and a batch with bias and relu.
TEST_F(TensorCoreMatmul, OperandsCopiedStraightToSharedMemory) {
  struct Sides {
    int64_t m, k, n;
  };
  const std::vector<Sides> sides = {{200, 136, 264}, {520, 1032, 384}, {8, 8, 8}};
  for (DType t : {DType::f32, DType::f16, DType::bf16})
    for (const Sides& s : sides)
      for (int layout = 0; layout < 4; ++layout) {
        const bool at = layout & 1, bt = layout & 2;
        Case c;
        const ir::Node* a = c.input(t, at ? std::vector<int64_t>{s.k, s.m} : std::vector<int64_t>{s.m, s.k});
        const ir::Node* b = c.input(t, bt ? std::vector<int64_t>{s.n, s.k} : std::vector<int64_t>{s.k, s.n});
        auto av = at ? c.b.permute(a, {1, 0}) : ir::NodeResult(a);
        auto bv = bt ? c.b.permute(b, {1, 0}) : ir::NodeResult(b);
        ASSERT_TRUE(av.has_value() && bv.has_value());
        auto y = c.b.matmul(*av, *bv);
        ASSERT_TRUE(y.has_value()) << y.error().message;
        check(c, *y,
              fmt::format("matmul {} [{},{}]{} x [{},{}]{}", ir::dtype_name(t), s.m, s.k,
                          at ? " (from its transpose)" : "", s.k, s.n,
                          bt ? " (from its transpose)" : ""),
              t);
      }
  for (DType t : {DType::f32, DType::bf16}) check_bmm_bias_relu(t, 2, 96, 64, 136);
}

TEST_F(TensorCoreMatmul, BatchedWithBiasAndRelu) {
  for (DType t : {DType::f32, DType::bf16}) check_bmm_bias_relu(t, 3, 70, 40, 90);
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

// Flash attention with both products on the tensor cores (codegen/gpu/mma_attention_writer.cpp):
// head and value widths that are multiples of 8 up to 128 (64: key tiles of 64, 128: of 32),
// query rows that are no multiple of the 64 per workgroup, causal masks (with more keys than
// queries, an offset), an explicit scale; a head width of 36 keeps the SIMT kernel and is
// checked the same way. The probabilities enter the second product as tf32.
TEST_F(TensorCoreMatmul, AttentionOnTheTensorCores) {
  struct Shape {
    int64_t batch, queries, keys, head, value;
    bool causal;
    std::optional<double> scale;
  };
  const std::vector<Shape> shapes = {
      {6, 100, 100, 64, 64, false, std::nullopt}, {6, 100, 100, 64, 64, true, std::nullopt},
      {2, 50, 130, 32, 16, true, 0.3},            {2, 70, 70, 128, 128, false, std::nullopt},
      {3, 65, 200, 64, 24, false, std::nullopt},  {2, 40, 40, 36, 36, true, std::nullopt}};
  for (const Shape& s : shapes) {
    Case c;
    auto y = c.b.attention(c.input(DType::f32, {s.batch, s.queries, s.head}),
                           c.input(DType::f32, {s.batch, s.keys, s.head}),
                           c.input(DType::f32, {s.batch, s.keys, s.value}), s.causal, s.scale);
    ASSERT_TRUE(y.has_value()) << y.error().message;
    check(c, *y,
          fmt::format("attention [{},{},{}] keys {} value width {}{}", s.batch, s.queries, s.head,
                      s.keys, s.value, s.causal ? " causal" : ""));
  }
}

}  // namespace
}  // namespace kiln::testing
