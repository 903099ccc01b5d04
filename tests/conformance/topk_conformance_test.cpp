// Conformance of topk (indices: a kernel-IR selection scan; values: a gather at them): every
// dtype the builder allows, every axis, k = 0, 1, n, largest and smallest, ties, NaN, fused
// producers, on the device under test vs reference; and a long row against a stable sort.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <numeric>

#include "harness.h"

namespace kiln::testing {
namespace {

using ir::DType;
using ir::Op;

// Indices and values of topk_indices(x, k, axis, largest) (values = gather_elements, as the API
// builds them).
void add_topk(Case& c, const ir::Node* x, int64_t k, int64_t axis, bool largest,
              std::vector<const ir::Node*>& outs) {
  const ir::Node* idx = c.b.topk_indices(x, k, axis, largest).value();
  outs.push_back(idx);
  outs.push_back(c.b.gather_elements(x, idx, axis).value());
}

// One graph per dtype: every axis (and -1), k = 0, 1, 3 and n, largest and smallest. Integer
// inputs lie in [-8, 8], so their rows hold many ties (ONNX: the lower index first).
TEST(TopKConformance, EveryDtypeAxisAndK) {
  int allowed = 0;
  for (DType t : ir::kAllDTypes) {
    Case c;
    const ir::Node* x = c.input(t, {4, 5, 6});
    std::vector<const ir::Node*> outs;
    for (int64_t axis : {0, 1, 2, -1}) {
      const int64_t n = x->shape[static_cast<size_t>(axis < 0 ? axis + 3 : axis)];
      for (int64_t k : {int64_t{0}, int64_t{1}, int64_t{3}, n})
        for (bool largest : {true, false}) {
          auto y = c.b.topk_indices(x, k, axis, largest);
          if (!y) {
            EXPECT_EQ(t, DType::boolean) << y.error().message;
            EXPECT_EQ(y.error().message, "topk_indices: needs a numeric dtype, got bool");
            continue;
          }
          outs.push_back(*y);
          outs.push_back(c.b.gather_elements(x, *y, axis).value());
        }
    }
    if (outs.empty()) continue;
    ++allowed;
    expect_matches_reference(c, outs, fmt::format("topk:{}", ir::dtype_name(t)));
  }
  EXPECT_EQ(allowed, 8);  // every dtype but bool
}

// Rows of equal values, NaNs (above every number: first when largest, last when smallest; two
// NaNs by index), infinities and signed zeros (equal: by index), in f32, f64 and f16.
TEST(TopKConformance, TiesNanAndInfinities) {
  const double kNan = std::nan("");
  const std::vector<double> row = {1.0, kNan, -0.0, 2.0,      kNan, 0.0,      2.0, -INFINITY,
                                   1.0, 2.0,  kNan, INFINITY, -3.0, INFINITY, 0.0, 1.0};
  for (DType t : {DType::f32, DType::f64, DType::f16, DType::bf16}) {
    Case c;
    const ir::Node* x = c.input(t, {3, 16});
    ir::HostTensor& xs = c.inputs[0].second;
    for (int64_t r = 0; r < 3; ++r)
      for (int64_t i = 0; i < 16; ++i)  // rows 1 and 2: the row rotated, so NaNs move
        xs.set(r * 16 + i, row[static_cast<size_t>((i + 5 * r) % 16)]);
    std::vector<const ir::Node*> outs;
    for (int64_t k : {1, 5, 16})
      for (bool largest : {true, false}) add_topk(c, x, k, 1, largest, outs);
    const ir::Node* xt = c.b.permute(x, {1, 0}).value();  // along axis 0 of a view
    add_topk(c, xt, 7, 0, true, outs);
    add_topk(c, xt, 7, 0, false, outs);
    expect_matches_reference(c, outs, fmt::format("topk ties/nan:{}", ir::dtype_name(t)));
  }
}

TEST(TopKConformance, EmptyAndLengthOneAxesAndRankOne) {
  for (DType t : {DType::f32, DType::i32, DType::u8}) {
    Case c;
    const ir::Node* one = c.input(t, {3, 1, 4});
    const ir::Node* empty = c.input(t, {2, 0, 3});
    const ir::Node* vec = c.input(t, {9});
    std::vector<const ir::Node*> outs;
    for (bool largest : {true, false}) {
      add_topk(c, one, 1, 1, largest, outs);
      add_topk(c, one, 0, 1, largest, outs);
      add_topk(c, empty, 0, 1, largest, outs);
      add_topk(c, empty, 2, 0, largest, outs);
      add_topk(c, vec, 4, 0, largest, outs);
      add_topk(c, vec, 9, -1, largest, outs);
    }
    expect_matches_reference(c, outs, fmt::format("topk small:{}", ir::dtype_name(t)));
  }
}

// Elementwise producers fused into the top-k kernel and a consumer of its values.
TEST(TopKConformance, FusedProducersAndConsumers) {
  for (DType t : {DType::f32, DType::f16, DType::i64}) {
    Case c;
    const ir::Node* x = c.input(t, {6, 33});
    const ir::Node* w = c.input(t, {33});
    const ir::Node* p = c.b.binary(Op::Add, c.b.binary(Op::Mul, x, x).value(), w).value();
    const ir::Node* idx = c.b.topk_indices(p, 5, 1, true).value();
    const ir::Node* v = c.b.gather_elements(p, idx, 1).value();
    const ir::Node* y = c.b.binary(Op::Sub, v, c.b.scalar(1.0, t).value()).value();
    const ir::Node* low = c.b.topk_indices(p, 4, 0, false).value();
    expect_matches_reference(c, {idx, y, low, p}, fmt::format("topk fused:{}", ir::dtype_name(t)));
  }
}

// Long f32 rows (k = 4 of 2^13 and of 2^17, positive values with many duplicates) against
// std::stable_sort. A thread-per-row GPU kernel on a driver that cuts loops at 65535 iterations
// refuses the longer one with a clear error instead (k * n iterations per row).
void expect_long_row(int64_t len) {
  constexpr int64_t kK = 4;
  Case c;
  const ir::Node* x = c.input(DType::f32, {len}, /*positive=*/true);
  ir::HostTensor& xs = c.inputs[0].second;
  for (int64_t i = 0; i < len; ++i) xs.set(i, std::round(xs.get(i) * 64.0));  // many ties
  const ir::Node* top = c.b.topk_indices(x, kK, 0, true).value();
  const ir::Node* bottom = c.b.topk_indices(x, kK, 0, false).value();
  auto dut = device_under_test();
  if (!dut) {
    if (device_under_test_name().starts_with("cuda")) GTEST_SKIP() << dut.error().message;
    FAIL() << dut.error().message;
  }
  runtime::Bindings in{{x, (*dut)->pool()->from_host(xs).value()}};
  auto got = (*dut)->execute(c.graph, {top, bottom}, in);
  if (!got && device_under_test_name().starts_with("vulkan") && len * kK > 65535) {
    EXPECT_NE(got.error().message.find("loop iterations"), std::string::npos)
        << got.error().message;
    GTEST_SKIP() << "one thread per row runs over lavapipe's loop budget: " << got.error().message;
  }
  ASSERT_TRUE(got.has_value()) << got.error().message;
  const auto sorted = [&](bool largest) {
    std::vector<int64_t> order(static_cast<size_t>(len));
    std::iota(order.begin(), order.end(), int64_t{0});
    std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
      return largest ? xs.get(a) > xs.get(b) : xs.get(a) < xs.get(b);
    });
    return order;
  };
  const std::vector<int64_t> down = sorted(true), up = sorted(false);
  ir::HostTensor t = (*got)[0]->to_host(), b = (*got)[1]->to_host();
  for (int64_t j = 0; j < kK; ++j) {
    EXPECT_EQ(t.get(j), static_cast<double>(down[static_cast<size_t>(j)])) << "largest " << j;
    EXPECT_EQ(b.get(j), static_cast<double>(up[static_cast<size_t>(j)])) << "smallest " << j;
  }
}

TEST(TopKConformance, LongRowF32) {
  expect_long_row(int64_t{1} << 13);
}
TEST(TopKConformance, VeryLongRowF32) {
  expect_long_row(int64_t{1} << 17);
}

}  // namespace
}  // namespace kiln::testing
