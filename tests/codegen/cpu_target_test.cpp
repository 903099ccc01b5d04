// compilation.cpu_target in the cpu backend: a named baseline CPU compiles for its features only
// (no AVX-512 for x86-64-v3, whatever this host has), names LLVM does not know and CPUs this
// host cannot run are errors, and the target is part of what cache keys see.
#include <gtest/gtest.h>

#include "tests/codegen/cpu_test_support.h"

namespace kiln::codegen::testing {
namespace {

bool has(const std::string& features, const std::string& f) {
  return ("," + features + ",").find("," + f + ",") != std::string::npos;
}

std::unique_ptr<CpuBackend> make(std::string_view target) {
  auto b = CpuBackend::create(target);
  EXPECT_TRUE(b.has_value()) << (b ? "" : b.error().message);
  return b ? std::move(*b) : nullptr;
}

// out[i] = a[i] * 2 + 1 over 1000 f32 values.
kir::Kernel affine_kernel() {
  auto arena = std::make_shared<kir::ExprArena>();
  const kir::Expr* i = arena->var(0);
  const kir::Expr* x = arena->load(0, DType::f32, i);
  const kir::Expr* y = arena->alu(
      kir::Alu::Add, DType::f32,
      {arena->alu(kir::Alu::Mul, DType::f32, {x, arena->constant(DType::f32, 2.0)}),
       arena->constant(DType::f32, 1.0)});
  return make_kernel("affine", {in_param(DType::f32, {1000}), out_param(DType::f32, {1000})},
                     {1000}, arena, {{1, i, y}});
}

TEST(CpuTarget, BaselineV3CompilesForAvx2WithoutAvx512) {
  auto v3 = make("x86-64-v3");
  ASSERT_TRUE(v3);
  EXPECT_EQ(v3->cpu_name(), "x86-64-v3");
  const std::string f = v3->cpu_features();
  EXPECT_TRUE(has(f, "+avx2")) << f;
  EXPECT_TRUE(has(f, "+fma")) << f;
  EXPECT_FALSE(has(f, "+avx512f")) << f;
  auto art = v3->compile(affine_kernel(), {});
  ASSERT_TRUE(art.has_value()) << art.error().message;
  const std::string& ir = (*art)->llvm_ir;
  EXPECT_NE(ir.find("\"target-cpu\"=\"x86-64-v3\""), std::string::npos) << ir;
  EXPECT_EQ(ir.find("<16 x float>"), std::string::npos) << "512-bit vectors for x86-64-v3\n" << ir;
  EXPECT_EQ(ir.find("prefer-vector-width"), std::string::npos) << ir;
  std::vector<float> a(1000), out(1000);
  for (size_t j = 0; j < a.size(); ++j) a[j] = static_cast<float>(j) * 0.5f - 7;
  void* args[] = {a.data(), out.data()};
  (*art)->fn(args, 0, (*art)->outer_extent);
  for (size_t j = 0; j < a.size(); ++j) ASSERT_EQ(out[j], a[j] * 2 + 1) << j;
}

TEST(CpuTarget, V4NeedsAvx512OnThisHost) {
  const bool host_avx512 = has(make("native")->cpu_features(), "+avx512f");
  auto v4 = CpuBackend::create("x86-64-v4");
  if (host_avx512) {
    ASSERT_TRUE(v4.has_value()) << v4.error().message;
    EXPECT_TRUE(has((*v4)->cpu_features(), "+avx512f"));
    auto art = (*v4)->compile(affine_kernel(), {});
    ASSERT_TRUE(art.has_value()) << art.error().message;
    EXPECT_NE((*art)->llvm_ir.find("\"target-cpu\"=\"x86-64-v4\""), std::string::npos);
  } else {
    ASSERT_FALSE(v4.has_value());
    EXPECT_NE(v4.error().message.find("compilation.cpu_target: 'x86-64-v4' needs "),
              std::string::npos)
        << v4.error().message;
    EXPECT_NE(v4.error().message.find("avx512f"), std::string::npos) << v4.error().message;
  }
}

TEST(CpuTarget, UnknownNamesAreErrorsThatSayWhatIsExpected) {
  auto bad = CpuBackend::create("pentium-9000");
  ASSERT_FALSE(bad.has_value());
  EXPECT_EQ(bad.error().message,
            "compilation.cpu_target: unknown CPU 'pentium-9000' (expected native, x86-64-v3, "
            "x86-64-v4 or an LLVM x86-64 CPU name such as znver3)");
  EXPECT_EQ(CpuBackend::cpu_target_problem("native"), "");
  EXPECT_EQ(CpuBackend::cpu_target_problem("znver3"), "");
  EXPECT_NE(CpuBackend::cpu_target_problem("i386"), "") << "32-bit CPUs are not targets";
}

TEST(CpuTarget, TheTargetChangesWhatCacheKeysSee) {
  auto native = make("native");
  auto v3 = make("x86-64-v3");
  auto v2 = make("x86-64-v2");
  ASSERT_TRUE(native && v3 && v2);
  EXPECT_NE(native->cpu_name() + native->cpu_features(), v3->cpu_name() + v3->cpu_features());
  EXPECT_NE(v3->cpu_features(), v2->cpu_features());
  EXPECT_EQ(v3->cpu_features(), make("x86-64-v3")->cpu_features()) << "deterministic";
}

}  // namespace
}  // namespace kiln::codegen::testing
