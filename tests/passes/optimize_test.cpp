// Graph passes: literal folding, view folding, CSE, DCE and the optimize pipeline.
#include <gtest/gtest.h>

#include "passes/passes.h"
#include "tests/passes/test_support.h"

namespace kiln::passes {
namespace {

using ir::AttrKey;
using ir::Attrs;
using ir::DType;
using ir::Node;
using ir::Op;
using testing::must;

struct Fixture : testing::GraphFixture {
  const Node* x = g.input(DType::f32, {2, 3}, "x");
};

TEST(FoldLiterals, Identities) {
  Fixture f;
  EXPECT_EQ(fold_literals(f.g, {f.bin(Op::Mul, f.x, f.lit(1))}), Outputs{f.x});
  EXPECT_EQ(fold_literals(f.g, {f.bin(Op::Mul, f.lit(1), f.x)}), Outputs{f.x});
  EXPECT_EQ(fold_literals(f.g, {f.bin(Op::Add, f.x, f.lit(-0.0))}), Outputs{f.x});
  EXPECT_EQ(fold_literals(f.g, {f.bin(Op::Add, f.lit(-0.0), f.x)}), Outputs{f.x});
  EXPECT_EQ(fold_literals(f.g, {f.bin(Op::Sub, f.x, f.lit(0))}), Outputs{f.x});
  // Not identities for floats: x = -0 gives -0 + +0 = +0 and -0 - -0 = +0 (IEEE 754).
  for (const Node* keep : {f.bin(Op::Add, f.x, f.lit(0)), f.bin(Op::Add, f.lit(0), f.x),
                           f.bin(Op::Sub, f.x, f.lit(-0.0))})
    EXPECT_EQ(fold_literals(f.g, {keep}), Outputs{keep}) << ir::op_name(keep->op);
  // For integers every zero is.
  const Node* i = f.g.input(DType::i32, {2}, "i");
  const Node* zero = must(f.b.full({}, 0, DType::i32));
  EXPECT_EQ(fold_literals(f.g, {f.bin(Op::Add, i, zero)}), Outputs{i});
  EXPECT_EQ(fold_literals(f.g, {f.bin(Op::Div, f.x, f.lit(1))}), Outputs{f.x});
  const Node* nn = must(f.b.unary(Op::Neg, must(f.b.unary(Op::Neg, f.x))));
  EXPECT_EQ(fold_literals(f.g, {nn}), Outputs{f.x});
  // A cast to the same dtype: built directly, the builder may already drop it.
  const Node* same =
      f.g.make(Op::Cast, DType::f32, {2, 3}, {f.x}, Attrs{{AttrKey::to, DType::f32}});
  EXPECT_EQ(fold_literals(f.g, {same}), Outputs{f.x});
}

TEST(FoldLiterals, FoldsNestedLiteralArithmetic) {
  Fixture f;
  const Node* v = f.bin(Op::Mul, f.bin(Op::Add, f.lit(2), f.lit(3)), f.lit(4));
  Outputs out = fold_literals(f.g, {v});
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0]->op, Op::Full);
  EXPECT_EQ(out[0]->attrs.f(AttrKey::value), 20.0);
  EXPECT_EQ(out[0]->shape, ir::Shape{});
  // Integer division folds with floor semantics; comparisons fold to bool.
  const Node* i = must(
      f.b.binary(Op::Div, must(f.b.full({}, -7, DType::i32)), must(f.b.full({}, 2, DType::i32))));
  Outputs iout = fold_literals(f.g, {i});
  EXPECT_EQ(iout[0]->attrs.f(AttrKey::value), -4.0);
  EXPECT_EQ(iout[0]->dtype, DType::i32);
  Outputs cmp = fold_literals(f.g, {f.bin(Op::Lt, f.lit(1), f.lit(2))});
  EXPECT_EQ(cmp[0]->dtype, DType::boolean);
  EXPECT_EQ(cmp[0]->attrs.f(AttrKey::value), 1.0);
}

TEST(FoldLiterals, KeepsBroadcastingIdentityAndReturnsInput) {
  Fixture f;
  // x[2,3] * ones[4,2,3] broadcasts x: not an identity.
  const Node* widened = f.bin(Op::Mul, f.x, f.lit(1, {4, 2, 3}));
  Outputs in{widened};
  Outputs out = fold_literals(f.g, in);
  EXPECT_EQ(out, in);
  EXPECT_EQ(out[0]->shape, (ir::Shape{4, 2, 3}));
  // Nothing to fold: the input comes back unchanged.
  Outputs plain{must(f.b.unary(Op::Exp, f.x)), f.bin(Op::Mul, f.x, f.lit(2))};
  EXPECT_EQ(fold_literals(f.g, plain), plain);
}

