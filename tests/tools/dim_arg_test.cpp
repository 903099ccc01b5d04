// The tools' --dim arguments: `kiln run` and `kiln dump` read NAME=N, `kiln warm` NAME=N or
// NAME=LO..HI (one parser, read_dim_arg), and the sizes a warmed range runs (warm_sizes).
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "tools/commands.h"
#include "tools/graph_file.h"

namespace kiln::tools {
namespace {

TEST(DimArg, ReadsANameAndASizeOrARange) {
  auto one = read_dim_arg("b=5", /*ranges=*/false);
  ASSERT_TRUE(one.has_value()) << one.error().message;
  EXPECT_EQ(one->name, "b");
  EXPECT_EQ(one->lo, 5);
  EXPECT_EQ(one->hi, 5);
  auto marked = read_dim_arg("?seq=0", false);
  ASSERT_TRUE(marked.has_value()) << marked.error().message;
  EXPECT_EQ(marked->name, "seq");
  EXPECT_EQ(marked->lo, 0);
  auto range = read_dim_arg("b=3..40", /*ranges=*/true);
  ASSERT_TRUE(range.has_value()) << range.error().message;
  EXPECT_EQ(range->lo, 3);
  EXPECT_EQ(range->hi, 40);
  auto single = read_dim_arg("b=7", true);
  ASSERT_TRUE(single.has_value());
  EXPECT_EQ(single->lo, 7);
  EXPECT_EQ(single->hi, 7);
}

TEST(DimArg, RefusesMalformedArgumentsNamingThemAndTheFormExpected) {
  for (const char* arg : {"b", "b=", "=5", "?=5", "b=-1", "b=x", "b=5x", "b=1..9"}) {
    auto dim = read_dim_arg(arg, /*ranges=*/false);
    ASSERT_FALSE(dim.has_value()) << arg;
    EXPECT_EQ(dim.error().message,
              std::string("--dim '") + arg + "': expected NAME=N, N a non-negative integer");
  }
  for (const char* arg : {"b", "b=9..3", "b=1..", "b=..4", "b=-2..4", "b=1...4", "b=1..4..5"}) {
    auto dim = read_dim_arg(arg, /*ranges=*/true);
    ASSERT_FALSE(dim.has_value()) << arg;
    EXPECT_EQ(dim.error().message,
              std::string("--dim '") + arg +
                  "': expected NAME=N or NAME=LO..HI, non-negative integers with LO <= HI");
  }
}

TEST(DimArg, ANameGivenTwiceIsAnError) {
  ir::KgSizes sizes;
  ASSERT_TRUE(parse_dim_arg("b=4", sizes).has_value());
  ASSERT_TRUE(parse_dim_arg("s=9", sizes).has_value());
  EXPECT_EQ(sizes, (ir::KgSizes{{"b", 4}, {"s", 9}}));
  auto again = parse_dim_arg("?b=5", sizes);
  ASSERT_FALSE(again.has_value());
  EXPECT_EQ(again.error().message, "--dim b is given twice");
  EXPECT_EQ(sizes.at("b"), 4);

  std::map<std::string, std::pair<int64_t, int64_t>> dims;
  ASSERT_TRUE(parse_warm_dim("b=1..100", dims).has_value());
  ASSERT_TRUE(parse_warm_dim("s=8", dims).has_value());
  EXPECT_EQ(dims.at("b"), (std::pair<int64_t, int64_t>{1, 100}));
  EXPECT_EQ(dims.at("s"), (std::pair<int64_t, int64_t>{8, 8}));
  auto twice = parse_warm_dim("s=2..3", dims);
  ASSERT_FALSE(twice.has_value());
  EXPECT_EQ(twice.error().message, "--dim s is given twice");
}

// A single size warms a second one of its power-of-two bucket; a range, each bucket it meets at
// its largest size in the range and the one below it (where that is in the bucket, the range and
// at least 2).
TEST(WarmSizes, ASizeAndASecondOfItsBucketOrEveryBucketOfARange) {
  using Sizes = std::vector<int64_t>;
  EXPECT_EQ(warm_sizes(5, 5), (Sizes{5, 6}));
  EXPECT_EQ(warm_sizes(8, 8), (Sizes{8, 7}));
  EXPECT_EQ(warm_sizes(2, 2), (Sizes{2, 3}));
  EXPECT_EQ(warm_sizes(1, 100), (Sizes{1, 2, 4, 3, 8, 7, 16, 15, 32, 31, 64, 63, 100, 99}));
  EXPECT_EQ(warm_sizes(0, 3), (Sizes{0, 1, 2, 3}));
  EXPECT_EQ(warm_sizes(5, 6), (Sizes{6, 5}));
  EXPECT_EQ(warm_sizes(0, 0), (Sizes{0, 3}));
  EXPECT_EQ(warm_sizes(17, 40), (Sizes{32, 31, 40, 39}));
}

}  // namespace
}  // namespace kiln::tools
