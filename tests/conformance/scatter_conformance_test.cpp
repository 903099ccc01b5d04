// Conformance of scatter_elements (every reduction, alone, fused with its producers and readers,
// and with computed indices) on the device under test vs the reference interpreter. The seeded
// index inputs lie in [-8, 8] while the scattered axes are 4 to 6 long: negative indices,
// out-of-range indices (dropped) and duplicate indices (the last one wins for "none") are all
// exercised.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <string>
#include <vector>

#include "harness.h"

namespace kiln::testing {
namespace {

using ir::DType;
using ir::Op;

constexpr const char* kReductions[] = {"none", "add", "mul", "max", "min"};

struct ScatterShape {
  ir::Shape idx;
  int64_t axis;
};

void check_scatter(DType t, const ScatterShape& s, DType it, const std::string& reduction) {
  const ir::Shape x_shape{4, 5, 6};
  Case c;
  const ir::Node* x = c.input(t, x_shape);
  const ir::Node* idx = c.input(it, s.idx);
  const ir::Node* upd = c.input(t, s.idx);
  auto y = c.b.scatter_elements(x, idx, upd, s.axis, reduction);
  ASSERT_TRUE(y.has_value()) << y.error().message;
  expect_matches_reference(
      c, {*y},
      fmt::format("scatter_elements {} {}{} by {}{} axis {}", reduction, ir::dtype_name(t),
                  ir::shape_str(x_shape), ir::dtype_name(it), ir::shape_str(s.idx), s.axis));
}

// Every axis and index shape (longer and shorter than the data along the axis, shorter on the
// other axes, empty) with every reduction, in f32 with both index dtypes.
TEST(ScatterConformance, EveryReductionAxisAndIndexShape) {
  const std::vector<ScatterShape> shapes = {{{3, 5, 6}, 0},  {{4, 9, 6}, 1}, {{2, 3, 7}, 2},
                                            {{4, 5, 6}, -1}, {{0, 5, 6}, 0}, {{4, 1, 2}, 1}};
  for (const char* r : kReductions)
    for (const ScatterShape& s : shapes)
      for (DType it : {DType::i32, DType::i64}) check_scatter(DType::f32, s, it, r);
}

// Every data dtype: "none" for each (bool too), the folding reductions for numeric dtypes.
TEST(ScatterConformance, EveryDtype) {
  int n = 0;
  for (DType t : ir::kAllDTypes)
    for (const char* r : kReductions) {
      if (t == DType::boolean && std::string(r) != "none") continue;
      check_scatter(t, {{3, 7, 6}, 1}, n++ % 2 ? DType::i32 : DType::i64, r);
    }
}

// A scatter of computed updates at computed indices into computed data, read by an elementwise
// chain and a reduction, and a scatter of a scatter.
TEST(ScatterConformance, FusedWithProducersAndReaders) {
  for (DType t : {DType::f32, DType::f64, DType::f16}) {
    Case c;
    const ir::Node* x = c.input(t, {6, 8});
    const ir::Node* a = c.input(DType::i64, {3, 8});
    const ir::Node* b = c.input(DType::i64, {8});
    const ir::Node* u = c.input(t, {3, 8});
    auto ids = c.b.binary(Op::Add, a, b);  // computed indices, in [-16, 16]
    ASSERT_TRUE(ids.has_value());
    auto data = c.b.unary(Op::Tanh, x);
    ASSERT_TRUE(data.has_value());
    auto two = c.b.scalar(2.0, t);
    auto upd = c.b.binary(Op::Mul, u, *two);
    ASSERT_TRUE(upd.has_value());
    auto s = c.b.scatter_elements(*data, *ids, *upd, 0, "add");
    ASSERT_TRUE(s.has_value());
    auto e = c.b.unary(Op::Exp, *s);
    ASSERT_TRUE(e.has_value());
    auto rows = c.b.reduce(Op::Sum, *s, std::vector<int64_t>{1}, true);
    ASSERT_TRUE(rows.has_value());
    auto w = c.b.binary(Op::Sub, *e, *rows);
    ASSERT_TRUE(w.has_value());
    auto again = c.b.scatter_elements(*s, *ids, u, 0, "none");
    ASSERT_TRUE(again.has_value());
    auto m = c.b.scatter_elements(*again, *ids, *upd, 0, "max");
    ASSERT_TRUE(m.has_value());
    expect_matches_reference(c, {*w, *m}, fmt::format("fused scatter {}", ir::dtype_name(t)));
  }
}

// A long scattered axis (2000 updates per row) and the readers of a scatter in one graph.
TEST(ScatterConformance, LongAxis) {
  Case c;
  const ir::Node* x = c.input(DType::f32, {3, 64});
  const ir::Node* idx = c.input(DType::i32, {3, 2000});
  const ir::Node* upd = c.input(DType::f32, {3, 2000});
  auto y = c.b.scatter_elements(x, idx, upd, 1, "add");
  ASSERT_TRUE(y.has_value());
  auto z = c.b.scatter_elements(x, idx, upd, 1, "none");
  ASSERT_TRUE(z.has_value());
  expect_matches_reference(c, {*y, *z}, "scatter of 2000 updates per row");
}

}  // namespace
}  // namespace kiln::testing