TEST(FoldViews, CollapsesChains) {
  Fixture f;
  ir::Graph& g = f.g;
  const Node* r1 =
      g.make(Op::Reshape, DType::f32, {3, 2}, {f.x}, Attrs{{AttrKey::shape, ir::Shape{3, 2}}});
  const Node* r2 =
      g.make(Op::Reshape, DType::f32, {6}, {r1}, Attrs{{AttrKey::shape, ir::Shape{6}}});
  Outputs out = fold_views(g, {r2});
  ASSERT_EQ(out[0]->op, Op::Reshape);
  EXPECT_EQ(out[0]->inputs[0], f.x);
  EXPECT_EQ(out[0]->shape, ir::Shape{6});
  const Node* back =
      g.make(Op::Reshape, DType::f32, {2, 3}, {r1}, Attrs{{AttrKey::shape, ir::Shape{2, 3}}});
  EXPECT_EQ(fold_views(g, {back}), Outputs{f.x});

  auto permute = [&](const Node* in, std::vector<int64_t> dims) {
    ir::Shape s;
    for (int64_t d : dims) s.push_back(in->shape[static_cast<size_t>(d)]);
    return g.make(Op::Permute, DType::f32, s, {in}, Attrs{{AttrKey::dims, dims}});
  };
  const Node* x3 = g.input(DType::f32, {2, 3, 4});
  EXPECT_EQ(fold_views(g, {permute(permute(f.x, {1, 0}), {1, 0})}), Outputs{f.x});
  // [2,3,4] -> [3,4,2] -> [3,2,4]: one permute taking axes (1, 0, 2) of x3.
  Outputs composed = fold_views(g, {permute(permute(x3, {1, 2, 0}), {0, 2, 1})});
  ASSERT_EQ(composed[0]->op, Op::Permute);
  EXPECT_EQ(composed[0]->inputs[0], x3);
  EXPECT_EQ(composed[0]->attrs.ints(AttrKey::dims), (std::vector<int64_t>{1, 0, 2}));
  EXPECT_EQ(composed[0]->shape, (ir::Shape{3, 2, 4}));
  Attrs flip0{{AttrKey::axes, std::vector<int64_t>{0}}};
  const Node* f1 = g.make(Op::Flip, DType::f32, {2, 3}, {f.x}, flip0);
  EXPECT_EQ(fold_views(g, {g.make(Op::Flip, DType::f32, {2, 3}, {f1}, flip0)}), Outputs{f.x});
}

TEST(FoldViews, RemovesIdentityViews) {
  Fixture f;
  ir::Graph& g = f.g;
  const Node* slice = g.make(Op::Slice, DType::f32, {2, 3}, {f.x},
                             Attrs{{AttrKey::axis, int64_t{1}},
                                   {AttrKey::start, int64_t{0}},
                                   {AttrKey::end, int64_t{3}},
                                   {AttrKey::step, int64_t{1}}});
  EXPECT_EQ(fold_views(g, {slice}), Outputs{f.x});
  const Node* pad = g.make(Op::Pad, DType::f32, {2, 3}, {f.x},
                           Attrs{{AttrKey::before, std::vector<int64_t>{0, 0}},
                                 {AttrKey::after, std::vector<int64_t>{0, 0}},
                                 {AttrKey::value, 0.0}});
  EXPECT_EQ(fold_views(g, {pad}), Outputs{f.x});
  const Node* expand =
      g.make(Op::Expand, DType::f32, {2, 3}, {f.x}, Attrs{{AttrKey::shape, ir::Shape{2, 3}}});
  EXPECT_EQ(fold_views(g, {expand}), Outputs{f.x});
  // A view of a literal is the literal in the view's shape.
  const Node* lit_view = must(f.b.expand(f.lit(5), {4, 4}));
  Outputs lv = fold_views(g, {lit_view});
  EXPECT_EQ(lv[0], must(f.b.full({4, 4}, 5, DType::f32)));
}

TEST(FoldViews, NothingChangedReturnsInput) {
  Fixture f;
  const Node* real_slice = must(f.b.slice(f.x, 1, 1, std::nullopt, 1));
  const Node* padded = must(f.b.pad(f.x, {1, 0}, {0, 2}, 0.0));
  const Node* flipped = must(f.b.flip(must(f.b.permute(f.x, {1, 0})), {0}));
  Outputs in{real_slice, padded, flipped};
  EXPECT_EQ(fold_views(f.g, in), in);
}

TEST(Optimize, MergesStructurallyEqualValuesAndDropsDeadNodes) {
  Fixture f;
  const Node* a = must(f.b.unary(Op::Exp, f.bin(Op::Mul, f.x, f.lit(1))));
  const Node* b = must(f.b.unary(Op::Exp, f.x));
  ASSERT_NE(a, b);
  Outputs out = optimize(f.g, {a, b});
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0], b);
  EXPECT_EQ(out[1], b);
  std::vector<const Node*> live = live_nodes(out);
  EXPECT_EQ(live, (std::vector<const Node*>{f.x, b}));
  // CSE alone has nothing to merge in an interned graph: it returns its input.
  Outputs in{a, b};
  EXPECT_EQ(eliminate_common_subexpressions(f.g, in), in);
}

TEST(Optimize, FoldOffOnlyRunsCse) {
  Fixture f;
  const Node* a = f.bin(Op::Mul, f.x, f.lit(1));
  EXPECT_EQ(optimize(f.g, {a}, OptimizeOptions{.fold = false, .after_step = {}}), Outputs{a});
  EXPECT_EQ(optimize(f.g, {a}), Outputs{f.x});
}

TEST(LiveNodes, TopologicalAndOnlyReachable) {
  Fixture f;
  const Node* dead = must(f.b.unary(Op::Sin, f.x));
  const Node* y = f.bin(Op::Add, must(f.b.unary(Op::Exp, f.x)), f.x);
  std::vector<const Node*> live = live_nodes({y});
  EXPECT_EQ(std::count(live.begin(), live.end(), dead), 0);
  ASSERT_EQ(live.size(), 3u);
  EXPECT_EQ(live.front(), f.x);
  EXPECT_EQ(live.back(), y);
}

}  // namespace
}  // namespace kiln::passes
