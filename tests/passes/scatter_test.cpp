// scatter_elements through fusion: the beam fuser places it in a group like a reduction, with
// its elementwise producers fused on read and its elementwise readers on write; never inside a
// scan's kernel; every plan computes what the unfused plan computes.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>

#include "passes/cost_model.h"
#include "passes/lower.h"
#include "tests/passes/test_support.h"

namespace kiln::passes {
namespace {

using ir::DType;
using ir::Node;
using ir::Op;
using testing::Buffer;
using testing::holds;
using testing::must;

std::string describe(const FusionPlan& plan) {
  std::string groups;
  for (const FusedGroup& g : plan.groups) {
    groups += "[";
    for (const Node* n : g.nodes) groups += std::string(ir::op_enum_name(n->op)) + " ";
    groups += "] ";
  }
  return groups;
}

Buffer ramp(size_t n, double scale) {
  Buffer b(n);
  for (size_t i = 0; i < n; ++i) b[i] = static_cast<double>(i % 7) * scale - 1;
  return b;
}

TEST(FuseScatter, ProducersAndElementwiseReadersJoinTheScatter) {
  testing::GraphFixture f;
  const Node* x = f.g.input(DType::f32, {16, 64}, "x");
  const Node* ids = f.g.input(DType::i64, {16, 32}, "ids");
  const Node* u = f.g.input(DType::f32, {16, 32}, "u");
  const Node* data = f.un(Op::Tanh, x);
  const Node* upd = f.bin(Op::Mul, u, f.lit(2));
  const Node* s = must(f.b.scatter_elements(data, ids, upd, 1, "add"));
  const Node* y = f.un(Op::Exp, s);
  CostModel model{DeviceRates::reference_cpu()};
  FusionPlan beam = make_beam_fuser(model)->fuse({y});
  ASSERT_EQ(beam.groups.size(), 1u) << describe(beam);
  EXPECT_TRUE(holds(beam.groups[0], s) && holds(beam.groups[0], data) &&
              holds(beam.groups[0], upd));
  Buffer idv(16 * 32);
  for (size_t i = 0; i < idv.size(); ++i) idv[i] = static_cast<double>((i * 37) % 80) - 8;
  const std::vector<std::pair<const Node*, Buffer>> in = {
      {x, ramp(16 * 64, 0.3)}, {ids, idv}, {u, ramp(16 * 32, 0.5)}};
  const std::vector<Buffer> want = testing::run_fusion_plan(make_unfused()->fuse({y}), {y}, in);
  for (const FusionPlan& plan : {beam, make_first_fuser()->fuse({y})}) {
    std::vector<Buffer> got = testing::run_fusion_plan(plan, {y}, in);
    ASSERT_EQ(got.size(), 1u);
    ASSERT_EQ(got[0].size(), want[0].size());
    for (size_t i = 0; i < got[0].size(); ++i)
      EXPECT_NEAR(got[0][i], want[0][i], 1e-9 * (1 + std::abs(want[0][i]))) << describe(plan);
  }
}

// A scatter lowers to a reduction per element: a scan's kernel may not hold it.
TEST(FuseScatter, NotInsideAScanKernel) {
  testing::GraphFixture f;
  const Node* x = f.g.input(DType::f32, {8, 16}, "x");
  const Node* ids = f.g.input(DType::i32, {8, 4}, "ids");
  const Node* u = f.g.input(DType::f32, {8, 4}, "u");
  const Node* s = must(f.b.scatter_elements(x, ids, u, 1, "none"));
  const Node* c = must(f.b.cumsum(s, 1, false, false));
  CostModel model{DeviceRates::reference_cpu()};
  for (const FusionPlan& plan :
       {make_beam_fuser(model)->fuse({c}), make_first_fuser()->fuse({c})}) {
    ASSERT_EQ(plan.groups.size(), 2u) << describe(plan);
    for (const FusedGroup& g : plan.groups) {
      EXPECT_FALSE(holds(g, s) && holds(g, c)) << describe(plan);
      auto k = lower_group(g, "k");
      EXPECT_TRUE(k) << k.error().message;
    }
  }
}

}  // namespace
}  // namespace kiln::passes
