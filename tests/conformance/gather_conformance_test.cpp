// Conformance of gather and gather_elements (alone, fused with their producers and readers, and
// with computed indices) on the device under test vs the reference interpreter. The seeded index
// inputs lie in [-8, 8] while the gathered axes are 4 to 6 long: negative indices and indices
// clamped at both ends are all exercised.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <utility>
#include <vector>

#include "harness.h"

namespace kiln::testing {
namespace {

using ir::DType;
using ir::Op;

struct GatherShape {
  ir::Shape idx;
  int64_t axis;
};

// Every index shape and axis (both index dtypes) in f32; every data dtype once, alternating the
// index dtype: the index arithmetic does not depend on the data's dtype, the loads do.
std::vector<std::pair<DType, GatherShape>> variants(const std::vector<GatherShape>& shapes,
                                                    const GatherShape& every_dtype) {
  std::vector<std::pair<DType, GatherShape>> out;
  for (const GatherShape& s : shapes) out.emplace_back(DType::f32, s);
  for (DType t : ir::kAllDTypes)
    if (t != DType::f32) out.emplace_back(t, every_dtype);
  return out;
}

void check_gather(Op op, DType t, const GatherShape& s, DType it) {
  const ir::Shape x_shape{4, 5, 6};
  Case c;
  const ir::Node* x = c.input(t, x_shape);
  const ir::Node* idx = c.input(it, s.idx);
  auto y = op == Op::Gather ? c.b.gather(x, idx, s.axis) : c.b.gather_elements(x, idx, s.axis);
  ASSERT_TRUE(y.has_value()) << y.error().message;
  expect_matches_reference(
      c, {*y},
      fmt::format("{} {}{} by {}{} axis {}", ir::op_name(op), ir::dtype_name(t),
                  ir::shape_str(x_shape), ir::dtype_name(it), ir::shape_str(s.idx), s.axis));
}

TEST(GatherConformance, EveryDtypeAxisAndIndexShape) {
  const std::vector<GatherShape> shapes = {{{3}, 0}, {{2, 3}, 1}, {{7}, 2},    {{}, 1},
                                           {{}, -1}, {{0}, 0},    {{2, 2}, -3}};
  int n = 0;
  for (const auto& [t, s] : variants(shapes, {{2, 3}, 1})) {
    if (t == DType::f32) {
      for (DType it : {DType::i32, DType::i64}) check_gather(Op::Gather, t, s, it);
    } else {
      check_gather(Op::Gather, t, s, n++ % 2 ? DType::i32 : DType::i64);
    }
  }
}

TEST(GatherConformance, ElementsEveryDtypeAndAxis) {
  const std::vector<GatherShape> shapes = {
      {{3, 5, 6}, 0}, {{4, 2, 6}, 1}, {{2, 3, 9}, 2}, {{4, 5, 6}, -1}, {{0, 5, 6}, 0}};
  int n = 0;
  for (const auto& [t, s] : variants(shapes, {{2, 3, 9}, 2})) {
    if (t == DType::f32) {
      for (DType it : {DType::i32, DType::i64}) check_gather(Op::GatherElements, t, s, it);
    } else {
      check_gather(Op::GatherElements, t, s, n++ % 2 ? DType::i32 : DType::i64);
    }
  }
}

// An embedding lookup with computed data and indices, read by an elementwise chain and by a
// reduction: every value is lowered inside the kernels that read it.
TEST(GatherConformance, FusedWithProducersAndReaders) {
  for (DType t : {DType::f32, DType::f64, DType::f16}) {
    Case c;
    const ir::Node* table = c.input(t, {6, 8});
    const ir::Node* a = c.input(DType::i64, {3, 4});
    const ir::Node* b = c.input(DType::i64, {4});
    auto ids = c.b.binary(Op::Add, a, b);  // computed indices, in [-16, 16]
    ASSERT_TRUE(ids.has_value());
    auto scaled = c.b.unary(Op::Tanh, table);  // computed data
    ASSERT_TRUE(scaled.has_value());
    auto e = c.b.gather(*scaled, *ids, 0);  // [3,4,8]
    ASSERT_TRUE(e.has_value());
    auto two = c.b.scalar(2.0, t);
    auto y = c.b.binary(Op::Mul, *e, *two);
    ASSERT_TRUE(y.has_value());
    auto z = c.b.unary(Op::Exp, *y);
    ASSERT_TRUE(z.has_value());
    auto s = c.b.reduce(Op::Sum, *e, std::vector<int64_t>{2}, true);
    ASSERT_TRUE(s.has_value());
    auto w = c.b.binary(Op::Sub, *z, *s);
    ASSERT_TRUE(w.has_value());
    expect_matches_reference(c, {*w}, fmt::format("fused embedding {}", ir::dtype_name(t)));

    // torch.gather of a softmax's rows by computed columns, then a view of the result.
    auto sm = c.b.softmax(table, -1);
    ASSERT_TRUE(sm.has_value());
    auto cols = c.b.binary(Op::Mul, a, b);
    ASSERT_TRUE(cols.has_value());
    auto rows = c.b.slice(*cols, 0, 0, 3, 1);  // [3,4] -> idx of [6,8]'s rank, fewer rows
    ASSERT_TRUE(rows.has_value());
    auto picked = c.b.gather_elements(*sm, *rows, 1);
    ASSERT_TRUE(picked.has_value());
    auto flipped = c.b.flip(*picked, {0});
    ASSERT_TRUE(flipped.has_value());
    expect_matches_reference(c, {*flipped, *picked},
                             fmt::format("fused gather_elements {}", ir::dtype_name(t)));
  }
}

// A gather of a gather (the second's indices read through the first) and a gather whose data
// is a view: an index load feeding another index load.
TEST(GatherConformance, Nested) {
  for (DType it : {DType::i32, DType::i64}) {
    Case c;
    const ir::Node* x = c.input(DType::f32, {5, 7});
    const ir::Node* perm = c.input(it, {9});
    const ir::Node* idx = c.input(it, {2, 3});
    auto chosen = c.b.gather(perm, idx, 0);  // [2,3] indices, read through indices
    ASSERT_TRUE(chosen.has_value());
    auto t = c.b.permute(x, {1, 0});  // [7,5]
    ASSERT_TRUE(t.has_value());
    auto y = c.b.gather(*t, *chosen, 1);  // [7,2,3]
    ASSERT_TRUE(y.has_value());
    expect_matches_reference(c, {*y}, fmt::format("nested gather, {} indices", ir::dtype_name(it)));
  }
}

}  // namespace
}  // namespace kiln::testing
