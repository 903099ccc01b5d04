// The autotuner's scorer on hand-computed samples.
#include <gtest/gtest.h>

#include <cmath>

#include "autotune/scorer.h"

namespace kiln::autotune {
namespace {

TEST(Scorer, OneSampleIsItself) {
  EXPECT_DOUBLE_EQ(score({2.5}), 2.5);
  EXPECT_DOUBLE_EQ(min_of({2.5}), 2.5);
  EXPECT_DOUBLE_EQ(median_of({2.5}), 2.5);
}

TEST(Scorer, EqualSamplesHaveNoNoisePenalty) {
  EXPECT_DOUBLE_EQ(score({4, 4, 4, 4}), 4);
}

TEST(Scorer, HandComputed) {
  // {1, 2, 3}: min 1, median 2, mean 2, population stddev sqrt(2/3).
  const double expected = (0.8 * 1 + 0.2 * 2) * (1 + std::sqrt(2.0 / 3.0) / 2);
  EXPECT_DOUBLE_EQ(score({3, 1, 2}), expected);
  // {1, 1, 3, 3}: min 1, median 2 (mean of the middle two), mean 2, stddev 1.
  EXPECT_DOUBLE_EQ(score({3, 1, 3, 1}), (0.8 + 0.4) * 1.5);
  EXPECT_DOUBLE_EQ(median_of({3, 1, 3, 1}), 2);
}

TEST(Scorer, NoiseCostsMoreThanItsMinimumGains) {
  // Same best time, one noisy: the steady one wins.
  EXPECT_LT(score({1.0, 1.0, 1.0}), score({1.0, 1.6, 0.99}));
}

TEST(Scorer, EmptyIsInfinite) {
  EXPECT_TRUE(std::isinf(score({})));
  EXPECT_TRUE(std::isinf(min_of({})));
  EXPECT_TRUE(std::isinf(median_of({})));
}

TEST(Scorer, ZeroTimesScoreZero) {
  EXPECT_DOUBLE_EQ(score({0, 0}), 0);
}

}  // namespace
}  // namespace kiln::autotune
