// The cpu tuning space and the tuning levels: default first, priorities, sizes per level, no
// duplicates, matmul vs loop kernels.
#include <gtest/gtest.h>

#include <algorithm>

#include "autotune/tune_space.h"
#include "tests/autotune/tune_test_kernels.h"

namespace kiln::autotune {
namespace {

using codegen::TuneParams;
using testing::elementwise_kernel;

void expect_well_formed(const std::vector<TuneCandidate>& space) {
  ASSERT_FALSE(space.empty());
  EXPECT_EQ(space[0].params, TuneParams{});
  EXPECT_EQ(space[0].group, "default");
  for (size_t i = 1; i < space.size(); ++i) {
    EXPECT_LE(space[i - 1].priority, space[i].priority) << i;
    for (size_t j = 0; j < i; ++j) EXPECT_NE(space[i].params, space[j].params) << i << " " << j;
  }
}

TEST(TuneSpace, LoopKernelsTuneVectorWidthAndUnroll) {
  const std::vector<TuneCandidate> space = cpu_tune_space(elementwise_kernel(64, 256));
  expect_well_formed(space);
  ASSERT_EQ(space.size(), 10u);  // the default + 3 widths x 3 unrolls
  // f32: 256-bit vectors are 8 lanes; unroll 2 is the centre.
  EXPECT_EQ(space[1].params.vector_width, 8);
  EXPECT_EQ(space[1].params.unroll, 2);
  EXPECT_EQ(space[1].group, "loop/vector_width=8");
  for (size_t i = 1; i < space.size(); ++i) {
    EXPECT_TRUE(space[i].params.vector_width == 4 || space[i].params.vector_width == 8 ||
                space[i].params.vector_width == 16);
    EXPECT_TRUE(space[i].params.unroll == 1 || space[i].params.unroll == 2 ||
                space[i].params.unroll == 4);
  }
}

TEST(TuneSpace, NaturalWidthFollowsTheWidestDtype) {
  const std::vector<TuneCandidate> space =
      cpu_tune_space(elementwise_kernel(8, 256, ir::DType::f64));
  expect_well_formed(space);
  EXPECT_EQ(space[1].params.vector_width, 4);
}

TEST(TuneSpace, ShortInnerLoopsLeaveOutWideVectors) {
  // Inner trip 3: only width 4 x unroll 1 stays.
  const std::vector<TuneCandidate> space = cpu_tune_space(elementwise_kernel(100, 3));
  expect_well_formed(space);
  ASSERT_EQ(space.size(), 2u);
  EXPECT_EQ(space[1].params.vector_width, 4);
  EXPECT_EQ(space[1].params.unroll, 1);
  // Trip 8: 4x1, 4x2, 8x1.
  EXPECT_EQ(cpu_tune_space(elementwise_kernel(100, 8)).size(), 4u);
  // A row reduction's inner loop is the reduction's: 512 long, everything stays.
  EXPECT_EQ(cpu_tune_space(testing::row_reduce_kernel(4, 512)).size(), 10u);
}

TEST(TuneSpace, MatmulTunesTheTileLanesOnly) {
  const std::vector<TuneCandidate> space = cpu_tune_space(testing::matmul_kernel(16, 24, 8));
  expect_well_formed(space);
  ASSERT_EQ(space.size(), 4u);
  std::vector<int> lanes;
  for (size_t i = 1; i < space.size(); ++i) {
    EXPECT_EQ(space[i].group, "matmul/lanes");
    EXPECT_EQ(space[i].params.unroll, 0);  // the matmul emitter does not read it
    lanes.push_back(space[i].params.vector_width);
  }
  EXPECT_EQ(lanes, (std::vector<int>{8, 16, 4}));
}

TEST(TuneSpace, LevelsCutTheSpaceByPriority) {
  const kir::Kernel k = elementwise_kernel(64, 256);
  const std::vector<TuneCandidate> all = cpu_tune_space(k);
  const size_t expected[] = {3, 6, 10, 10};
  for (Level l : kAllLevels) {
    const std::vector<TuneCandidate> cut = cpu_tune_space(k, l);
    expect_well_formed(cut);
    ASSERT_EQ(cut.size(), expected[static_cast<int>(l)]) << level_name(l);
    for (size_t i = 0; i < cut.size(); ++i) EXPECT_EQ(cut[i].params, all[i].params);
  }
  // A space smaller than the level's cap is whole.
  EXPECT_EQ(cpu_tune_space(testing::matmul_kernel(16, 24, 8), Level::balanced).size(), 4u);
}

// Where a large output could be written either way, the store kind the default does not use is
// the first candidate after it (so every level times it): ordinary stores where the rule streams
// (64 MiB out); neither for small outputs (codegen/cpu_streaming_store_test has the streaming
// side).
TEST(TuneSpace, LargeOutputsTimeTheOtherStoreKind) {
  const int64_t mib = int64_t{1} << 20;
  const kir::Kernel big = elementwise_kernel(4096, 4096);  // 64 MiB in, 64 MiB out
  const std::vector<TuneCandidate> streamed = cpu_tune_space(big, 32 * mib);
  expect_well_formed(streamed);
  ASSERT_EQ(streamed.size(), 11u);
  EXPECT_EQ(streamed[1].params.stores, codegen::CpuStores::cached);
  EXPECT_EQ(streamed[1].params.vector_width, 0);
  EXPECT_EQ(streamed[1].group, "loop/stores");
  EXPECT_EQ(streamed[1].params.str(), "vector_width=0 unroll=0 stores=cached");
  // Where the rule keeps ordinary stores (a cache of 8 times the buffers), streaming is not
  // timed: it pays only for buffers larger than the cache.
  for (const TuneCandidate& c : cpu_tune_space(big, 1536 * mib))
    EXPECT_EQ(c.params.stores, codegen::CpuStores::heuristic);
  EXPECT_EQ(cpu_tune_space(big, Level::balanced, 32 * mib)[1].params, streamed[1].params);
  for (const TuneCandidate& c : cpu_tune_space(elementwise_kernel(64, 256), 32 * mib))
    EXPECT_EQ(c.params.stores, codegen::CpuStores::heuristic);
  // A matmul's emitter has no such choice.
  for (const TuneCandidate& c : cpu_tune_space(testing::matmul_kernel(2048, 2048, 8), 32 * mib))
    EXPECT_EQ(c.params.stores, codegen::CpuStores::heuristic);
}

TEST(TuneLevel, NamesRoundTrip) {
  for (Level l : kAllLevels) EXPECT_EQ(parse_level(level_name(l)), l);
  EXPECT_EQ(parse_level("balanced"), Level::balanced);
  EXPECT_FALSE(parse_level("fast").has_value());
  EXPECT_FALSE(parse_level("").has_value());
}

TEST(TuneLevel, HigherLevelsSearchMore) {
  for (size_t i = 1; i < std::size(kAllLevels); ++i) {
    const LevelSettings lo = settings(kAllLevels[i - 1]), hi = settings(kAllLevels[i]);
    if (hi.max_candidates != 0) {
      EXPECT_GT(hi.max_candidates, lo.max_candidates);
    }
    EXPECT_GT(hi.min_sample_ms, lo.min_sample_ms);
    EXPECT_GT(hi.sampler.min_samples, lo.sampler.min_samples);
    EXPECT_GT(hi.sampler.max_samples, lo.sampler.max_samples);
    EXPECT_GT(hi.sampler.sample_budget, lo.sampler.sample_budget);
    EXPECT_GT(hi.sampler.roofline_fraction, lo.sampler.roofline_fraction);
    EXPECT_LE(hi.sampler.converge_rel, lo.sampler.converge_rel);
  }
  EXPECT_EQ(settings(Level::full).max_candidates, 0);  // the whole space
}

}  // namespace
}  // namespace kiln::autotune
