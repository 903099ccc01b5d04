// Dynamic GPU kernels (gpu_source.h): a kernel made dynamic is written at its size bucket's bound
// and takes the outer extent at run time (CUDA's last argument, GLSL's push constant), so every
// instance of a bucket has one text; launch_at sizes each launch; what cannot take its extent at
// run time is refused. The texts compile as GLSL (shaderc) and CUDA (NVRTC, ptxas).
#include <gtest/gtest.h>

#include "codegen/gpu/gpu_source.h"
#include "codegen/spirv/spirv_compiler.h"
#include "tests/codegen/gpu_test_kernels.h"
#include "tests/codegen/gpu_test_util.h"

namespace kiln::codegen::gpu {
namespace {

kir::Kernel dynamic(kir::Kernel k, int64_t bound) {
  k.dynamic_outer = true;
  k.dynamic_bound = bound;
  return k;
}

bool serves(const kir::Kernel& k, CheckMode check = CheckMode::none, bool tensor_cores = false) {
  return serves_any_outer_extent(k, kir::analyze_kernel(k), check, tensor_cores);
}

// out[i, j] = sum_k x[i, k] * w[k, j] + bias[j], the rows outermost.
kir::Kernel rows_matmul_kernel(int64_t m, int64_t n, int64_t kk) {
  kir::Kernel k;
  k.name = "rows_matmul";
  k.arena = std::make_shared<kir::ExprArena>();
  kir::ExprArena& a = *k.arena;
  const DType f = DType::f32, L = DType::i64;
  k.domain = {m, n};
  k.params = {{f, {m, kk}, false, "x"},
              {f, {kk, n}, false, "w"},
              {f, {n}, false, "bias"},
              {f, {m, n}, true, "y"}};
  const auto lin = [&](const kir::Expr* r, int64_t cols, const kir::Expr* c) {
    return a.alu(Alu::Add, L, {a.alu(Alu::Mul, L, {r, a.index(cols)}), c});
  };
  const kir::Expr* prod =
      a.alu(Alu::Mul, f,
            {a.load(0, f, lin(a.var(0), kk, a.var(2))), a.load(1, f, lin(a.var(2), n, a.var(1)))});
  const kir::Expr* r = a.reduce(ReduceOp::Sum, f, prod, {2}, {kk});
  k.stores.push_back(
      {3, lin(a.var(0), n, a.var(1)), a.alu(Alu::Add, f, {r, a.load(2, f, a.var(1))})});
  return k;
}

// out[v0] = x[v0] * 2 + 1 over one axis of n points.
kir::Kernel flat_kernel(int64_t n) {
  kir::Kernel k;
  k.name = "flat";
  k.arena = std::make_shared<kir::ExprArena>();
  kir::ExprArena& a = *k.arena;
  const DType f = DType::f32;
  k.domain = {n};
  k.params = {{f, {n}, false, "x"}, {f, {n}, true, "y"}};
  k.stores.push_back({1, a.var(0),
                      a.alu(Alu::Add, f,
                            {a.alu(Alu::Mul, f, {a.load(0, f, a.var(0)), a.constant(f, 2.0)}),
                             a.constant(f, 1.0)})});
  return k;
}

TEST(GpuDynamicSource, OneTextServesEveryInstanceOfABucket) {
  std::vector<std::pair<std::string, std::string>> cuda;
  const std::vector<std::pair<std::function<kir::Kernel(int64_t)>, const char*>> kinds = {
      {[](int64_t n) { return centered_kernel(n, 256); }, "row-reduce"},
      {[](int64_t n) { return column_kernel(DType::f32, n, 64, 32); }, "column-reduce"},
      {[](int64_t n) { return flat_kernel(n * 100); }, "elementwise"},
      {[](int64_t n) { return matmul_kernel(n, 32, 32, 24); }, "matmul-tiled"},
      {[](int64_t n) { return rows_matmul_kernel(n * 16, 40, 24); }, "matmul-tiled"},
  };
  for (const auto& [make, strategy] : kinds) {
    const kir::Kernel five = dynamic(make(5), make(8).domain[0]);
    kir::Kernel seven = dynamic(make(7), make(8).domain[0]);
    seven.name = five.name;  // not part of the kernel's identity
    ASSERT_TRUE(serves(five)) << five.name;
    for (Dialect d : {Dialect::glsl, Dialect::cuda}) {
      auto a = emit_source(five, {}, d), b = emit_source(seven, {}, d);
      ASSERT_TRUE(a && b) << five.name << ": " << (a ? b.error().message : a.error().message);
      EXPECT_EQ(a->text, b->text) << five.name << ": the instances of a bucket share one text";
      EXPECT_EQ(a->strategy, strategy);
      EXPECT_GT(a->launch.dynamic_tasks, 0);
      // The groups at the bound, and at each extent as many as its tasks need.
      const LaunchShape at_bound = launch_at(a->launch, five.dynamic_bound);
      EXPECT_EQ(at_bound.groups, a->launch.groups) << five.name;
      EXPECT_EQ(launch_at(a->launch, 0).groups, 1);
      EXPECT_LE(launch_at(a->launch, 5).groups, at_bound.groups);
      EXPECT_EQ(launch_at(a->launch, int64_t{1} << 30).groups, 65535);
      if (d == Dialect::cuda) {
        EXPECT_NE(a->text.find(", int kiln_extent)"), std::string::npos) << a->text;
        cuda.emplace_back(five.name, a->text);
      } else {
        EXPECT_NE(a->text.find("layout(push_constant) uniform KilnSizes { int outer; }"),
                  std::string::npos)
            << a->text;
        auto spv = spirv::compile_glsl(a->text, five.name, /*optimize=*/true);
        EXPECT_TRUE(spv.has_value())
            << five.name << ": " << (spv ? "" : spv.error().message) << "\n"
            << a->text;
      }
    }
    // The static kernel has no run-time extent.
    auto fixed = emit_source(make(5), {}, Dialect::glsl);
    ASSERT_TRUE(fixed.has_value());
    EXPECT_EQ(fixed->launch.dynamic_tasks, 0);
    EXPECT_EQ(fixed->text.find("kiln_sizes"), std::string::npos);
  }
  // A row per workgroup: tasks are rows.
  auto rows = emit_source(dynamic(centered_kernel(5, 256), 8), {}, Dialect::glsl);
  ASSERT_TRUE(rows.has_value());
  EXPECT_EQ(launch_at(rows->launch, 5).groups, 5);
  EXPECT_EQ(launch_at(rows->launch, 7).groups, 7);
  // Rows outermost: each workgroup task is a row tile's column tile.
  auto mm = emit_source(dynamic(rows_matmul_kernel(80, 40, 24), 128), {}, Dialect::glsl);
  ASSERT_TRUE(mm.has_value()) << mm.error().message;
  const int64_t tile = mm->launch.outer_block;
  EXPECT_GE(tile, 16);
  EXPECT_EQ(launch_at(mm->launch, 80).groups, (80 + tile - 1) / tile * ((40 + tile - 1) / tile));
  if (test_nvrtc()) expect_cuda_batch_compiles(cuda, "dynamic");
}

// A dynamic kernel of one axis takes four lanes by its bound (a multiple of four): the units
// cover ceil(extent / 4), a unit wholly below the extent moves as vectors, and the last one of an
// extent that is no multiple of four takes its points one at a time.
TEST(GpuDynamicSource, TheOnlyAxisOfADynamicKernelTakesVectorLanesAndARaggedTail) {
  const kir::Kernel k = dynamic(flat_kernel(70001), 1 << 17);
  std::vector<std::pair<std::string, std::string>> cuda;
  for (Dialect d : {Dialect::glsl, Dialect::cuda}) {
    auto src = emit_source(k, {}, d);
    ASSERT_TRUE(src.has_value()) << src.error().message;
    const std::string& t = src->text;
    const std::string extent =
        d == Dialect::cuda ? "((int)(kiln_extent))" : "int(kiln_sizes.outer)";
    EXPECT_NE(t.find(d == Dialect::cuda ? "float4" : "vec4"), std::string::npos) << t;
    EXPECT_NE(t.find("unit < ((" + extent + " + (3)) / (4))"), std::string::npos) << t;
    EXPECT_NE(t.find("if (point + (4) <= " + extent + ")"), std::string::npos) << t;
    EXPECT_NE(t.find("for (int one = point; point + (4) > " + extent + " && one < " + extent +
                     "; ++one)"),
              std::string::npos)
        << t;
    // Four points a unit: ceil(ceil(n / 4) / 256) workgroups of 256 threads.
    EXPECT_EQ(src->launch.outer_block, 4);
    EXPECT_EQ(src->launch.group_size, 256);
    EXPECT_EQ(launch_at(src->launch, 7).groups, 1);
    EXPECT_EQ(launch_at(src->launch, 1025).groups, 2);    // 257 units
    EXPECT_EQ(launch_at(src->launch, 70001).groups, 69);  // 17501 units
    EXPECT_EQ(launch_at(src->launch, 1 << 17).groups, src->launch.groups);
    if (d == Dialect::cuda) {
      cuda.emplace_back("ragged", t);
    } else {
      auto spv = spirv::compile_glsl(t, "ragged", /*optimize=*/true);
      EXPECT_TRUE(spv.has_value()) << (spv ? "" : spv.error().message) << "\n" << t;
    }
  }
  // Asked for by the tuner at a small bound too; a bound of 2 is no multiple of four.
  TuneParams four;
  four.vector_loads = 4;
  kir::Kernel small_kernel = dynamic(flat_kernel(5), 8);
  small_kernel.name = "flat_small";
  auto small = emit_source(small_kernel, four, Dialect::cuda);
  ASSERT_TRUE(small.has_value()) << small.error().message;
  EXPECT_NE(small->text.find("float4"), std::string::npos) << small->text;
  cuda.emplace_back("ragged_small", small->text);
  auto two = emit_source(dynamic(flat_kernel(2), 2), four, Dialect::glsl);
  ASSERT_FALSE(two.has_value());
  EXPECT_NE(two.error().message.find("not a multiple of 4"), std::string::npos)
      << two.error().message;
  if (test_nvrtc()) expect_cuda_batch_compiles(cuda, "ragged");
}

TEST(GpuDynamicSource, WhatCannotTakeItsExtentAtRunTimeKeepsItsSize) {
  EXPECT_FALSE(serves(dynamic(centered_kernel(5, 256), 8), CheckMode::validate)) << "checked code";
  EXPECT_TRUE(serves(dynamic(matmul_kernel(4, 32, 32, 32), 4))) << "the tiled matmul";
  EXPECT_FALSE(
      serves(dynamic(matmul_kernel(4, 32, 32, 32), 4), CheckMode::none, /*tensor_cores=*/true))
      << "the tensor-core matmul";
  EXPECT_FALSE(serves(dynamic(centered_kernel(1, 256), 1))) << "extent 1";
  EXPECT_FALSE(serves(dynamic(centered_kernel(5, 256), 0))) << "no bound";
  EXPECT_FALSE(serves(dynamic(centered_kernel(9, 256), 8))) << "past its bound";
  EXPECT_FALSE(serves(dynamic(centered_kernel(5, 256), int64_t{1} << 31))) << "bound over an int";
  EXPECT_FALSE(serves(centered_kernel(5, 256))) << "not dynamic";
  // A whole-input reduction shares its only axis among threads: no row variable to scale.
  EXPECT_FALSE(serves(dynamic(reduce_kernel(DType::f32, 0, 1000), 1024)));
  auto checked =
      emit_source(dynamic(centered_kernel(5, 256), 8), {}, Dialect::cuda, CheckMode::validate);
  ASSERT_FALSE(checked.has_value());
  EXPECT_NE(checked.error().message.find("keeps its size"), std::string::npos)
      << checked.error().message;
  auto mma = emit_source(dynamic(matmul_kernel(4, 32, 32, 32), 4), {}, Dialect::cuda,
                         CheckMode::none, nullptr, /*tensor_cores=*/true);
  EXPECT_FALSE(mma.has_value()) << "the tensor-core matmul keeps its size";
  // Splits read the row count.
  TuneParams split;
  split.splits = 2;
  auto asked = emit_source(dynamic(centered_kernel(5, 256), 8), split, Dialect::glsl);
  ASSERT_FALSE(asked.has_value());
  EXPECT_NE(asked.error().message.find("not split"), std::string::npos) << asked.error().message;
}

}  // namespace
}  // namespace kiln::codegen::gpu
