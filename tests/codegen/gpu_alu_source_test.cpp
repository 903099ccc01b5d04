// GPU source for hand-built kernels: every ALU op on every dtype it allows, every cast, every
// reduction (loop, cooperative row and whole-kernel forms) in both check modes, compiled as GLSL
// and CUDA; unsupported combinations are errors that name the op.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include <fmt/format.h>

#include "codegen/gpu/gpu_source.h"
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

void expect_cuda_compiles(std::vector<kir::Kernel> kernels, const std::string& batch) {
  if (!test_nvrtc()) GTEST_SKIP() << nvrtc_unavailable();
  std::vector<std::pair<std::string, std::string>> sources;
  for (kir::Kernel& k : kernels) {
    const std::string base = k.name;
    for (CheckMode c : modes_for(k)) {
      k.name = fmt::format("{}_{}", base, check_mode_name(c));
      auto src = emit_source(k, {}, Dialect::cuda, c);
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

TEST(GpuAluSourceTest, NestedReductionsAndMatmulsCompile) {
  expect_glsl_compiles(shape_kernels());
  expect_cuda_compiles(shape_kernels(), "shapes");
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
