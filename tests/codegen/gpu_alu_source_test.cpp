// GPU source for hand-built kernels: every ALU op on every dtype it allows, every cast, every
// reduction (loop, cooperative row and whole-kernel forms) in both check modes, compiled as GLSL
// and CUDA; unsupported combinations are errors that name the op.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include <fmt/format.h>

#include "codegen/gpu/gpu_source.h"
#include "codegen/gpu/lane_emitter.h"
#include "codegen/spirv/spirv_compiler.h"
#include "tests/codegen/gpu_test_kernels.h"
#include "tests/codegen/gpu_test_util.h"

namespace kiln::codegen::gpu {
namespace {

void expect_glsl_compiles(const std::vector<kir::Kernel>& kernels) {
  for (const kir::Kernel& k : kernels)
    for (CheckMode c : modes_for(k)) {
      auto src = emit_source(k, {}, Dialect::glsl, c);
      ASSERT_TRUE(src.has_value()) << k.name << ": " << src.error().message;
      auto spv = spirv::compile_glsl(src->text, k.name, /*optimize=*/c == CheckMode::none);
      EXPECT_TRUE(spv.has_value()) << k.name << " (" << check_mode_name(c) << "): "
                                   << (spv ? "" : spv.error().message) << "\n" << src->text;
    }
}

void expect_cuda_compiles(std::vector<kir::Kernel> kernels, const std::string& batch,
                          const TuneParams& params = {}) {
  if (!test_nvrtc()) GTEST_SKIP() << nvrtc_unavailable();
  std::vector<std::pair<std::string, std::string>> sources;
  for (kir::Kernel& k : kernels) {
    const std::string base = k.name;
    for (CheckMode c : modes_for(k)) {
      k.name = fmt::format("{}_{}", base, check_mode_name(c));
      auto src = emit_source(k, params, Dialect::cuda, c);
      ASSERT_TRUE(src.has_value()) << k.name << ": " << src.error().message;
      sources.emplace_back(k.name, src->text);
    }
  }
  expect_cuda_batch_compiles(sources, batch);
}

class GpuDtypeSourceTest : public testing::TestWithParam<DType> {};

TEST_P(GpuDtypeSourceTest, EveryOpCastAndReductionCompilesAsGlsl) {
  expect_glsl_compiles(dtype_kernels(GetParam(), 64));
}

TEST_P(GpuDtypeSourceTest, EveryOpCastAndReductionCompilesAsCuda) {
  expect_cuda_compiles(dtype_kernels(GetParam(), 64), std::string(ir::dtype_name(GetParam())));
}

INSTANTIATE_TEST_SUITE_P(AllDtypes, GpuDtypeSourceTest, testing::ValuesIn(ir::kAllDTypes),
                         [](const auto& info) { return std::string(ir::dtype_name(info.param)); });

// f16 / bf16 conversions and reductions in registers, with and without 16-bit buffers.
class GpuHalfSourceTest : public testing::TestWithParam<DType> {};

TEST_P(GpuHalfSourceTest, KernelsCompileAsGlslAndCuda) {
  const DType h = GetParam();
  expect_glsl_compiles(half_kernels(h));
  expect_cuda_compiles(half_kernels(h), fmt::format("half_{}", ir::dtype_name(h)));
}

INSTANTIATE_TEST_SUITE_P(Halves, GpuHalfSourceTest, testing::Values(DType::f16, DType::bf16),
                         [](const auto& info) { return std::string(ir::dtype_name(info.param)); });

TEST(GpuAluSourceTest, NestedReductionsAndMatmulsCompile) {
  expect_glsl_compiles(shape_kernels());
  expect_cuda_compiles(shape_kernels(), "shapes");
}

TEST(GpuAluSourceTest, FourLaneKernelsCompileAsCuda) {
  TuneParams four;
  four.vector_loads = kLanes;
  std::vector<kir::Kernel> ks = alu_kernels(DType::f32, 64);
  for (const kir::Kernel& k : alu_kernels(DType::i32, 64)) ks.push_back(k);
  ks.push_back(lanes_mixed_kernel());
  ks.push_back(lanes_gemv_kernel());
  auto src = emit_source(lanes_gemv_kernel(), four, Dialect::cuda);
  ASSERT_TRUE(src.has_value()) << src.error().message;
  EXPECT_NE(src->text.find("float4"), std::string::npos) << src->text;
  expect_cuda_compiles(ks, "lanes", four);
}

// Register rows in CUDA (codegen/gpu/row_reduce_writer.cpp): each thread copies its share of a
// softmax row as float4s into an array that every pass indexes with constants (an unrolled
// loop), no shared copy and no barrier after it; the output divides the kept exp terms and
// moves four points a store. The sources compile in every check mode.
TEST(GpuAluSourceTest, RegisterRowsCompileAsCuda) {
  const TuneParams block32{.block_size = 32};
  auto src = emit_source(nested_kernel(6, 256), block32, Dialect::cuda);
  ASSERT_TRUE(src.has_value()) << src.error().message;
  const std::string& t = src->text;
  for (const char* part : {"float kiln_row0[8];", "float4 rv", "#pragma unroll",
                           "float kiln_term0[8];", "(kiln_term0[kq * 4 + 0] / ", "((float4*)p1)["})
    EXPECT_NE(t.find(part), std::string::npos) << part << "\n" << t;
  EXPECT_EQ(t.find("kiln_stage"), std::string::npos) << t;
  // exp in the sum's pass only: the output reads the kept terms.
  size_t exps = 0;
  for (size_t at = t.find("expf("); at != std::string::npos; at = t.find("expf(", at + 1)) ++exps;
  EXPECT_EQ(exps, 1u) << t;
  expect_cuda_compiles({nested_kernel(6, 256)}, "register_rows_32", block32);
  expect_cuda_compiles({centered_kernel(5, 1024), nested_kernel(8, 64)}, "register_rows");
}

TEST(GpuAluSourceTest, FourLanesNeedAContiguousAlignedAccess) {
  kir::ExprArena a;
  using kir::Alu;
  const DType L = DType::i64;
  const kir::Expr* rowmajor = a.alu(Alu::Add, L, {a.alu(Alu::Mul, L, {a.var(0), a.index(20)}), a.var(1)});
  const kir::Expr* shifted = a.alu(Alu::Add, L, {rowmajor, a.index(1)});
  const kir::Expr* divided = a.alu(Alu::IDiv, L, {a.var(1), a.index(2)});
  kir::Kernel probe = lanes_mixed_kernel();
  probe.stores.push_back({5, shifted, a.alu(Alu::Add, L, {divided, a.index(0)})});
  const FreeVars fv(probe);
  EXPECT_EQ(var_coefficient(rowmajor, 1, fv), 1);
  EXPECT_EQ(var_coefficient(rowmajor, 0, fv), 20);
  EXPECT_EQ(var_coefficient(divided, 1, fv), std::nullopt);
  EXPECT_EQ(known_divisor(rowmajor, 1, 4), 4);
  EXPECT_EQ(known_divisor(shifted, 1, 4), 1);
  EXPECT_EQ(known_divisor(a.alu(Alu::Mul, L, {a.var(0), a.index(0)}), 1, 4), 0);

  TuneParams four;
  four.vector_loads = kLanes;
  kir::Kernel odd = alu_kernels(DType::f32, 2)[0];
  odd.domain = {30};
  for (kir::Param& p : odd.params) p.shape = {30};
  auto err = emit_source(odd, four, Dialect::glsl);
  ASSERT_FALSE(err.has_value());
  EXPECT_NE(err.error().message.find("vector_loads=4: the innermost extent 30 is not a multiple of 4"), std::string::npos)
      << err.error().message;
  auto row = emit_source(reduce_kernel(DType::f32, 4, 100), four, Dialect::glsl);
  ASSERT_FALSE(row.has_value());
  EXPECT_NE(row.error().message.find("vector_loads applies to elementwise kernels"), std::string::npos);
  kir::Kernel f16 = alu_kernels(DType::f16, 2)[0];  // f16 in, f16 out: nothing moves as 16 bytes
  EXPECT_NE(lanes_blocker(f16, FreeVars(f16)).find("no f32/i32 load or store"), std::string::npos);

  // The heuristic takes four lanes only for kernels large enough to still fill a GPU.
  auto small = emit_source(alu_kernels(DType::f32, 2)[0], {}, Dialect::cuda);
  ASSERT_TRUE(small.has_value());
  EXPECT_EQ(small->text.find("float4"), std::string::npos);
  kir::Kernel big = alu_kernels(DType::f32, 2)[0];
  big.domain = {kMinPointsForLanes};
  for (kir::Param& p : big.params) p.shape = {kMinPointsForLanes};
  auto large = emit_source(big, {}, Dialect::cuda);
  ASSERT_TRUE(large.has_value());
  EXPECT_NE(large->text.find("float4"), std::string::npos);
  auto scalar = emit_source(big, TuneParams{.vector_loads = 1}, Dialect::cuda);
  ASSERT_TRUE(scalar.has_value());
  EXPECT_EQ(scalar->text.find("float4"), std::string::npos);
  EXPECT_EQ(scalar->launch.groups, large->launch.groups * 4);
}

TEST(GpuAluSourceTest, SplitRowsCompileAsCudaAndChainedReductionsAreNotSplit) {
  std::vector<kir::Kernel> ks;
  for (DType t : ir::kAllDTypes) ks.push_back(reduce_kernel(t, 4, 100));
  ks.push_back(centered_kernel(3, 1000));
  expect_cuda_compiles(ks, "splits", TuneParams{.splits = 8});
  TuneParams split;
  split.splits = 2;
  auto chained = emit_source(nested_kernel(8, 64), split, Dialect::cuda);  // softmax-like
  ASSERT_FALSE(chained.has_value());
  EXPECT_NE(chained.error().message.find("splits: a row reduction reads another one"), std::string::npos)
      << chained.error().message;
  auto many = emit_source(centered_kernel(20000, 64), split, Dialect::cuda);
  ASSERT_FALSE(many.has_value());
  EXPECT_NE(many.error().message.find("splits: 20000 rows (over 16384) already fill the device"), std::string::npos)
      << many.error().message;
  auto scratch = emit_source(centered_kernel(3, 1000), split, Dialect::glsl, CheckMode::validate);
  ASSERT_TRUE(scratch.has_value()) << scratch.error().message;
  EXPECT_NE(scratch->text.find("layout(std430, set = 0, binding = 4) coherent buffer KilnScratch { uint count[4];"),
            std::string::npos) << scratch->text;  // after 3 params and the error slot; 3 counters padded to 4
  EXPECT_EQ(scratch->scratch_zero_bytes, 16);
  EXPECT_EQ(scratch->scratch_bytes, 16 + 2 * (3 * 2 * 4));
}

TEST(GpuAluSourceTest, StrategiesOfReductions) {
  auto strategy = [](const kir::Kernel& k) {
    auto src = emit_source(k, {}, Dialect::cuda);
    return src ? src->strategy : src.error().message;
  };
  EXPECT_EQ(strategy(reduce_kernel(DType::f32, 4, 100)), "row-reduce");
  EXPECT_EQ(strategy(reduce_kernel(DType::f32, 0, 1000)), "row-reduce");
  EXPECT_EQ(strategy(reduce_kernel(DType::f32, 300, 7)), "elementwise");
  EXPECT_EQ(strategy(nested_kernel(8, 64)), "row-reduce");
  EXPECT_EQ(strategy(matmul_kernel(1, 40, 24, 33)), "matmul-tiled");
  EXPECT_EQ(strategy(matmul_kernel(3, 17, 50, 16)), "matmul-tiled");
  EXPECT_EQ(strategy(matmul_kernel(2, 70, 130, 40)), "matmul-tiled");
}

TEST(GpuAluSourceTest, UnsupportedOpsAreErrorsNamingTheOp) {
  kir::Kernel k;
  k.name = "bad";
  k.arena = std::make_shared<kir::ExprArena>();
  k.domain = {4};
  k.params = {{DType::i32, {4}, false, "x"}, {DType::i32, {4}, true, "y"}};
  k.stores = {{1, k.arena->var(0), k.arena->alu(Alu::Exp, DType::i32, {k.arena->load(0, DType::i32, k.arena->var(0))})}};
  auto src = emit_source(k, {}, Dialect::glsl);
  ASSERT_FALSE(src.has_value());
  EXPECT_NE(src.error().message.find("'exp' on i32"), std::string::npos) << src.error().message;
}

TEST(GpuAluSourceTest, ValidateAddsTheErrorSlotBinding) {
  kir::Kernel k = reduce_kernel(DType::f32, 4, 100);
  auto glsl = emit_source(k, {}, Dialect::glsl, CheckMode::validate);
  ASSERT_TRUE(glsl.has_value());
  EXPECT_NE(glsl->text.find(fmt::format("binding = {}) buffer KilnCheck", k.params.size())), std::string::npos);
  auto cuda = emit_source(k, {}, Dialect::cuda, CheckMode::validate);
  ASSERT_TRUE(cuda.has_value());
  EXPECT_NE(cuda->text.find("long long* kiln_chk)"), std::string::npos);
  auto plain = emit_source(k, {}, Dialect::glsl, CheckMode::none);
  EXPECT_EQ(plain->text.find("KilnCheck"), std::string::npos);
}

}  // namespace
}  // namespace kiln::codegen::gpu
