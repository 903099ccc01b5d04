// Conformance of trilu (the upper or lower triangle of the last two axes) on the device under
// test vs the reference interpreter: every dtype, both triangles, diagonals inside and outside the
// matrix, wide, tall and batched shapes, and trilu fused between elementwise ops and views.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <vector>

#include "harness.h"

namespace kiln::testing {
namespace {

using ir::DType;
using ir::Op;

void check_trilu(DType t, const ir::Shape& shape, int64_t k, bool upper) {
  Case c;
  const ir::Node* x = c.input(t, shape);
  auto y = c.b.trilu(x, k, upper);
  ASSERT_TRUE(y.has_value()) << y.error().message;
  expect_matches_reference(
      c, {*y},
      fmt::format("trilu {}{} k={} upper={}", ir::dtype_name(t), ir::shape_str(shape), k, upper));
}

TEST(TriluConformance, EveryShapeAndDiagonal) {
  const std::vector<ir::Shape> shapes = {{5, 5}, {3, 7}, {7, 3}, {2, 3, 4, 5}, {1, 6}, {0, 4}};
  for (const ir::Shape& s : shapes)
    for (int64_t k : {-9, -2, -1, 0, 1, 3, 9})
      for (bool upper : {true, false}) check_trilu(DType::f32, s, k, upper);
}

TEST(TriluConformance, EveryDtype) {
  for (DType t : ir::kAllDTypes)
    for (bool upper : {true, false}) check_trilu(t, {2, 4, 6}, upper ? 1 : -1, upper);
}

// A causal mask: exp of a computed matrix, its lower triangle, a row sum and a transpose of the
// triangle: trilu lowered inside the kernels of its producer and of its readers.
TEST(TriluConformance, FusedWithProducersAndReaders) {
  for (DType t : {DType::f32, DType::f64, DType::f16}) {
    Case c;
    const ir::Node* a = c.input(t, {3, 6, 6});
    const ir::Node* b = c.input(t, {6});
    auto sum = c.b.binary(Op::Add, a, b);
    ASSERT_TRUE(sum.has_value());
    auto e = c.b.unary(Op::Exp, *sum);
    ASSERT_TRUE(e.has_value());
    auto lower = c.b.trilu(*e, 0, false);
    ASSERT_TRUE(lower.has_value());
    auto rows = c.b.reduce(Op::Sum, *lower, std::vector<int64_t>{2}, true);
    ASSERT_TRUE(rows.has_value());
    auto norm = c.b.binary(Op::Div, *lower, *rows);
    ASSERT_TRUE(norm.has_value());
    auto tr = c.b.permute(*norm, {0, 2, 1});
    ASSERT_TRUE(tr.has_value());
    auto upper = c.b.trilu(*tr, 1, true);  // of a view: the triangle's indices are the view's
    ASSERT_TRUE(upper.has_value());
    expect_matches_reference(c, {*norm, *upper}, fmt::format("fused trilu {}", ir::dtype_name(t)));
  }
}

}  // namespace
}  // namespace kiln::testing
