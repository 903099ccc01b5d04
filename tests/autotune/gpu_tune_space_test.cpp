// The GPU tuning space and the schedule fields the GPU emitter reads: which knobs each kernel
// kind gets, that every candidate emits a different launch than the default in both dialects,
// and the clear errors for fields that do not apply.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include "autotune/tune_space.h"
#include "codegen/gpu/gpu_source.h"
#include "tests/autotune/tune_test_kernels.h"

namespace kiln::autotune {
namespace {

using codegen::GpuReduce;
using ir::DType;
using codegen::TuneParams;
using codegen::gpu::Dialect;
using codegen::gpu::emit_source;

// Default first, priorities ascending, no repeated params, and every candidate emits source in
// both dialects whose text differs from the default's (no candidate repeats the default).
void expect_distinct_launches(const kir::Kernel& k, const std::vector<TuneCandidate>& space) {
  ASSERT_FALSE(space.empty());
  EXPECT_EQ(space[0].params, TuneParams{});
  std::set<std::string> texts;
  for (size_t i = 0; i < space.size(); ++i) {
    if (i > 0) {
      EXPECT_LE(space[i - 1].priority, space[i].priority) << i;
    }
    for (Dialect d : {Dialect::cuda, Dialect::glsl}) {
      auto src = emit_source(k, space[i].params, d);
      ASSERT_TRUE(src.has_value()) << space[i].params.str() << ": " << src.error().message;
      if (d == Dialect::glsl) {
        EXPECT_TRUE(texts.insert(src->text).second) << space[i].params.str() << " repeats a launch";
      }
    }
  }
}

TEST(GpuTuneSpace, ElementwiseKernelsTuneBlockSizeAndItemsPerThread) {
  const kir::Kernel k = testing::elementwise_kernel(64, 256);  // 16384 points: one lane by default
  const std::vector<TuneCandidate> space = gpu_tune_space(k);
  expect_distinct_launches(k, space);
  // The default + (4 blocks x 3 items) x (1 or 4 lanes), less the default's shape.
  ASSERT_EQ(space.size(), 24u);
  EXPECT_EQ(space[1].params.str(), "block_size=256 items_per_thread=2 vector_loads=1");
  EXPECT_EQ(space[2].params.str(), "block_size=256 items_per_thread=1 vector_loads=4");
  for (size_t i = 1; i < space.size(); ++i) {
    EXPECT_EQ(space[i].params.reduce, GpuReduce::heuristic);
    EXPECT_EQ(space[i].params.tile, 0);
    EXPECT_TRUE(space[i].params.vector_loads == 1 || space[i].params.vector_loads == 4);
    EXPECT_FALSE(space[i].params.block_size == 256 && space[i].params.items_per_thread == 1 &&
                 space[i].params.vector_loads == 1);
  }
  // Without a 16-byte access (f16 elements) there are no lanes to try.
  const kir::Kernel half = testing::elementwise_kernel(64, 256, DType::f16);
  const std::vector<TuneCandidate> half_space = gpu_tune_space(half);
  expect_distinct_launches(half, half_space);
  EXPECT_EQ(half_space.size(), 12u);
  for (const TuneCandidate& c : half_space) EXPECT_EQ(c.params.vector_loads, 0) << c.params.str();
}

TEST(GpuTuneSpace, LargeElementwiseKernelsDefaultToFourLanesAndTryOne) {
  const kir::Kernel k = testing::elementwise_kernel(256, 1024);  // 262144 points
  auto def = emit_source(k, {}, Dialect::cuda);
  ASSERT_TRUE(def.has_value()) << def.error().message;
  EXPECT_NE(def->text.find("float4"), std::string::npos);
  EXPECT_EQ(def->launch.groups, 262144 / 4 / 256);
  const std::vector<TuneCandidate> space = gpu_tune_space(k);
  expect_distinct_launches(k, space);
  EXPECT_EQ(space[1].params.str(), "block_size=256 items_per_thread=2 vector_loads=4");
  EXPECT_EQ(space[2].params.str(), "block_size=256 items_per_thread=1 vector_loads=1");
  EXPECT_EQ(gpu_tune_space(k, Level::minimal)[2].params.vector_loads, 1);
}

TEST(GpuTuneSpace, ItemsPerThreadSpreadsPointsOverTheGrid) {
  const kir::Kernel k = testing::elementwise_kernel(64, 256);  // 16384 points
  TuneParams p;
  p.block_size = 128;
  p.items_per_thread = 4;
  auto src = emit_source(k, p, Dialect::cuda);
  ASSERT_TRUE(src.has_value()) << src.error().message;
  EXPECT_EQ(src->launch.group_size, 128);
  EXPECT_EQ(src->launch.groups, 16384 / (128 * 4));
  EXPECT_NE(src->text.find("item < 4"), std::string::npos) << src->text;
  auto plain = emit_source(k, {}, Dialect::cuda);
  ASSERT_TRUE(plain.has_value());
  EXPECT_EQ(plain->launch.group_size, 256);
  EXPECT_EQ(plain->launch.groups, 64);
}

TEST(GpuTuneSpace, SmallKernelsKeepBlocksTheyCanFill) {
  const kir::Kernel k = testing::elementwise_kernel(1, 100);
  for (const TuneCandidate& c : gpu_tune_space(k))
    EXPECT_LE(std::max(c.params.block_size, 1) * std::max(c.params.items_per_thread, 1), 128)
        << c.params.str();
}

TEST(GpuTuneSpace, RowReductionsTuneTheBlockAndTheReductionStrategy) {
  const kir::Kernel k = testing::row_reduce_kernel(64, 512);
  auto plain = emit_source(k, {}, Dialect::glsl);
  ASSERT_TRUE(plain.has_value());
  ASSERT_EQ(plain->strategy, "row-reduce");
  const std::vector<TuneCandidate> space = gpu_tune_space(k);
  expect_distinct_launches(k, space);
  int workgroup = 0, thread = 0;
  for (size_t i = 1; i < space.size(); ++i) {
    const TuneParams& p = space[i].params;
    EXPECT_LE(p.block_size, 512) << p.str();  // no wider than the row
    auto src = emit_source(k, p, Dialect::glsl);
    ASSERT_TRUE(src.has_value());
    if (p.reduce == GpuReduce::thread) {
      ++thread;
      EXPECT_EQ(src->strategy, "elementwise");
    } else {
      ++workgroup;
      EXPECT_EQ(src->strategy, "row-reduce");
      EXPECT_EQ(src->launch.group_size, p.block_size);
    }
  }
  EXPECT_EQ(workgroup, 4);  // 32, 64, 128, 512: 256 is the default's
  EXPECT_EQ(thread, 3);
}

TEST(GpuTuneSpace, FewLongRowsAreSplitOverWorkgroupsAndTuneTheSplit) {
  const kir::Kernel k = testing::row_reduce_kernel(2, 100000);
  auto def = emit_source(k, {}, Dialect::cuda);
  ASSERT_TRUE(def.has_value()) << def.error().message;
  EXPECT_EQ(def->launch.groups, 2 * 32);  // 32 workgroups per row: 64 groups, 8+ elements a thread
  EXPECT_GT(def->scratch_bytes, 0);
  const std::vector<TuneCandidate> space = gpu_tune_space(k);
  expect_distinct_launches(k, space);
  std::vector<int> splits;
  for (const TuneCandidate& c : space)
    if (c.params.splits != 0) splits.push_back(c.params.splits);
  EXPECT_EQ(splits, (std::vector<int>{16, 64, 4, 256, 1}));  // nearest to the heuristic's 32 first
  TuneParams one;
  one.splits = 1;
  auto unsplit = emit_source(k, one, Dialect::cuda);
  ASSERT_TRUE(unsplit.has_value());
  EXPECT_EQ(unsplit->launch.groups, 2);
  EXPECT_EQ(unsplit->scratch_bytes, 0);
  // Many rows need no split: none by default, none offered.
  for (const TuneCandidate& c : gpu_tune_space(testing::row_reduce_kernel(64, 512)))
    EXPECT_EQ(c.params.splits, 0) << c.params.str();
}

TEST(GpuTuneSpace, MatmulsTuneTheTile) {
  const kir::Kernel k = testing::matmul_kernel(128, 128, 64);
  const std::vector<TuneCandidate> space = gpu_tune_space(k);
  expect_distinct_launches(k, space);
  std::vector<int> tiles;
  for (size_t i = 1; i < space.size(); ++i) tiles.push_back(space[i].params.tile);
  EXPECT_EQ(tiles, (std::vector<int>{32, 128, 16}));  // nearest to 64 first; 64 is the default
  TuneParams p;
  p.tile = 32;
  auto src = emit_source(k, p, Dialect::cuda);
  ASSERT_TRUE(src.has_value());
  EXPECT_EQ(src->launch.groups, 4 * 4);
  EXPECT_EQ(src->launch.group_size, 256);
}

TEST(GpuTuneSpace, LevelsCapTheSpace) {
  const kir::Kernel k = testing::elementwise_kernel(64, 256);
  EXPECT_EQ(gpu_tune_space(k, Level::minimal).size(), 3u);
  EXPECT_EQ(gpu_tune_space(k, Level::balanced).size(), 6u);
  EXPECT_EQ(gpu_tune_space(k, Level::full).size(), gpu_tune_space(k).size());
}

TEST(GpuTuneSpace, FieldsThatDoNotApplyAreClearErrors) {
  const auto error_of = [](const kir::Kernel& k, TuneParams p) {
    auto src = emit_source(k, p, Dialect::glsl);
    return src ? std::string("no error") : src.error().message;
  };
  TuneParams p;
  p.reduce = GpuReduce::thread;
  EXPECT_EQ(error_of(testing::elementwise_kernel(4, 4), p),
            "gpu codegen: kernel ew: reduce=thread: the kernel has no reduction (reduce=thread)");
  p = {};
  p.items_per_thread = 2;
  EXPECT_NE(error_of(testing::matmul_kernel(64, 64, 64), p).find("items_per_thread applies to elementwise kernels"),
            std::string::npos);
  p = {};
  p.tile = 32;
  EXPECT_NE(error_of(testing::elementwise_kernel(4, 4), p).find("tile applies to the tiled matmul"),
            std::string::npos);
  p = {};
  p.block_size = 48;
  EXPECT_NE(error_of(testing::elementwise_kernel(4, 4), p).find("block_size must be a power of two in [32, 1024]"),
            std::string::npos);
  p = {};
  p.vector_width = 8;
  EXPECT_NE(error_of(testing::elementwise_kernel(4, 4), p).find("cpu schedule fields"), std::string::npos);
  p = {};
  p.splits = 4;
  EXPECT_NE(error_of(testing::elementwise_kernel(4, 4), p).find("splits applies to row reductions"),
            std::string::npos);
  p.splits = 3;
  EXPECT_NE(error_of(testing::row_reduce_kernel(2, 100000), p).find("splits must be a power of two in [1, 256]"),
            std::string::npos);
  p = {};
  p.vector_loads = 4;
  EXPECT_NE(error_of(testing::row_reduce_kernel(2, 100000), p).find("vector_loads applies to elementwise kernels"),
            std::string::npos);
}

TEST(GpuTuneSpace, ParamsTextKeepsCpuKeysAndNamesGpuFields) {
  EXPECT_EQ(TuneParams{}.str(), "vector_width=0 unroll=0");
  TuneParams p;
  p.block_size = 128;
  p.items_per_thread = 4;
  EXPECT_EQ(p.str(), "block_size=128 items_per_thread=4");
  p = {};
  p.reduce = GpuReduce::thread;
  p.block_size = 64;
  EXPECT_EQ(p.str(), "block_size=64 reduce=thread");
  p = {};
  p.tile = 32;
  EXPECT_EQ(p.str(), "tile=32");
  p = {};
  p.vector_loads = 4;
  p.splits = 16;
  EXPECT_EQ(p.str(), "vector_loads=4 splits=16");
}

TEST(GpuTuneSpace, RowsSharedByThreadsAreNeverReducedPerThread) {
  // out[r, c] = x[r, c] / sum_c' x[r, c']: the sum is broadcast over the row, so a thread per
  // point would recompute it for every point. Only workgroup block sizes are offered.
  auto a = std::make_shared<kir::ExprArena>();
  const kir::Expr* idx = testing::flat(*a, a->var(0), 512, a->var(1));
  const kir::Expr* sum = a->reduce(kir::ReduceOp::Sum, ir::DType::f32,
                                   a->load(0, ir::DType::f32, testing::flat(*a, a->var(0), 512, a->var(2))),
                                   {2}, {512});
  const kir::Kernel k = kiln::testing::make_kernel(
      "norm", {testing::param(ir::DType::f32, {64, 512}, false, "x"), testing::param(ir::DType::f32, {64, 512}, true, "y")},
      {64, 512}, a, {{1, idx, a->alu(kir::Alu::Div, ir::DType::f32, {a->load(0, ir::DType::f32, idx), sum})}});
  ASSERT_EQ(emit_source(k, {}, Dialect::glsl)->strategy, "row-reduce");
  const std::vector<TuneCandidate> space = gpu_tune_space(k);
  expect_distinct_launches(k, space);
  EXPECT_GT(space.size(), 1u);
  for (const TuneCandidate& c : space) EXPECT_NE(c.params.reduce, GpuReduce::thread) << c.params.str();
}

}  // namespace
}  // namespace kiln::autotune
