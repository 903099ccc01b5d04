// Conformance of movement ops (alone: a copy kernel; fused: read by an elementwise op), matmul
// and the composites, on cpu vs reference.
#include <gtest/gtest.h>

#include <fmt/format.h>
#include <functional>

#include "harness.h"

namespace kiln::testing {
namespace {

using ir::DType;
using ir::Op;
using View = std::function<ir::NodeResult(ir::Builder&, const ir::Node*)>;

void check_view(const std::string& what, ir::Shape shape, const View& view) {
  for (DType t : {DType::f32, DType::i32, DType::f64, DType::boolean}) {
    Case c;
    const ir::Node* x = c.input(t, shape);
    auto v = view(c.b, x);
    ASSERT_TRUE(v.has_value()) << what << ": " << v.error().message;
    expect_matches_reference(c, {*v}, what + " alone:" + std::string(ir::dtype_name(t)));
    if (t == DType::f32) {
      auto two = c.b.scalar(2.0, t);
      auto fused = c.b.binary(Op::Mul, *v, *two);
      ASSERT_TRUE(fused.has_value());
      expect_matches_reference(c, {*fused}, what + " fused");
    }
  }
}

TEST(ViewsConformance, Reshape) {
  check_view("reshape [4,6]->[2,12]", {4, 6}, [](auto& b, auto x) { return b.reshape(x, {2, 12}); });
  check_view("reshape [4,6]->[-1,3]", {4, 6}, [](auto& b, auto x) { return b.reshape(x, {-1, 3}); });
  check_view("reshape [2,3,4]->[24]", {2, 3, 4}, [](auto& b, auto x) { return b.reshape(x, {24}); });
  check_view("reshape after permute", {2, 3, 4}, [](auto& b, auto x) -> ir::NodeResult {
    auto p = b.permute(x, {2, 0, 1});
    if (!p) return p;
    return b.reshape(*p, {4, 6});
  });
}

TEST(ViewsConformance, PermuteExpand) {
  check_view("permute", {2, 3, 4}, [](auto& b, auto x) { return b.permute(x, {2, 0, 1}); });
  check_view("expand [3,1]->[2,3,5]", {3, 1}, [](auto& b, auto x) { return b.expand(x, {2, 3, 5}); });
}

TEST(ViewsConformance, Slice) {
  check_view("slice 1:5:2", {4, 7}, [](auto& b, auto x) { return b.slice(x, 1, 1, 5, 2); });
  check_view("slice ::-1", {4, 7}, [](auto& b, auto x) {
    return b.slice(x, 0, std::nullopt, std::nullopt, -1);
  });
  check_view("slice -3:", {4, 7}, [](auto& b, auto x) { return b.slice(x, -1, -3, std::nullopt, 1); });
  check_view("slice 5:0:-2", {4, 7}, [](auto& b, auto x) { return b.slice(x, 1, 5, 0, -2); });
}

TEST(ViewsConformance, PadConcatFlipRollUnfold) {
  check_view("pad", {3, 4}, [](auto& b, auto x) { return b.pad(x, {1, 0}, {2, 3}, 1.0); });
  check_view("flip", {3, 4, 2}, [](auto& b, auto x) { return b.flip(x, {0, 2}); });
  check_view("roll", {3, 5}, [](auto& b, auto x) { return b.roll(x, {1, -2}, {0, 1}); });
  check_view("unfold", {3, 9}, [](auto& b, auto x) { return b.unfold(x, 1, 3, 2); });
  check_view("concat", {3, 4}, [](auto& b, auto x) -> ir::NodeResult {
    auto f = b.flip(x, {1});
    if (!f) return f;
    return b.concat({x, *f, x}, 1);
  });
}

// Concats of more than 16 operands run as trees of concats (passes.h: split_wide_concats): 300
// computed rows of one input, 40 inputs of uneven widths along an inner axis, 17 (one more than a
// chain), and a wide concat read by an elementwise op.
TEST(ViewsConformance, WideConcats) {
  for (DType t : {DType::f32, DType::i32}) {
    Case c;
    const ir::Node* x = c.input(t, {300, 5});
    std::vector<const ir::Node*> rows;
    for (int64_t i = 0; i < 300; ++i) {
      auto row = c.b.slice(x, 0, 299 - i, 300 - i, 1);
      ASSERT_TRUE(row.has_value()) << row.error().message;
      auto k = c.b.scalar(static_cast<double>(i % 7), t);
      ASSERT_TRUE(k.has_value());
      auto scaled = c.b.binary(Op::Add, *row, *k);
      ASSERT_TRUE(scaled.has_value()) << scaled.error().message;
      rows.push_back(*scaled);
    }
    auto stacked = c.b.concat(rows, 0);
    ASSERT_TRUE(stacked.has_value()) << stacked.error().message;
    std::vector<const ir::Node*> columns;
    for (int64_t i = 0; i < 40; ++i) columns.push_back(c.input(t, {3, i % 3 + 1}));
    auto wide = c.b.concat(columns, 1);
    ASSERT_TRUE(wide.has_value()) << wide.error().message;
    auto seventeen =
        c.b.concat(std::vector<const ir::Node*>(columns.begin(), columns.begin() + 17), 1);
    ASSERT_TRUE(seventeen.has_value()) << seventeen.error().message;
    expect_matches_reference(c, {*stacked, *wide, *seventeen},
                             fmt::format("wide concats {}", ir::dtype_name(t)));
  }
  Case c;
  std::vector<const ir::Node*> pieces;
  for (int i = 0; i < 50; ++i) pieces.push_back(c.input(DType::f32, {2, 1, 8}));
  auto cat = c.b.concat(pieces, 1);
  ASSERT_TRUE(cat.has_value()) << cat.error().message;
  auto y = c.b.unary(Op::Tanh, *cat);
  ASSERT_TRUE(y.has_value()) << y.error().message;
  expect_matches_reference(c, {*y}, "tanh of a concat of 50");
}

// A sum of 40 inputs, one chain the fuser would make one kernel of 41 buffers: on lavapipe, which
// binds at most 32 buffers to a kernel, that kernel crashed the driver. The fuser keeps kernels
// within the device's limit (BeamOptions::max_kernel_buffers).
TEST(FusionConformance, AChainOfFortyInputs) {
  Case c;
  const ir::Node* sum = c.input(DType::f32, {4, 8});
  for (int i = 1; i < 40; ++i) {
    auto next = c.b.binary(Op::Add, sum, c.input(DType::f32, {4, 8}));
    ASSERT_TRUE(next.has_value()) << next.error().message;
    sum = *next;
  }
  expect_matches_reference(c, {sum}, "a chain of 40 inputs");
}

TEST(MatmulConformance, Shapes) {
  struct S { ir::Shape a, b; };
  const S cases[] = {{{3, 4}, {4, 5}}, {{2, 3, 4}, {4, 5}}, {{2, 1, 3, 4}, {3, 4, 2}},
                     {{4}, {4, 5}},    {{3, 4}, {4}},       {{4}, {4}}};
  for (DType t : {DType::f32, DType::f64, DType::i32}) {
    for (const S& s : cases) {
      Case c;
      auto y = c.b.matmul(c.input(t, s.a), c.input(t, s.b));
      ASSERT_TRUE(y.has_value()) << y.error().message;
      expect_matches_reference(c, {*y}, fmt::format("matmul {} @ {} {}", ir::shape_str(s.a),
                                                    ir::shape_str(s.b), ir::dtype_name(t)));
    }
  }
}

TEST(CompositeConformance, SoftmaxLogSoftmaxLayernorm) {
  for (int64_t axis : {-1, 0}) {
    Case c;
    const ir::Node* x = c.input(DType::f32, {5, 33}, false, 3.0);
    auto s = c.b.softmax(x, axis);
    auto l = c.b.log_softmax(x, axis);
    ASSERT_TRUE(s.has_value() && l.has_value());
    expect_matches_reference(c, {*s, *l}, fmt::format("softmax/log_softmax axis {}", axis));
  }
  Case c;
  auto y = c.b.layernorm(c.input(DType::f32, {6, 40}), c.input(DType::f32, {40}),
                         c.input(DType::f32, {40}), -1, 1e-5);
  ASSERT_TRUE(y.has_value()) << y.error().message;
  expect_matches_reference(c, {*y}, "layernorm");
}

TEST(CompositeConformance, Attention) {
  for (bool causal : {false, true}) {
    Case c;
    auto y = c.b.attention(c.input(DType::f32, {2, 3, 8, 4}), c.input(DType::f32, {2, 3, 8, 4}),
                           c.input(DType::f32, {2, 3, 8, 5}), causal, std::nullopt);
    ASSERT_TRUE(y.has_value()) << y.error().message;
    expect_matches_reference(c, {*y}, fmt::format("attention causal={}", causal));
  }
  Case c;  // more keys than queries, explicit scale
  auto y = c.b.attention(c.input(DType::f32, {3, 5, 4}), c.input(DType::f32, {3, 9, 4}),
                         c.input(DType::f32, {3, 9, 4}), false, 0.3);
  ASSERT_TRUE(y.has_value()) << y.error().message;
  expect_matches_reference(c, {*y}, "attention Lq != Lk");
}

TEST(OutputsConformance, SeveralOutputsSharedIntermediateAndInputOutput) {
  Case c;
  const ir::Node* x = c.input(DType::f32, {8, 16});
  auto e = c.b.unary(Op::Exp, x);
  auto s = c.b.reduce(Op::Sum, *e, std::vector<int64_t>{1}, true);
  auto d = c.b.binary(Op::Div, *e, *s);
  ASSERT_TRUE(d.has_value());
  expect_matches_reference(c, {*d, *s, *e, x, *d}, "several outputs");
}

}  // namespace
}  // namespace kiln::testing
