// The first fuser: group counts and group contents for the graphs the issue names.
#include <gtest/gtest.h>

#include <algorithm>

#include "passes/fuser.h"
#include "tests/passes/test_support.h"

namespace kiln::passes {
namespace {

using ir::DType;
using ir::Node;
using ir::Op;
using testing::must;

struct Fixture : testing::GraphFixture {
  FusionPlan fuse(const Outputs& outs) { return make_first_fuser()->fuse(outs); }
};

bool contains(const std::vector<const Node*>& v, const Node* n) {
  return std::find(v.begin(), v.end(), n) != v.end();
}

TEST(FirstFuser, ElementwiseChainIsOneGroup) {
  Fixture f;
  const Node* a = f.g.input(DType::f32, {16777216}, "a");
  const Node* b = f.g.input(DType::f32, {16777216}, "b");
  const Node* c = f.g.input(DType::f32, {16777216}, "c");
  const Node* mul = f.bin(Op::Mul, a, b);
  const Node* add = f.bin(Op::Add, mul, c);
  const Node* y = f.un(Op::Gelu, add);
  FusionPlan plan = f.fuse({y});
  ASSERT_EQ(plan.groups.size(), 1u);
  const FusedGroup& grp = plan.groups[0];
  EXPECT_EQ(grp.outputs, (std::vector<const Node*>{y}));
  EXPECT_EQ(grp.inputs, (std::vector<const Node*>{a, b, c}));
  EXPECT_EQ(grp.nodes, (std::vector<const Node*>{mul, add, y}));
}

TEST(FirstFuser, StencilStepsMaterializeValuesReadThroughSeveralViews) {
  // A 3-point stencil applied 40 times: each step reads the previous one through two rolls and
  // directly. Inlining would recompute 3^40 copies; each step must be its own kernel.
  Fixture f;
  const Node* g = f.g.input(DType::f32, {64}, "g");
  std::vector<const Node*> steps;
  for (int s = 0; s < 40; ++s) {
    const Node* l = must(f.b.roll(g, {1}, {0}));
    const Node* r = must(f.b.roll(g, {63}, {0}));
    g = f.un(Op::Tanh, f.bin(Op::Add, f.bin(Op::Add, l, r), g));
    steps.push_back(g);
  }
  FusionPlan plan = f.fuse({g});
  ASSERT_EQ(plan.groups.size(), 40u);
  for (size_t s = 0; s < 40; ++s) EXPECT_EQ(plan.groups[s].outputs[0], steps[s]);
  EXPECT_EQ(plan.groups[1].inputs, (std::vector<const Node*>{steps[0]}));
}

TEST(FirstFuser, OneViewOfAValueIsStillInlined) {
  Fixture f;
  const Node* x = f.g.input(DType::f32, {8, 8}, "x");
  const Node* e = f.un(Op::Exp, x);
  const Node* t = must(f.b.permute(e, {1, 0}));
  const Node* y = f.bin(Op::Mul, t, t);  // the same view twice: one index pattern
  FusionPlan plan = f.fuse({y});
  ASSERT_EQ(plan.groups.size(), 1u);
  EXPECT_TRUE(contains(plan.groups[0].nodes, e));
}

TEST(FirstFuser, RowSoftmaxIsAtMostThreeGroups) {
  Fixture f;
  const Node* x = f.g.input(DType::f32, {64, 128}, "x");
  const Node* m = must(f.b.reduce(Op::ReduceMax, x, std::vector<int64_t>{1}, true));
  const Node* e = f.un(Op::Exp, f.bin(Op::Sub, x, m));
  const Node* s = must(f.b.reduce(Op::Sum, e, std::vector<int64_t>{1}, true));
  const Node* y = f.bin(Op::Div, e, s);
  FusionPlan plan = f.fuse({y});
  ASSERT_LE(plan.groups.size(), 3u);
  ASSERT_EQ(plan.groups.size(), 3u);  // max, sum, normalize
  EXPECT_EQ(plan.groups[0].outputs[0], m);
  EXPECT_EQ(plan.groups[1].outputs[0], s);
  EXPECT_EQ(plan.groups[1].inputs, (std::vector<const Node*>{x, m}));
  EXPECT_EQ(plan.groups[2].inputs, (std::vector<const Node*>{x, m, s}));
  EXPECT_TRUE(contains(plan.groups[2].nodes, e));  // exp is recomputed, not materialized
  // The builder's composite softmax fuses the same way.
  EXPECT_LE(f.fuse({must(f.b.softmax(x, -1))}).groups.size(), 3u);
}

TEST(FirstFuser, LayernormIsThreeGroups) {
  Fixture f;
  const Node* x = f.g.input(DType::f32, {32, 256}, "x");
  const Node* gamma = f.g.input(DType::f32, {256}, "g");
  const Node* beta = f.g.input(DType::f32, {256}, "b");
  const Node* mu = must(f.b.mean(x, std::vector<int64_t>{1}, true));
  const Node* d = f.bin(Op::Sub, x, mu);
  const Node* var = must(f.b.mean(f.bin(Op::Mul, d, d), std::vector<int64_t>{1}, true));
  const Node* r = f.un(Op::Rsqrt, f.bin(Op::Add, var, f.lit(1e-5)));
  const Node* y = f.bin(Op::Add, f.bin(Op::Mul, f.bin(Op::Mul, d, r), gamma), beta);
  FusionPlan plan = f.fuse({y});
  ASSERT_EQ(plan.groups.size(), 3u);
  EXPECT_EQ(plan.groups[2].outputs[0], y);
  EXPECT_TRUE(contains(plan.groups[2].inputs, gamma));
  EXPECT_TRUE(contains(plan.groups[2].inputs, beta));
  EXPECT_LE(f.fuse({must(f.b.layernorm(x, gamma, beta, -1, 1e-5))}).groups.size(), 3u);
}

TEST(FirstFuser, BroadcastsAndViewsStayInOneGroup) {
  Fixture f;
  const Node* x = f.g.input(DType::f32, {8, 4}, "x");
  const Node* row = f.g.input(DType::f32, {8}, "row");
  const Node* col = f.g.input(DType::f32, {4, 1}, "col");
  const Node* xt = must(f.b.permute(x, {1, 0}));                    // [4,8]
  const Node* sl = must(f.b.slice(xt, 1, 0, 8, 2));                 // [4,4]
  const Node* wide = f.bin(Op::Add, f.bin(Op::Mul, xt, row), col);  // [4,8]
  const Node* half = must(f.b.slice(wide, 1, 1, std::nullopt, 2));  // [4,4]
  const Node* y = f.un(Op::Tanh, f.bin(Op::Sub, half, sl));
  FusionPlan plan = f.fuse({y});
  ASSERT_EQ(plan.groups.size(), 1u);
  EXPECT_EQ(plan.groups[0].inputs, (std::vector<const Node*>{x, row, col}));
}

TEST(FirstFuser, MatmulBiasRelu) {
  Fixture f;
  const Node* x = f.g.input(DType::f32, {16, 32}, "x");
  const Node* w = f.g.input(DType::f32, {32, 8}, "w");
  const Node* bias = f.g.input(DType::f32, {8}, "bias");
  const Node* mm = must(f.b.matmul(x, must(f.b.permute(must(f.b.permute(w, {1, 0})), {1, 0}))));
  const Node* y = f.un(Op::Relu, f.bin(Op::Add, mm, bias));
  FusionPlan plan = f.fuse({y});
  ASSERT_EQ(plan.groups.size(), 2u);
  EXPECT_EQ(plan.groups[0].outputs[0], mm);
  EXPECT_EQ(plan.groups[0].inputs, (std::vector<const Node*>{x, w}));  // views of w are inlined
  EXPECT_EQ(plan.groups[1].inputs, (std::vector<const Node*>{mm, bias}));
}

TEST(FirstFuser, ElementwiseMatmulOperandIsMaterialized) {
  Fixture f;
  const Node* x = f.g.input(DType::f32, {16, 32}, "x");
  const Node* w = f.g.input(DType::f32, {32, 8}, "w");
  const Node* rx = f.un(Op::Relu, x);
  const Node* mm = must(f.b.matmul(rx, w));
  FusionPlan plan = f.fuse({mm});
  ASSERT_EQ(plan.groups.size(), 2u);
  EXPECT_EQ(plan.groups[0].outputs[0], rx);
  EXPECT_EQ(plan.groups[1].inputs, (std::vector<const Node*>{rx, w}));
}

TEST(FirstFuser, ArgmaxFusesItsProducer) {
  Fixture f;
  const Node* x = f.g.input(DType::f32, {10, 7}, "x");
  const Node* am = must(f.b.arg_reduce(Op::ArgMax, f.bin(Op::Mul, x, f.lit(2)), 1, false));
  FusionPlan plan = f.fuse({am});
  ASSERT_EQ(plan.groups.size(), 1u);
  EXPECT_EQ(plan.groups[0].outputs[0], am);
  EXPECT_EQ(plan.groups[0].inputs, (std::vector<const Node*>{x}));
}

TEST(FirstFuser, SharedValueIsRecomputedPerConsumer) {
  Fixture f;
  const Node* x = f.g.input(DType::f32, {100}, "x");
  const Node* t = f.un(Op::Exp, x);
  const Node* y1 = f.bin(Op::Add, t, f.lit(1));
  const Node* y2 = f.bin(Op::Mul, t, f.lit(2));
  FusionPlan plan = f.fuse({y1, y2, y1});
  ASSERT_EQ(plan.groups.size(), 2u);  // y1 listed twice: one group
  for (const FusedGroup& grp : plan.groups) {
    EXPECT_TRUE(contains(grp.nodes, t));
    EXPECT_EQ(grp.inputs, (std::vector<const Node*>{x}));
  }
}

TEST(FirstFuser, InputOutputMakesNoGroupAndOrderIsTopological) {
  Fixture f;
  const Node* x = f.g.input(DType::f32, {4, 4}, "x");
  const Node* s = must(f.b.reduce(Op::Sum, x, std::vector<int64_t>{0}, false));
  const Node* y = f.bin(Op::Mul, x, s);
  FusionPlan plan = f.fuse({y, x, s});
  ASSERT_EQ(plan.groups.size(), 2u);
  EXPECT_EQ(plan.groups[0].outputs[0], s);
  EXPECT_EQ(plan.groups[1].outputs[0], y);
  EXPECT_EQ(plan.groups[1].inputs, (std::vector<const Node*>{x, s}));
}

}  // namespace
}  // namespace kiln::passes
