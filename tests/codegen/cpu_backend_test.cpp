// The cpu backend as a whole: host description, vectorized output, schedule metadata, errors,
// concurrent compiles, and artifacts that stay valid.
#include <gtest/gtest.h>

#include <fmt/format.h>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <latch>
#include <thread>

#include "codegen/cpu/object_code.h"
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

// Compiles kernels[i] with params[i] into slot i from `threads` threads at once (released
// together); a failed compile leaves its slot empty and its message in errors[i]. `wall_ms` is
// the time from the release to the last compile's end.
std::vector<std::shared_ptr<const CpuArtifact>> compile_concurrently(
    CpuBackend& b, const std::vector<kir::Kernel>& kernels, const std::vector<TuneParams>& params,
    int threads, std::vector<std::string>& errors, double& wall_ms) {
  std::vector<std::shared_ptr<const CpuArtifact>> out(kernels.size());
  errors.assign(kernels.size(), "");
  std::atomic<size_t> next{0};
  std::latch go(threads + 1);
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t)
    pool.emplace_back([&] {
      go.arrive_and_wait();
      for (size_t i = next++; i < kernels.size(); i = next++) {
        auto art = b.compile(kernels[i], params[i]);
        if (art)
          out[i] = *art;
        else
          errors[i] = art.error().message;
      }
    });
  const auto start = std::chrono::steady_clock::now();
  go.arrive_and_wait();
  for (auto& th : pool) th.join();
  wall_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  return out;
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

// Each buffer's accesses carry scoped noalias metadata, so a short innermost loop (8 here, where
// LLVM refuses runtime overlap checks) still vectorizes.
TEST(CpuBackend, ShortInnerLoopsVectorizeWithoutOverlapChecks) {
  if (!host_has_avx2()) GTEST_SKIP() << "host has no AVX2";
  auto a = std::make_shared<kir::ExprArena>();
  auto idx = a->alu(Alu::Add, DType::i64,
                    {a->alu(Alu::Mul, DType::i64, {a->var(0), a->index(64)}),
                     a->alu(Alu::Add, DType::i64,
                            {a->alu(Alu::Mul, DType::i64, {a->var(1), a->index(8)}), a->var(2)})});
  const kir::Expr* v = a->load(0, DType::f32, idx);
  for (int i = 0; i < 16; ++i)
    v = a->alu(Alu::Relu, DType::f32,
               {a->alu(Alu::Add, DType::f32,
                       {a->alu(Alu::Mul, DType::f32, {v, a->constant(DType::f32, 1.5)}),
                        a->constant(DType::f32, -0.25)})});
  kir::Kernel k =
      make_kernel("chain", {in_param(DType::f32, {8, 8, 8}), out_param(DType::f32, {8, 8, 8})},
                  {8, 8, 8}, a, {{1, idx, v}});
  auto art = backend().compile(k, {});
  ASSERT_TRUE(art.has_value()) << art.error().message;
  const std::string& ir = (*art)->llvm_ir;
  EXPECT_NE(ir.find("<8 x float>"), std::string::npos) << ir;
  EXPECT_NE(ir.find("!noalias"), std::string::npos) << ir;
  EXPECT_EQ(ir.find("vector.memcheck"), std::string::npos) << ir;
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
    // 8 lanes with AVX2, 16 where AVX-512 is preferred.
    EXPECT_TRUE((*art)->llvm_ir.find("<8 x float>") != std::string::npos ||
                (*art)->llvm_ir.find("<16 x float>") != std::string::npos)
        << kir::reduce_op_name(op) << "\n"
        << kir::print_kernel(k) << (*art)->llvm_ir;
  }
}

