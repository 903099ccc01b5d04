// The cpu backend as a whole: host description, vectorized output, schedule metadata, errors,
// concurrent compiles, and artifacts that stay valid.
#include <gtest/gtest.h>

#include <fmt/format.h>
#include <cmath>
#include <thread>

#include "tests/codegen/cpu_test_support.h"

namespace kiln::codegen::testing {
namespace {

using kir::Alu;

// out[i] = f(a[i]) * b[i] + 1 over [n], f32.
kir::Kernel elementwise_f32(int64_t n, Alu f, std::string name = "ew") {
  auto a = std::make_shared<kir::ExprArena>();
  const kir::Expr* i = a->var(0);
  const kir::Expr* x = a->alu(f, DType::f32, {a->load(0, DType::f32, i)});
  const kir::Expr* y = a->alu(Alu::Mul, DType::f32, {x, a->load(1, DType::f32, i)});
  const kir::Expr* z = a->alu(Alu::Add, DType::f32, {y, a->constant(DType::f32, 1)});
  return make_kernel(
      std::move(name),
      {in_param(DType::f32, {n}), in_param(DType::f32, {n}), out_param(DType::f32, {n})}, {n}, a,
      {{2, i, z}});
}

// The first call to a function that is not an LLVM intrinsic (a libm call, say), or "".
std::string first_external_call(const std::string& ir) {
  for (size_t p = ir.find(" call "); p != std::string::npos; p = ir.find(" call ", p + 1)) {
    const size_t at = ir.find('@', p);
    const size_t eol = ir.find('\n', p);
    if (at < eol && ir.compare(at + 1, 5, "llvm.") != 0) return ir.substr(p, eol - p);
  }
  return "";
}

bool host_has_avx2() {
  return backend().cpu_features().find("+avx2") != std::string::npos;
}

TEST(CpuBackend, DescribesTheHost) {
  const std::string features = backend().cpu_features();
  EXPECT_FALSE(backend().cpu_name().empty());
  EXPECT_NE(features.find("+sse2"), std::string::npos) << features;
  EXPECT_EQ(features, backend().cpu_features());  // deterministic
  // Sorted by feature name, each entry "+name" or "-name".
  std::vector<std::string> names;
  for (size_t p = 0; p < features.size();) {
    size_t q = features.find(',', p);
    if (q == std::string::npos) q = features.size();
    ASSERT_TRUE(features[p] == '+' || features[p] == '-') << features.substr(p, q - p);
    names.push_back(features.substr(p + 1, q - p - 1));
    p = q + 1;
  }
  EXPECT_TRUE(std::is_sorted(names.begin(), names.end()));
}

TEST(CpuBackend, ElementwiseF32KernelVectorizesToEightLanes) {
  if (!host_has_avx2()) GTEST_SKIP() << "host has no AVX2: " << backend().cpu_name();
  for (Alu f : {Alu::Neg, Alu::Exp, Alu::Log, Alu::Tanh, Alu::Sigmoid, Alu::Gelu, Alu::Erf,
                Alu::Sin, Alu::Cos, Alu::Sqrt, Alu::Floor}) {
    kir::Kernel k = elementwise_f32(1000, f);
    auto art = backend().compile(k, {});
    ASSERT_TRUE(art.has_value()) << art.error().message;
    EXPECT_NE((*art)->llvm_ir.find("<8 x float>"), std::string::npos)
        << kir::alu_name(f) << " did not vectorize\n"
        << kir::print_kernel(k) << (*art)->llvm_ir;
    EXPECT_EQ(first_external_call((*art)->llvm_ir), "") << kir::alu_name(f) << "\n"
                                                        << (*art)->llvm_ir;
  }
}

TEST(CpuBackend, SumOverContiguousAxisVectorizes) {
  if (!host_has_avx2()) GTEST_SKIP() << "host has no AVX2";
  for (kir::ReduceOp op : {kir::ReduceOp::Sum, kir::ReduceOp::Max}) {
    auto a = std::make_shared<kir::ExprArena>();
    const kir::Expr* idx =
        a->alu(Alu::Add, DType::i64,
               {a->alu(Alu::Mul, DType::i64, {a->var(0), a->index(512)}), a->var(1)});
    const kir::Expr* r = a->reduce(op, DType::f32, a->load(0, DType::f32, idx), {1}, {512});
    kir::Kernel k =
        make_kernel("rowsum", {in_param(DType::f32, {64, 512}), out_param(DType::f32, {64})}, {64},
                    a, {{1, a->var(0), r}});
    auto art = backend().compile(k, {});
    ASSERT_TRUE(art.has_value()) << art.error().message;
    EXPECT_NE((*art)->llvm_ir.find("<8 x float>"), std::string::npos)
        << kir::reduce_op_name(op) << "\n"
        << kir::print_kernel(k) << (*art)->llvm_ir;
  }
}

TEST(CpuBackend, TuneParamsBecomeLoopMetadata) {
  kir::Kernel k = elementwise_f32(1000, Alu::Exp);
  auto a4 = backend().compile(k, TuneParams{.vector_width = 4, .unroll = 1});
  ASSERT_TRUE(a4.has_value()) << a4.error().message;
  EXPECT_NE((*a4)->llvm_ir.find("<4 x float>"), std::string::npos) << (*a4)->llvm_ir;
  EXPECT_EQ((*a4)->llvm_ir.find("<8 x float>"), std::string::npos) << (*a4)->llvm_ir;
  // Same results as the backend's own choice.
  std::vector<double> x, y;
  for (int j = 0; j < 1000; ++j) {
    x.push_back(j * 0.01 - 5);
    y.push_back(1 + j % 7);
  }
  auto r1 = run_kernel(k, {Buffer(DType::f32, x), Buffer(DType::f32, y)});
  auto r2 = run_kernel(k, {Buffer(DType::f32, x), Buffer(DType::f32, y)}, TuneParams{2, 3});
  ASSERT_EQ(r1.size(), 3u);
  ASSERT_EQ(r2.size(), 3u);
  EXPECT_EQ(r1[2].bytes, r2[2].bytes);
}

TEST(CpuBackend, ArtifactsHaveUniqueSymbolsAndStayValid) {
  kir::Kernel k = elementwise_f32(16, Alu::Abs, "same name");
  auto a1 = backend().compile(k, {});
  auto a2 = backend().compile(k, {});
  ASSERT_TRUE(a1 && a2);
  EXPECT_NE((*a1)->symbol, (*a2)->symbol);
  EXPECT_EQ((*a1)->outer_extent, 16);
  EXPECT_GT((*a1)->compile_ms, 0);
  std::vector<float> x(16, -2), y(16, 3), out(16, 0);
  void* bufs[] = {x.data(), y.data(), out.data()};
  (*a1)->fn(bufs, 0, 16);
  for (float v : out) EXPECT_EQ(v, 7);
}

TEST(CpuBackend, InvalidKernelsAreErrorsNotAborts) {
  auto a = std::make_shared<kir::ExprArena>();
  const kir::Expr* i = a->var(0);
  // exp on an integer dtype
  kir::Kernel bad_op =
      make_kernel("bad_op", {in_param(DType::i32, {4}), out_param(DType::i32, {4})}, {4}, a,
                  {{1, i, a->alu(Alu::Exp, DType::i32, {a->load(0, DType::i32, i)})}});
  auto r1 = backend().compile(bad_op, {});
  ASSERT_FALSE(r1.has_value());
  EXPECT_NE(r1.error().message.find("'exp' on i32"), std::string::npos) << r1.error().message;
  // a store to a parameter that does not exist
  kir::Kernel bad_buf = make_kernel("bad_buf", {in_param(DType::f32, {4})}, {4}, a,
                                    {{3, i, a->load(0, DType::f32, i)}});
  auto r2 = backend().compile(bad_buf, {});
  ASSERT_FALSE(r2.has_value());
  EXPECT_NE(r2.error().message.find("kernel 'bad_buf'"), std::string::npos) << r2.error().message;
  // a reduce variable used outside its reduce
  kir::Kernel bad_var =
      make_kernel("bad_var", {in_param(DType::f32, {4}), out_param(DType::f32, {4})}, {4}, a,
                  {{1, i, a->load(0, DType::f32, a->var(7))}});
  auto r3 = backend().compile(bad_var, {});
  ASSERT_FALSE(r3.has_value());
  EXPECT_NE(r3.error().message.find("v7"), std::string::npos) << r3.error().message;
}

TEST(CpuBackend, KernelRunsConcurrentlyOnDisjointRanges) {
  const int64_t n = 4096;
  kir::Kernel k = elementwise_f32(n, Alu::Sigmoid);
  auto art = backend().compile(k, {});
  ASSERT_TRUE(art.has_value()) << art.error().message;
  std::vector<float> x(n), y(n, 3), out(n, 0);
  for (int64_t j = 0; j < n; ++j) x[j] = static_cast<float>(j % 97) * 0.1f - 4;
  void* bufs[] = {x.data(), y.data(), out.data()};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] { (*art)->fn(bufs, t * n / 4, (t + 1) * n / 4); });
  for (auto& th : threads) th.join();
  for (int64_t j = 0; j < n; ++j)
    ASSERT_NEAR(out[j], 3 / (1 + std::exp(-static_cast<double>(x[j]))) + 1, 1e-5) << j;
}

TEST(CpuBackend, CompilesConcurrently) {
  std::vector<std::thread> threads;
  std::vector<int> ok(4, 0);
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      kir::Kernel k = elementwise_f32(64 + t, Alu::Tanh, fmt::format("thread{}", t));
      auto art = backend().compile(k, {});
      if (!art) return;
      std::vector<float> x(64 + t, 0.5f), y(64 + t, 2), out(64 + t, 0);
      void* bufs[] = {x.data(), y.data(), out.data()};
      (*art)->fn(bufs, 0, 64 + t);
      ok[t] = std::abs(out.back() - (std::tanh(0.5f) * 2 + 1)) < 1e-6;
    });
  for (auto& th : threads) th.join();
  EXPECT_EQ(ok, std::vector<int>(4, 1));
}

}  // namespace
}  // namespace kiln::codegen::testing
