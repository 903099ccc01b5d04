// Differential test of GPU source on a real device: the hand-built kernels (every ALU op x dtype,
// casts, reductions in every strategy, nested reductions, matmuls) run on vulkan:0 (lavapipe)
// and on the cpu backend with the same inputs; integer and bool results must match exactly,
// floats within the dtype's tolerance. Checked modes must not change in-range results.
#include <gtest/gtest.h>

#include <fmt/format.h>
#include <cmath>

#include "codegen/sum_blocks.h"
#include "tests/codegen/gpu_test_kernels.h"
#include "tests/codegen/gpu_vulkan_runner.h"

namespace kiln::codegen::gpu {
namespace {

class GpuVulkanDtypeDiffTest : public testing::TestWithParam<DType> {};

TEST_P(GpuVulkanDtypeDiffTest, OpsCastsAndReductionsMatchTheCpuBackend) {
  if (!runner().gpu) GTEST_SKIP() << "vulkan:0 is not available";
  ASSERT_TRUE(runner().cpu);
  uint32_t seed = 1;
  for (const kir::Kernel& k : dtype_kernels(GetParam(), 6)) run_both(k, CheckMode::none, seed++);
}

INSTANTIATE_TEST_SUITE_P(AllDtypes, GpuVulkanDtypeDiffTest, testing::ValuesIn(ir::kAllDTypes),
                         [](const auto& info) { return std::string(ir::dtype_name(info.param)); });

// f16 and bf16 conversions from and to every dtype, in registers (kernels without a 16-bit
// buffer) and through 16-bit buffers, and reductions of values rounded to them: bit for bit,
// on inputs at every rounding boundary.
class GpuVulkanHalfDiffTest : public testing::TestWithParam<DType> {};

TEST_P(GpuVulkanHalfDiffTest, ConversionsAndReductionsMatchTheCpuBackendBitForBit) {
  const DType h = GetParam();
  if (!runner().gpu) GTEST_SKIP() << "vulkan:0 is not available";
  ASSERT_TRUE(runner().cpu);
  uint32_t seed = 500;
  for (DType from : ir::kAllDTypes)
    for (bool stored : {false, true})
      run_both(half_cast_kernel(h, from, stored), CheckMode::none, seed++, {}, Inputs::rounding,
               /*bits=*/true);
  for (const TuneParams& p :
       {TuneParams{}, TuneParams{.reduce = GpuReduce::thread}, TuneParams{.splits = 4}})
    run_both(half_reduce_kernel(h, 3, 3000), CheckMode::none, seed++, p, Inputs::reduce,
             /*bits=*/true);
}

INSTANTIATE_TEST_SUITE_P(Halves, GpuVulkanHalfDiffTest, testing::Values(DType::f16, DType::bf16),
                         [](const auto& info) { return std::string(ir::dtype_name(info.param)); });

// sin and cos of large arguments on vulkan:0: the exact reductions (f32 from 8192, f64 from
// 2^20) against libm in double, at arguments up to each type's largest (lavapipe's own f32 sin
// gave exactly +-1 from 1e9 on; the f64 helper's three-part reduction gave sin(1e20) = 2e33).
TEST(GpuVulkanDiffTest, SinAndCosOfLargeArgumentsMatchLibm) {
  if (!runner().gpu) GTEST_SKIP() << "vulkan:0 is not available";
  for (DType t : {DType::f32, DType::f64}) {
    SCOPED_TRACE(ir::dtype_name(t));
    const bool f32 = t == DType::f32;
    std::vector<double> xs;
    for (double e = 0; e <= (f32 ? 38.5 : 307); e += f32 ? 0.0625 : 0.25)
      for (double sign : {1.0, -1.0}) {
        const double v = sign * std::pow(10.0, e) * 1.2345;
        if (std::isfinite(f32 ? static_cast<float>(v) : v))
          xs.push_back(f32 ? static_cast<double>(static_cast<float>(v)) : v);
      }
    const auto n = static_cast<int64_t>(xs.size());
    auto arena = std::make_shared<kir::ExprArena>();
    const kir::Expr* i = arena->var(0);
    const kir::Expr* x = arena->load(0, t, i);
    kir::Kernel k;
    k.name = fmt::format("trig_{}", ir::dtype_name(t));
    k.arena = arena;
    k.domain = {n};
    k.params = {{t, {n}, false, "x"}, {t, {n}, true, "s"}, {t, {n}, true, "c"}};
    k.stores = {{1, i, arena->alu(Alu::Sin, t, {x})}, {2, i, arena->alu(Alu::Cos, t, {x})}};
    std::vector<ir::HostTensor> tensors = {ir::HostTensor::zeros(t, {n}),
                                           ir::HostTensor::zeros(t, {n}),
                                           ir::HostTensor::zeros(t, {n})};
    for (int64_t j = 0; j < n; ++j) tensors[0].set(j, xs[static_cast<size_t>(j)]);
    run_on_vulkan(k, tensors, CheckMode::none);
    if (::testing::Test::HasFatalFailure()) return;
    // f32: GLSL's sin of the reduced argument (lavapipe: about 1e-6); f64: a few ulp.
    const double tol = f32 ? 4e-6 : 1e-13;
    for (int64_t j = 0; j < n; ++j) {
      const double v = xs[static_cast<size_t>(j)];
      EXPECT_NEAR(tensors[1].get(j), std::sin(v), tol * std::max(std::abs(std::sin(v)), 1e-3))
          << "sin(" << v << ")";
      EXPECT_NEAR(tensors[2].get(j), std::cos(v), tol * std::max(std::abs(std::cos(v)), 1e-3))
          << "cos(" << v << ")";
    }
  }
}

// f64 erf on vulkan:0 against libm from 0 to 7 in steps of 1/64, both signs. Numerical Recipes'
// erfc (1.2e-7 relative) above 2.5 left erf(2.5) 3.5e-11 off; the continued fraction from 2 on
// and the series below are within 1e-14.
TEST(GpuVulkanDiffTest, F64ErfMatchesLibm) {
  if (!runner().gpu) GTEST_SKIP() << "vulkan:0 is not available";
  std::vector<double> xs;
  for (int j = 0; j <= 7 * 64; ++j)
    for (double sign : {1.0, -1.0}) xs.push_back(sign * j / 64.0);
  const auto n = static_cast<int64_t>(xs.size());
  auto arena = std::make_shared<kir::ExprArena>();
  const kir::Expr* i = arena->var(0);
  kir::Kernel k;
  k.name = "erf_f64";
  k.arena = arena;
  k.domain = {n};
  k.params = {{DType::f64, {n}, false, "x"}, {DType::f64, {n}, true, "e"}};
  k.stores = {{1, i, arena->alu(Alu::Erf, DType::f64, {arena->load(0, DType::f64, i)})}};
  std::vector<ir::HostTensor> tensors = {ir::HostTensor::zeros(DType::f64, {n}),
                                         ir::HostTensor::zeros(DType::f64, {n})};
  for (int64_t j = 0; j < n; ++j) tensors[0].set(j, xs[static_cast<size_t>(j)]);
  run_on_vulkan(k, tensors, CheckMode::none);
  if (::testing::Test::HasFatalFailure()) return;
  for (int64_t j = 0; j < n; ++j) {
    const double v = xs[static_cast<size_t>(j)];
    EXPECT_NEAR(tensors[1].get(j), std::erf(v), 1e-14) << "erf(" << v << ")";
  }
}

// log of subnormals and pow at its edges on vulkan:0, against libm in double. Lavapipe's log of a
// subnormal was off by up to 15 (f32 log(1e-45) = -88.03, f64 log(5e-324) = -709.09), and pow as
// exp2(y * log2(x)) gave FLT_MAX^1 = inf, 10^3 = 999.99988, pow(1, NaN) = NaN and f64 2^52 off
// by 11.5.
TEST(GpuVulkanDiffTest, LogOfSubnormalsAndPowAtItsEdgesMatchLibm) {
  if (!runner().gpu) GTEST_SKIP() << "vulkan:0 is not available";
  for (DType t : {DType::f32, DType::f64}) {
    SCOPED_TRACE(ir::dtype_name(t));
    const bool f32 = t == DType::f32;
    const double tiny = f32 ? 1.401298464324817e-45 : 4.9406564584124654e-324;
    const double least_normal = f32 ? 1.1754943508222875e-38 : 2.2250738585072014e-308;
    const double largest = f32 ? 3.4028234663852886e+38 : 1.7976931348623157e+308;
    const double nan = std::nan("");
    // (x, y): log reads x; pow reads both.
    const std::vector<std::pair<double, double>> cases = {{tiny, 1},
                                                          {tiny * 3, 0.5},
                                                          {least_normal / 3, 1},
                                                          {least_normal / 3, 0.5},
                                                          {least_normal, 2},
                                                          {largest, 1},
                                                          {1, nan},
                                                          {nan, 0},
                                                          {10, 3},
                                                          {-7, 3},
                                                          {-2, -3},
                                                          {1e10, 3},
                                                          {2, 52},
                                                          {10, 15},
                                                          {3, 40},
                                                          {1.5, 64},
                                                          {10, -30},
                                                          {2, -126},
                                                          {0.5, 2.5},
                                                          {7.25, -1.5},
                                                          {2, 0.5},
                                                          {1e-20, 1.75},
                                                          {123.456, 0.3},
                                                          {-1, 64}};
    const auto n = static_cast<int64_t>(cases.size());
    auto arena = std::make_shared<kir::ExprArena>();
    const kir::Expr* i = arena->var(0);
    const kir::Expr* x = arena->load(0, t, i);
    const kir::Expr* y = arena->load(1, t, i);
    kir::Kernel k;
    k.name = fmt::format("log_pow_{}", ir::dtype_name(t));
    k.arena = arena;
    k.domain = {n};
    k.params = {
        {t, {n}, false, "x"}, {t, {n}, false, "y"}, {t, {n}, true, "log"}, {t, {n}, true, "pow"}};
    k.stores = {{2, i, arena->alu(Alu::Log, t, {x})}, {3, i, arena->alu(Alu::Pow, t, {x, y})}};
    std::vector<ir::HostTensor> tensors;
    for (int p = 0; p < 4; ++p) tensors.push_back(ir::HostTensor::zeros(t, {n}));
    const auto round = [&](double v) {
      return f32 ? static_cast<double>(static_cast<float>(v)) : v;
    };
    for (int64_t j = 0; j < n; ++j) {
      tensors[0].set(j, cases[static_cast<size_t>(j)].first);
      tensors[1].set(j, cases[static_cast<size_t>(j)].second);
    }
    run_on_vulkan(k, tensors, CheckMode::none);
    if (::testing::Test::HasFatalFailure()) return;
    const double tol = f32 ? 1e-6 : 1e-14;
    for (int64_t j = 0; j < n; ++j) {
      const double xv = tensors[0].get(j), yv = tensors[1].get(j);  // as stored in the dtype
      if (xv > 0) {
        const double want = std::log(xv);
        EXPECT_NEAR(tensors[2].get(j), want, tol * std::abs(want)) << "log(" << xv << ")";
      }
      const double want = round(std::pow(xv, yv));
      const double got = tensors[3].get(j);
      // An integer exponent (up to 64) is a few roundings; another one is exp2(y * log2(x)),
      // whose error grows with y * log2(x) (documented in docs/graph-format.md).
      const bool integral = std::floor(yv) == yv && std::abs(yv) <= 64;
      const double eps = f32 ? 0x1p-24 : 0x1p-53;
      const double pow_tol = integral || !std::isfinite(yv * std::log2(std::abs(xv)))
                                 ? tol
                                 : 8 * eps * (1 + std::abs(yv * std::log2(std::abs(xv))));
      if (std::isnan(want))
        EXPECT_TRUE(std::isnan(got)) << "pow(" << xv << ", " << yv << ") = " << got;
      else
        EXPECT_NEAR(got, want, pow_tol * std::abs(want)) << "pow(" << xv << ", " << yv << ")";
    }
  }
}

TEST(GpuVulkanDiffTest, NestedReductionsAndMatmulsMatchTheCpuBackend) {
  if (!runner().gpu) GTEST_SKIP() << "vulkan:0 is not available";
  ASSERT_TRUE(runner().cpu);
  uint32_t seed = 100;
  for (const kir::Kernel& k : shape_kernels()) run_both(k, CheckMode::none, seed++);
}

// Four lanes per thread with vector loads and stores give the cpu backend's results, wherever
// they apply: every dtype's ALU kernels, mixed vector and element accesses, reductions inside the
// thread. Checked modes fall back to one point per thread.
TEST(GpuVulkanDiffTest, FourLanesMatchTheCpuBackend) {
  if (!runner().gpu) GTEST_SKIP() << "vulkan:0 is not available";
  ASSERT_TRUE(runner().cpu);
  TuneParams four;
  four.vector_loads = kLanes;
  uint32_t seed = 200;
  int ran = 0;
  for (DType t : ir::kAllDTypes)
    for (const kir::Kernel& k : alu_kernels(t, 6))
      if (lanes_blocker(k, FreeVars(k)).empty()) {
        run_both(k, CheckMode::none, seed++, four);
        ++ran;
      }
  EXPECT_GE(ran, 10);
  for (const kir::Kernel& k : {lanes_mixed_kernel(), lanes_gemv_kernel()}) {
    ASSERT_EQ(lanes_blocker(k, FreeVars(k)), "") << k.name;
    run_both(k, CheckMode::none, seed++, four);
    run_both(k, CheckMode::enforce, seed++, four);
  }
}

// Row reductions shared by several workgroups per row (splits) give the cpu backend's results:
// every reduction of every dtype, rows longer and shorter than the groups' share, the heuristic
// split of one long row, a row broadcast written by the last group, and checked modes.
TEST(GpuVulkanDiffTest, SplitRowsMatchTheCpuBackend) {
  if (!runner().gpu) GTEST_SKIP() << "vulkan:0 is not available";
  ASSERT_TRUE(runner().cpu);
  uint32_t seed = 300;
  for (DType t : ir::kAllDTypes) {
    run_both(reduce_kernel(t, 4, 100), CheckMode::none, seed++, TuneParams{.splits = 4});
    run_both(reduce_kernel(t, 0, 3000), CheckMode::none, seed++, TuneParams{.splits = 8});
  }
  const kir::Kernel one_long_row = reduce_kernel(DType::f32, 0, 20000);
  auto src = emit_source(one_long_row, {}, Dialect::glsl);
  ASSERT_TRUE(src.has_value()) << src.error().message;
  EXPECT_GT(src->launch.groups, 1) << "one long row is split by default";
  EXPECT_GT(src->scratch_bytes, 0);
  run_both(one_long_row, CheckMode::none, seed++);
  run_both(centered_kernel(3, 1000), CheckMode::none, seed++, TuneParams{.splits = 16});
  run_both(centered_kernel(3, 1000), CheckMode::validate, seed++, TuneParams{.splits = 2});
  run_both(reduce_kernel(DType::i32, 2, 5000), CheckMode::enforce, seed++, TuneParams{.splits = 64});
}

// out[row] = sum over v < extent of x[row * extent + v], in f32.
kir::Kernel long_sum_kernel(int64_t rows, int64_t extent) {
  kir::Kernel k;
  k.name = fmt::format("longsum_{}x{}", rows, extent);
  k.arena = std::make_shared<kir::ExprArena>();
  kir::ExprArena& a = *k.arena;
  const int32_t rv = rows > 0 ? 1 : 0;
  if (rows > 0) k.domain = {rows};
  const kir::Expr* row = rows > 0 ? a.var(0) : a.index(0);
  const int64_t n = std::max<int64_t>(rows, 1);
  k.params = {{DType::f32, {n * extent}, false, "x"}, {DType::f32, {n}, true, "s"}};
  const kir::Expr* idx = a.alu(kir::Alu::Add, DType::i64,
                               {a.alu(kir::Alu::Mul, DType::i64, {row, a.index(extent)}), a.var(rv)});
  k.stores.push_back(
      {1, row, a.reduce(kir::ReduceOp::Sum, DType::f32, a.load(0, DType::f32, idx), {rv}, {extent})});
  return k;
}

// Float sums longer than codegen/sum_blocks.h's block fold blocks on the GPU too, in each
// strategy's own loop: a thread's whole row (reduce=thread), and a workgroup thread's strided
// share of one very long row. The source shows the block accumulators; the results match the cpu
// backend's (which adds its blocks in f64) within f32 tolerance.
TEST(GpuVulkanDiffTest, LongSumsFoldInBlocksAndMatchTheCpuBackend) {
  if (!runner().gpu) GTEST_SKIP() << "vulkan:0 is not available";
  ASSERT_TRUE(runner().cpu);
  const kir::Kernel per_thread = long_sum_kernel(2, 3 * kSumBlock + 5);
  const TuneParams thread{.reduce = GpuReduce::thread};
  auto src = emit_source(per_thread, thread, Dialect::glsl);
  ASSERT_TRUE(src.has_value()) << src.error().message;
  EXPECT_NE(src->text.find("part"), std::string::npos) << src->text;
  run_both(per_thread, CheckMode::none, 900, thread);
  const kir::Kernel long_row = long_sum_kernel(0, 2 * 256 * kSumBlock + 7);
  const TuneParams one_group{.splits = 1};
  src = emit_source(long_row, one_group, Dialect::glsl);
  ASSERT_TRUE(src.has_value()) << src.error().message;
  EXPECT_NE(src->text.find(" fb"), std::string::npos) << src->text;  // the loop over blocks
  EXPECT_EQ(src->text.find("kiln_part"), std::string::npos) << "one workgroup, no splits";
  run_both(long_row, CheckMode::none, 901, one_group);
  // Short sums keep one accumulator.
  src = emit_source(long_sum_kernel(2, kSumBlock), thread, Dialect::glsl);
  ASSERT_TRUE(src.has_value()) << src.error().message;
  EXPECT_EQ(src->text.find("part"), std::string::npos) << src->text;
}

// Column reductions (a workgroup per 32 consecutive output points, its threads folding slices
// of each column) give the cpu backend's results: every reduction of every dtype (integer
// inputs tie often: arg reductions keep the first index across slices), a ragged last tile,
// columns fewer than 32, nested column reductions, tuned group sizes and checked modes.
TEST(GpuVulkanDiffTest, ColumnReductionsMatchTheCpuBackend) {
  if (!runner().gpu) GTEST_SKIP() << "vulkan:0 is not available";
  ASSERT_TRUE(runner().cpu);
  uint32_t seed = 600;
  for (DType t : ir::kAllDTypes) {
    const kir::Kernel k = column_kernel(t, 3, 100, 37);
    auto src = emit_source(k, {}, Dialect::glsl);
    ASSERT_TRUE(src.has_value()) << src.error().message;
    EXPECT_EQ(src->strategy, "column-reduce") << k.name;
    run_both(k, CheckMode::none, seed++);
    run_both(column_kernel(t, 1, 64, 5), CheckMode::none, seed++);
  }
  const kir::Kernel softmax = column_softmax_kernel(90, 40);
  ASSERT_EQ(emit_source(softmax, {}, Dialect::glsl)->strategy, "column-reduce");
  run_both(softmax, CheckMode::none, seed++);
  for (int block : {32, 64, 1024})
    run_both(column_kernel(DType::f32, 2, 300, 70), CheckMode::none, seed++,
             TuneParams{.block_size = block});
  run_both(column_kernel(DType::i32, 2, 50, 33), CheckMode::validate, seed++);
  run_both(column_kernel(DType::f16, 2, 50, 33), CheckMode::enforce, seed++);
}

// Rows that several passes read are copied into shared memory once (softmax: max, sum, output;
// centered: two sums and the output) and give the cpu backend's results, in checked modes too;
// rows too long for the shared memory budget are read from memory by every pass. (Rows whose
// length is a multiple of the group's size go to registers instead: the next test.)
TEST(GpuVulkanDiffTest, StagedRowsMatchTheCpuBackend) {
  if (!runner().gpu) GTEST_SKIP() << "vulkan:0 is not available";
  ASSERT_TRUE(runner().cpu);
  const auto staged = [](const kir::Kernel& k) {
    auto src = emit_source(k, {}, Dialect::glsl);
    return src.has_value() && src->text.find("kiln_stage0[") != std::string::npos;
  };
  uint32_t seed = 700;
  for (const kir::Kernel& k :
       {nested_kernel(8, 60), centered_kernel(5, 1000), centered_kernel(3, 33)}) {
    EXPECT_TRUE(staged(k)) << k.name;
    run_both(k, CheckMode::none, seed++);
    run_both(k, CheckMode::validate, seed++);
    run_both(k, CheckMode::enforce, seed++, TuneParams{.block_size = 32});
  }
  const kir::Kernel long_rows = centered_kernel(2, 5000);
  EXPECT_FALSE(staged(long_rows)) << "20000 bytes a row exceed the GLSL staging budget";
  run_both(long_rows, CheckMode::none, seed++);
  EXPECT_FALSE(staged(reduce_kernel(DType::f32, 4, 100)))
      << "one pass reads the row: nothing to stage";
}

// Rows whose length is a multiple of the group's size, a thread's share of them at most 32
// values, stay in registers: each thread copies its slots (16 bytes at a time where the row
// allows, in unchecked kernels) and every pass walks them. A reduction's term that the output
// computes again (softmax's exp(x - max)) is kept per slot and read back. The results match the
// cpu backend's for one to 32 slots a thread, vector and scalar slots, in checked modes too.
TEST(GpuVulkanDiffTest, RegisterRowsMatchTheCpuBackend) {
  if (!runner().gpu) GTEST_SKIP() << "vulkan:0 is not available";
  ASSERT_TRUE(runner().cpu);
  const auto source = [](const kir::Kernel& k, const TuneParams& p, CheckMode check) {
    auto src = emit_source(k, p, Dialect::glsl, check);
    EXPECT_TRUE(src.has_value()) << src.error().message;
    return src.has_value() ? src->text : std::string();
  };
  const auto has = [](const std::string& text, const std::string& what) {
    return text.find(what) != std::string::npos;
  };
  uint32_t seed = 750;
  struct Case {
    kir::Kernel k;
    TuneParams p;
    bool vector, term;
  };
  const std::vector<Case> cases = {
      {nested_kernel(8, 64), {}, false, true},                            // 64 threads, 1 slot
      {nested_kernel(6, 256), TuneParams{.block_size = 32}, true, true},  // 8 slots as 2 vectors
      {centered_kernel(5, 1024), {}, true, false},                        // 4 slots, one vector
      {centered_kernel(3, 2048), TuneParams{.block_size = 64, .splits = 1}, true,
       false},                                                               // 32 slots
      {centered_kernel(4, 96), TuneParams{.block_size = 32}, false, false},  // 3 scalar slots
  };
  for (const Case& c : cases) {
    const std::string text = source(c.k, c.p, CheckMode::none);
    EXPECT_TRUE(has(text, "kiln_row0[")) << c.k.name << "\n" << text;
    EXPECT_FALSE(has(text, "kiln_stage0")) << c.k.name;
    EXPECT_EQ(has(text, "vec4 rv"), c.vector) << c.k.name << "\n" << text;
    EXPECT_EQ(has(text, "kiln_term0["), c.term) << c.k.name << "\n" << text;
    // Finite inputs (a NaN would make a whole softmax row NaN, whatever its order), then
    // inputs with NaNs.
    run_both(c.k, CheckMode::none, seed++, c.p, Inputs::matmul);
    run_both(c.k, CheckMode::none, seed++, c.p, Inputs::reduce);
    // Checked kernels copy element by element, through the checked loads.
    const std::string checked = source(c.k, c.p, CheckMode::validate);
    EXPECT_TRUE(has(checked, "kiln_row0[")) << c.k.name;
    EXPECT_FALSE(has(checked, "vec4 rv")) << c.k.name;
    run_both(c.k, CheckMode::validate, seed++, c.p, Inputs::matmul);
  }
  // A thread's share over 32 values: shared memory (or nothing) instead.
  EXPECT_FALSE(has(
      source(centered_kernel(2, 2048), TuneParams{.block_size = 32, .splits = 1}, CheckMode::none),
      "kiln_row0"));
}

TEST(GpuVulkanDiffTest, CheckedKernelsKeepInRangeResults) {
  if (!runner().gpu) GTEST_SKIP() << "vulkan:0 is not available";
  run_both(reduce_kernel(DType::f32, 4, 100), CheckMode::validate, 7);
  run_both(reduce_kernel(DType::i8, 0, 1000), CheckMode::enforce, 8);
  run_both(matmul_kernel(3, 17, 50, 16), CheckMode::validate, 9);
  for (const kir::Kernel& k : alu_kernels(DType::f16, 6)) run_both(k, CheckMode::enforce, 10);
}

}  // namespace
}  // namespace kiln::codegen::gpu