// A point that is a chain of 75 dependent operations (small_ops' shape: x = relu(x * c + d),
// repeated) runs 8 vectors at once by default: with 4 lanes forced, the vector loop steps 32
// points. The values equal a scalar loop's (run_kernel also checks uneven chunks), at a size
// with a remainder.
TEST(CpuBackend, ADeepChainRunsSeveralVectorsAtOnce) {
  auto a = std::make_shared<kir::ExprArena>();
  const kir::Expr* v = a->load(0, DType::f32, a->var(0));
  for (int i = 0; i < 25; ++i) {
    v = a->alu(Alu::Mul, DType::f32, {v, a->constant(DType::f32, 1.0001)});
    v = a->alu(Alu::Add, DType::f32, {v, a->constant(DType::f32, i % 2 ? 0.0001 : -0.0002)});
    v = a->alu(Alu::Max, DType::f32, {v, a->constant(DType::f32, 0.0)});
  }
  const int64_t n = 515;
  kir::Kernel k = make_kernel("chain", {in_param(DType::f32, {n}), out_param(DType::f32, {n})}, {n},
                              a, {{1, a->var(0), v}});
  auto art = backend().compile(k, TuneParams{.vector_width = 4, .unroll = 0});
  ASSERT_TRUE(art.has_value()) << art.error().message;
  EXPECT_NE((*art)->llvm_ir.find("add nuw i64 %index, 32"), std::string::npos) << (*art)->llvm_ir;
  // The caller cuts its range at multiples of one vector iteration: 4 lanes x 8.
  EXPECT_EQ((*art)->chunk_align, 32);
  std::vector<double> x;
  for (int64_t j = 0; j < n; ++j) x.push_back(static_cast<double>(j % 13) * 0.25 - 1);
  auto out = run_kernel(k, {Buffer(DType::f32, x)}, TuneParams{.vector_width = 4, .unroll = 0});
  ASSERT_EQ(out.size(), 2u);
  for (int64_t j = 0; j < n; ++j) {
    float want = static_cast<float>(x[static_cast<size_t>(j)]);
    for (int i = 0; i < 25; ++i) {
      want = want * 1.0001f;
      want = want + (i % 2 ? 0.0001f : -0.0002f);
      want = std::max(want, 0.0f);
    }
    ASSERT_EQ(out[1].get(j), want) << j;
  }
}

