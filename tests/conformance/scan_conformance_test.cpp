// Conformance of cumsum (a kernel-IR scan): every dtype the builder allows, every axis and
// direction, empty and length-1 axes, fused producers, on the device under test vs reference;
// and a row of 2^20 f32 elements against its running sum in double precision.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <cmath>

#include "harness.h"

namespace kiln::testing {
namespace {

using ir::DType;
using ir::Op;

// One graph per dtype: the four exclusive/reverse combinations along every axis (and -1).
TEST(ScanConformance, EveryDtypeAxisAndDirection) {
  int allowed = 0;
  for (DType t : ir::kAllDTypes) {
    Case c;
    const ir::Node* x = c.input(t, {4, 5, 6});
    std::vector<const ir::Node*> outs;
    for (int64_t axis : {0, 1, 2, -1})
      for (bool exclusive : {false, true})
        for (bool reverse : {false, true}) {
          auto y = c.b.cumsum(x, axis, exclusive, reverse);
          if (!y) {
            EXPECT_EQ(t, DType::boolean) << y.error().message;
            EXPECT_EQ(y.error().message, "cumsum: needs a numeric dtype, got bool");
            continue;
          }
          outs.push_back(*y);
        }
    if (outs.empty()) continue;
    ++allowed;
    expect_matches_reference(c, outs, fmt::format("cumsum:{}", ir::dtype_name(t)));
  }
  EXPECT_EQ(allowed, 8);  // every dtype but bool
}

TEST(ScanConformance, EmptyAndLengthOneAxesAndRankOne) {
  for (DType t : {DType::f32, DType::i32}) {
    Case c;
    const ir::Node* one = c.input(t, {3, 1, 4});
    const ir::Node* empty = c.input(t, {2, 0, 3});
    const ir::Node* vec = c.input(t, {7});
    std::vector<const ir::Node*> outs;
    for (bool exclusive : {false, true})
      for (bool reverse : {false, true}) {
        for (const ir::Node* x : {one, empty})
          for (int64_t axis : {0, 1})
            outs.push_back(c.b.cumsum(x, axis, exclusive, reverse).value());
        outs.push_back(c.b.cumsum(vec, 0, exclusive, reverse).value());
      }
    expect_matches_reference(c, outs, fmt::format("cumsum small:{}", ir::dtype_name(t)));
  }
}

// Elementwise producers fused into the scan's kernel, a consumer reading its buffer, and a
// scan of a scan along another axis.
TEST(ScanConformance, FusedProducersAndConsumers) {
  for (DType t : {DType::f32, DType::f16, DType::i64}) {
    Case c;
    const ir::Node* x = c.input(t, {6, 33});
    const ir::Node* w = c.input(t, {33});
    const ir::Node* p = c.b.binary(Op::Add, c.b.binary(Op::Mul, x, x).value(), w).value();
    const ir::Node* s = c.b.cumsum(p, 1, false, false).value();
    const ir::Node* y = c.b.binary(Op::Sub, s, x).value();
    const ir::Node* z = c.b.cumsum(s, 0, true, true).value();
    expect_matches_reference(c, {y, z, p}, fmt::format("cumsum fused:{}", ir::dtype_name(t)));
  }
}

// A long row: one sequential f32 sum of 2^20 terms |N(0,1)| + 0.25, within what sequential rounding
// gives (about sqrt(n) * 2^-24 relative; 1e-3 is far from any wrong sum). A thread-per-row GPU
// scan on a driver that cuts loops at 65535 iterations refuses it with a clear error instead.
TEST(ScanConformance, LongRowF32) {
  constexpr int64_t kLen = int64_t{1} << 20;
  Case c;
  const ir::Node* x = c.input(DType::f32, {kLen}, /*positive=*/true);
  const ir::Node* y = c.b.cumsum(x, 0, false, false).value();
  const ir::Node* r = c.b.cumsum(x, 0, true, true).value();
  auto dut = device_under_test();
  if (!dut) {
    if (device_under_test_name().starts_with("cuda")) GTEST_SKIP() << dut.error().message;
    FAIL() << dut.error().message;
  }
  runtime::Bindings in{{x, (*dut)->pool()->from_host(c.inputs[0].second).value()}};
  auto got = (*dut)->execute(c.graph, {y, r}, in);
  if (!got && device_under_test_name().starts_with("vulkan")) {
    EXPECT_NE(got.error().message.find("loop iterations"), std::string::npos)
        << got.error().message;
    GTEST_SKIP() << "one thread per row runs over lavapipe's loop budget: " << got.error().message;
  }
  ASSERT_TRUE(got.has_value()) << got.error().message;
  const ir::HostTensor& xs = c.inputs[0].second;
  ir::HostTensor fwd = (*got)[0]->to_host(), rev = (*got)[1]->to_host();
  double acc = 0;
  int bad = 0;
  for (int64_t i = 0; i < kLen && bad < 5; ++i) {
    acc += xs.get(i);
    if (std::abs(fwd.get(i) - acc) > 1e-3 * std::max(1.0, acc))
      ADD_FAILURE() << "element " << i << ": " << fwd.get(i) << " vs " << acc << " (" << ++bad
                    << ")";
  }
  EXPECT_GT(acc, kLen / 4.0);  // the inputs are positive: the sum grows with the row
  acc = 0;
  for (int64_t i = kLen; i-- > 0 && bad < 5;) {
    if (std::abs(rev.get(i) - acc) > 1e-3 * std::max(1.0, acc))
      ADD_FAILURE() << "reverse exclusive element " << i << ": " << rev.get(i) << " vs " << acc
                    << " (" << ++bad << ")";
    acc += xs.get(i);
  }
}

}  // namespace
}  // namespace kiln::testing
