// Domain collapse (passes/collapse_domain.h): which kernels lower to one flat axis, which keep
// their axes, and that the collapsed kernels compute the same values (run by the test
// interpreter, which rejects any out-of-range index).
#include <gtest/gtest.h>

#include <string>

#include "passes/collapse_domain.h"
#include "tests/passes/test_support.h"

namespace kiln::passes {
namespace {

using ir::DType;
using ir::Node;
using ir::Op;
using testing::Buffer;
using testing::GraphFixture;
using testing::must;
using testing::run_one_group;

kir::Kernel lowered(const Node* out) {
  FusionPlan plan = make_first_fuser()->fuse({out});
  auto k = lower_group(plan.groups.at(0), "k");
  EXPECT_TRUE(k) << (k ? "" : k.error().message);
  return k ? k->kernel : kir::Kernel{};
}

std::string domain_of(const Node* out) {
  const std::string text = kir::print_kernel(lowered(out));
  const size_t at = text.find("domain [");
  return at == std::string::npos ? text : text.substr(at, text.find('\n', at) - at);
}

Buffer ramp(int64_t n, double scale = 1) {
  Buffer b(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) b[static_cast<size_t>(i)] = static_cast<double>(i) * scale - 3;
  return b;
}

TEST(CollapseDomain, AnElementwiseChainRunsOverOneFlatAxis) {
  GraphFixture f;
  const Node* x = f.g.input(DType::f32, {1, 8, 8, 8}, "x");
  const Node* y = f.un(Op::Relu, f.bin(Op::Add, f.bin(Op::Mul, x, f.lit(2)), f.lit(1)));
  EXPECT_EQ(domain_of(y), "domain [512]");
  const std::string text = kir::print_kernel(lowered(y));
  EXPECT_NE(text.find("load f32 %0[v0]"), std::string::npos) << text;
  EXPECT_NE(text.find("store %1[v0]"), std::string::npos) << text;
  const Buffer out = run_one_group(y, {{x, ramp(512)}});
  ASSERT_EQ(out.size(), 512u);
  for (size_t i = 0; i < out.size(); ++i)
    EXPECT_EQ(out[i], std::max(0.0, (static_cast<double>(i) - 3) * 2 + 1)) << i;
}

TEST(CollapseDomain, AReductionOverTheOuterAxisKeepsItsLoopAndFlattensTheRest) {
  GraphFixture f;
  const Node* x = f.g.input(DType::f32, {3, 4, 5}, "x");
  const Node* y = must(f.b.reduce(Op::Sum, x, std::vector<int64_t>{0}, false));
  EXPECT_EQ(domain_of(y), "domain [20]");
  const Buffer in = ramp(60);
  const Buffer out = run_one_group(y, {{x, in}});
  ASSERT_EQ(out.size(), 20u);
  for (size_t p = 0; p < 20; ++p) EXPECT_EQ(out[p], in[p] + in[20 + p] + in[40 + p]) << p;
}

TEST(CollapseDomain, ARowBroadcastOperandKeepsTheRowAxis) {
  // b[j] is read by the innermost variable alone: only the outer axes could join, and there is
  // one of them.
  GraphFixture f;
  const Node* x = f.g.input(DType::f32, {4, 6}, "x");
  const Node* b = f.g.input(DType::f32, {6}, "b");
  const Node* y = f.bin(Op::Add, x, b);
  EXPECT_EQ(domain_of(y), "domain [4,6]");
  const Buffer xs = ramp(24), bs = ramp(6, 10);
  const Buffer out = run_one_group(y, {{x, xs}, {b, bs}});
  for (size_t i = 0; i < 24; ++i) EXPECT_EQ(out[i], xs[i] + bs[i % 6]) << i;
}

TEST(CollapseDomain, AColumnBroadcastOverThreeAxesJoinsTheTwoInnerOnes) {
  // c[i] is read by the outer variable only: axes 1 and 2 are read through their flat index.
  GraphFixture f;
  const Node* x = f.g.input(DType::f32, {3, 4, 5}, "x");
  const Node* c = f.g.input(DType::f32, {3, 1, 1}, "c");
  const Node* y = f.bin(Op::Mul, x, c);
  EXPECT_EQ(domain_of(y), "domain [3,20]");
  const Buffer xs = ramp(60), cs = ramp(3, 7);
  const Buffer out = run_one_group(y, {{x, xs}, {c, cs}});
  for (size_t i = 0; i < 60; ++i) EXPECT_EQ(static_cast<float>(out[i]), static_cast<float>(xs[i] * cs[i / 20])) << i;
}

TEST(CollapseDomain, ATransposeAndAWrapAroundKeepTheirAxes) {
  GraphFixture f;
  const Node* x = f.g.input(DType::f32, {4, 6}, "x");
  const Node* t = must(f.b.permute(x, {1, 0}));
  EXPECT_EQ(domain_of(f.un(Op::Neg, t)), "domain [6,4]");
  const Node* r = must(f.b.roll(x, {1}, {1}));
  EXPECT_EQ(domain_of(f.un(Op::Neg, r)), "domain [4,6]");
  const Buffer xs = ramp(24);
  const Buffer out = run_one_group(f.un(Op::Neg, r), {{x, xs}});
  for (size_t i = 0; i < 4; ++i)
    for (size_t j = 0; j < 6; ++j) EXPECT_EQ(out[i * 6 + j], -xs[i * 6 + (j + 5) % 6]) << i << "," << j;
}

TEST(CollapseDomain, AMatrixProductKeepsRowsAndColumns) {
  GraphFixture f;
  const Node* a = f.g.input(DType::f32, {1, 8}, "a");
  const Node* w = f.g.input(DType::f32, {8, 16}, "w");
  EXPECT_EQ(domain_of(must(f.b.matmul(a, w))), "domain [1,16]");
}

TEST(CollapseDomain, AnIotaOfTheInnerAxisKeepsIt) {
  // A comparison with the innermost index reads that variable alone, not the flat index.
  GraphFixture f;
  const Node* x = f.g.input(DType::f32, {4, 6}, "x");
  const Node* tri = must(f.b.trilu(x, 0, false));
  EXPECT_EQ(domain_of(tri), "domain [4,6]");
}

TEST(CollapseDomain, LeavesKernelsOfRankOneAndScansAsTheyAre) {
  GraphFixture f;
  const Node* x = f.g.input(DType::f32, {40}, "x");
  EXPECT_EQ(domain_of(f.un(Op::Exp, x)), "domain [40]");
  const Node* m = f.g.input(DType::f32, {3, 5}, "m");
  const Node* s = must(f.b.cumsum(m, 1, false, false));
  EXPECT_EQ(domain_of(s), "domain [3,5]");
}

}  // namespace
}  // namespace kiln::passes