// A one-axis kernel's range is cut at multiples of its vector body's iteration (lanes x
// interleave; 16 x 4 where LLVM chooses), so that no chunk runs only its loop's remainder; a
// kernel of more axes, whose range is its rows, anywhere.
TEST(CpuBackend, OneAxisKernelsAreCutAtWholeVectorIterations) {
  auto chosen = backend().compile(elementwise_f32(1000, Alu::Exp), {});
  ASSERT_TRUE(chosen.has_value()) << chosen.error().message;
  EXPECT_EQ((*chosen)->chunk_align, 16 * 4);
  auto tuned =
      backend().compile(elementwise_f32(1000, Alu::Exp), TuneParams{.vector_width = 8, .unroll = 2});
  ASSERT_TRUE(tuned.has_value()) << tuned.error().message;
  EXPECT_EQ((*tuned)->chunk_align, 8 * 2);
  auto short_loop = backend().compile(elementwise_f32(4, Alu::Exp), {});
  ASSERT_TRUE(short_loop.has_value()) << short_loop.error().message;
  EXPECT_EQ((*short_loop)->chunk_align, 1);
  auto a = std::make_shared<kir::ExprArena>();
  const kir::Expr* row = a->alu(Alu::Mul, DType::i64, {a->var(0), a->index(100)});
  const kir::Expr* at = a->alu(Alu::Add, DType::i64, {row, a->var(1)});
  kir::Kernel rows =
      make_kernel("rows", {in_param(DType::f32, {30, 100}), out_param(DType::f32, {30, 100})},
                  {30, 100}, a, {{1, at, a->load(0, DType::f32, at)}});
  auto two_axes = backend().compile(rows, {});
  ASSERT_TRUE(two_axes.has_value()) << two_axes.error().message;
  EXPECT_EQ((*two_axes)->chunk_align, 1);
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

// A loop of fewer iterations than a vector holds gets no vector body, epilogue or overlap
// checks (each a copy of the whole body: a large fused kernel over [4] compiled three times
// over), even when the tuner asks for lanes; longer loops still vectorize. Results are the same.
TEST(CpuBackend, LoopsShorterThanAVectorAreNotVectorized) {
  for (TuneParams params : {TuneParams{}, TuneParams{.vector_width = 16, .unroll = 2}}) {
    auto short_loop = backend().compile(elementwise_f32(4, Alu::Relu), params);
    ASSERT_TRUE(short_loop.has_value()) << short_loop.error().message;
    EXPECT_EQ((*short_loop)->llvm_ir.find("vector.body"), std::string::npos)
        << (*short_loop)->llvm_ir;
    auto long_loop = backend().compile(elementwise_f32(64, Alu::Relu), params);
    ASSERT_TRUE(long_loop.has_value()) << long_loop.error().message;
    EXPECT_NE((*long_loop)->llvm_ir.find("vector.body"), std::string::npos)
        << (*long_loop)->llvm_ir;
  }
  const std::vector<double> x{-2, 0.5, -0.25, 3}, y{4, -1, 2, 0.5};
  auto out = run_kernel(elementwise_f32(4, Alu::Relu), {Buffer(DType::f32, x), Buffer(DType::f32, y)});
  ASSERT_EQ(out.size(), 3u);
  const std::vector<double> want{1, 0.5, 1, 2.5};  // relu(x) * y + 1
  EXPECT_EQ(out[2].bytes, Buffer(DType::f32, want).bytes);
}

// Past cpu::kLargeKernelOps operations a kernel keeps its IR as emitted, and past
// cpu::kMaxHoistedConstants distinct constants it compiles without early machine LICM (they
// would only be spilled again); it computes the same values.
TEST(CpuBackend, LargeKernelsCompileWithoutHoistingAndComputeTheSame) {
  constexpr int64_t n = 100;
  auto a = std::make_shared<kir::ExprArena>();
  const kir::Expr* i = a->var(0);
  const kir::Expr* v = a->load(0, DType::f32, i);
  double added = 0;
  for (int op = 0; op < 300; ++op) {  // distinct small integer constants: exact in f32
    const double c = op % 2 ? -op : op;
    added += c;
    v = a->alu(Alu::Add, DType::f32, {v, a->constant(DType::f32, c)});
  }
  kir::Kernel k = make_kernel("long", {in_param(DType::f32, {n}), out_param(DType::f32, {n})}, {n},
                              a, {{1, i, v}});
  ASSERT_GT(kir::kernel_exprs(k).size(), cpu::kLargeKernelOps);
  ASSERT_GT(cpu::distinct_constants(kir::kernel_exprs(k)), cpu::kMaxHoistedConstants);
  auto art = backend().compile(k, {});
  ASSERT_TRUE(art.has_value()) << art.error().message;
  EXPECT_EQ((*art)->llvm_ir.rfind("; kiln: a kernel of ", 0), 0u) << (*art)->llvm_ir.substr(0, 200);
  EXPECT_EQ((*art)->llvm_ir.find("vector.body"), std::string::npos);  // not yet vectorized
  std::vector<double> x, want;
  for (int64_t j = 0; j < n; ++j) {
    x.push_back(static_cast<double>(j - 50));
    want.push_back(static_cast<double>(j - 50) + added);
  }
  auto out = run_kernel(k, {Buffer(DType::f32, x)});
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[1].bytes, Buffer(DType::f32, want).bytes);
}

// Two compiles of one kernel get one symbol and the same bytes (nothing about the order of
// compiles leaks into an object), and both stay callable: each links into a JITDylib of its own.
TEST(CpuBackend, ArtifactsOfOneKernelAreEqualAndStayValid) {
  kir::Kernel k = elementwise_f32(16, Alu::Abs, "same name");
  auto a1 = backend().compile(k, {});
  auto a2 = backend().compile(k, {});
  ASSERT_TRUE(a1 && a2);
  EXPECT_EQ((*a1)->symbol, "kiln_same_name");
  EXPECT_EQ((*a1)->symbol, (*a2)->symbol);
  EXPECT_TRUE((*a1)->object == (*a2)->object);
  EXPECT_NE((*a1)->fn, (*a2)->fn) << "two links, two copies of the code";
  EXPECT_EQ((*a1)->outer_extent, 16);
  EXPECT_GT((*a1)->compile_ms, 0);
  std::vector<float> x(16, -2), y(16, 3), out(16, 0);
  void* bufs[] = {x.data(), y.data(), out.data()};
  for (const auto& a : {*a1, *a2}) {
    std::fill(out.begin(), out.end(), 0.0f);
    a->fn(bufs, 0, 16);
    for (float v : out) EXPECT_EQ(v, 7);
  }
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

// 16 different kernels compiled from 4 threads at once on one backend: every one runs right,
// the compiles' LLVM work overlaps (only the link is serialized), and each object is byte for
// byte the one the kernel gets when compiled alone.
TEST(CpuBackend, ConcurrentCompilesRunRightAndMatchSerialObjects) {
  struct Op {
    Alu alu;
    double (*ref)(double);
  };
  const Op ops[] = {{Alu::Neg, [](double x) { return -x; }},
                    {Alu::Exp, [](double x) { return std::exp(x); }},
                    {Alu::Tanh, [](double x) { return std::tanh(x); }},
                    {Alu::Sqrt, [](double x) { return std::sqrt(x); }},
                    {Alu::Abs, [](double x) { return std::abs(x); }},
                    {Alu::Floor, [](double x) { return std::floor(x); }},
                    {Alu::Sin, [](double x) { return std::sin(x); }},
                    {Alu::Cos, [](double x) { return std::cos(x); }}};
  std::vector<kir::Kernel> kernels;
  std::vector<TuneParams> params;
  std::vector<Op> kernel_ops;
  for (int i = 0; i < 16; ++i) {
    const Op& op = ops[i % 8];
    kernels.push_back(elementwise_f32(i < 8 ? 1000 : 37, op.alu, fmt::format("c{}", i)));
    params.push_back(i % 3 == 0 ? TuneParams{.vector_width = 4, .unroll = 2} : TuneParams{});
    kernel_ops.push_back(op);
  }
  // Backends of their own: nothing one compiled may change what the other compiles.
  auto concurrent = CpuBackend::create(), serial = CpuBackend::create();
  ASSERT_TRUE(concurrent.has_value()) << concurrent.error().message;
  ASSERT_TRUE(serial.has_value()) << serial.error().message;

  std::vector<std::string> errors;
  double wall_ms = 0;
  const std::vector<std::shared_ptr<const CpuArtifact>> arts =
      compile_concurrently(**concurrent, kernels, params, 4, errors, wall_ms);
  ASSERT_EQ(errors, std::vector<std::string>(kernels.size(), ""));
  for (size_t i = 0; i < kernels.size(); ++i) {
    const int64_t n = kernels[i].domain[0];
    std::vector<float> x(n), y(n), out(n, -99);
    for (int64_t j = 0; j < n; ++j) {
      x[j] = 0.05f + static_cast<float>(j % 61) * 0.04f;
      y[j] = static_cast<float>(1 + j % 5);
    }
    void* bufs[] = {x.data(), y.data(), out.data()};
    arts[i]->fn(bufs, 0, n);
    for (int64_t j = 0; j < n; ++j) {
      const double want = kernel_ops[i].ref(x[j]) * y[j] + 1;
      ASSERT_NEAR(out[j], want, 2e-5 * std::max(1.0, std::abs(want)))
          << "kernel " << i << " (" << kir::alu_name(kernel_ops[i].alu) << ") element " << j;
    }
  }
  // compile_ms runs from a compile's start to its end: serialized compiles add up to at most
  // the wall time; 4 threads at once (even on one core) to about 4 times it.
  double sum_ms = 0;
  for (const auto& art : arts) sum_ms += art->compile_ms;
  EXPECT_GT(sum_ms, 1.5 * wall_ms) << "the compiles ran one after another";

  // Alone, one after another in reverse order: each kernel gets the same symbol and the same
  // object byte for byte, whatever compiled before or beside it.
  for (size_t i = kernels.size(); i-- > 0;) {
    auto alone = (*serial)->compile(kernels[i], params[i]);
    ASSERT_TRUE(alone.has_value()) << alone.error().message;
    ASSERT_EQ((*alone)->symbol, arts[i]->symbol);
    EXPECT_EQ((*alone)->llvm_ir, arts[i]->llvm_ir) << "kernel " << i;
    EXPECT_TRUE((*alone)->object == arts[i]->object)
        << "kernel " << i << " (" << (*alone)->symbol << "): the object compiled alone has "
        << (*alone)->object.size() << " bytes, the concurrent one " << arts[i]->object.size();
  }
}

}  // namespace
}  // namespace kiln::codegen::testing
