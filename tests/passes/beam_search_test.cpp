// The beam search as a search: it beats greedy fusion where it should, its plans compute the
// same values as the reference, it is deterministic, and it fuses 1,000-node graphs quickly.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <random>
#include <unordered_map>

#include "interp/reference.h"
#include "ir/kg.h"
#include "passes/beam_search.h"
#include "passes/cost_model.h"
#include "tests/passes/test_support.h"

namespace kiln::passes {
namespace {

using ir::DType;
using ir::Node;
using ir::Op;
using testing::must;

const CostModel& reference_model() {
  static const CostModel model(DeviceRates::reference_cpu());
  return model;
}

// Runs `plan` on seeded random inputs and compares every output with the f64 reference.
void expect_plan_matches_reference(const FusionPlan& plan, const Outputs& outputs,
                                   const std::vector<const Node*>& inputs, double tol) {
  std::mt19937 rng(7);
  std::unordered_map<const Node*, ir::HostTensor> tensors;
  std::vector<std::pair<const Node*, testing::Buffer>> buffers;
  for (const Node* in : inputs) {
    ir::HostTensor t = ir::HostTensor::zeros(in->dtype, in->shape);
    testing::Buffer b;
    for (int64_t i = 0; i < t.numel(); ++i) {
      double v = std::uniform_real_distribution<double>(-1, 1)(rng);
      t.set(i, v);
      b.push_back(static_cast<double>(static_cast<float>(v)));
    }
    tensors.emplace(in, std::move(t));
    buffers.push_back({in, std::move(b)});
  }
  auto want = interp::evaluate_reference(outputs, tensors);
  ASSERT_TRUE(want) << want.error().message;
  std::vector<testing::Buffer> got = testing::run_fusion_plan(plan, outputs, buffers);
  ASSERT_EQ(got.size(), outputs.size());
  for (size_t o = 0; o < outputs.size(); ++o) {
    ASSERT_EQ(static_cast<int64_t>(got[o].size()), (*want)[o].numel()) << "output " << o;
    for (int64_t i = 0; i < (*want)[o].numel(); ++i)
      ASSERT_NEAR(got[o][static_cast<size_t>(i)], (*want)[o].get(i), tol)
          << "output " << o << " element " << i;
  }
}

TEST(BeamSearch, FindsACheaperPlanThanGreedyFusion) {
  ir::Graph g;
  auto kg = ir::read_kg_file(g, KILN_SOURCE_DIR "/tests/graphs/beam_beats_greedy.kg");
  ASSERT_TRUE(kg) << kg.error().message;
  Outputs outputs;
  for (const auto& [name, node] : kg->outputs) outputs.push_back(node);
  std::vector<const Node*> inputs;
  for (const auto& [name, node] : kg->inputs) inputs.push_back(node);
  FusionPlan beam =
      make_beam_fuser(reference_model(), {.max_blocks = 5, .beam_width = 4})->fuse(outputs);
  FusionPlan greedy =
      make_beam_fuser(reference_model(), {.max_blocks = 1, .beam_width = 1})->fuse(outputs);
  EXPECT_LT(beam.total_seconds, greedy.total_seconds);
  EXPECT_LT(beam.total_seconds, 0.8 * greedy.total_seconds);  // not a rounding difference
  expect_plan_matches_reference(beam, outputs, inputs, 1e-3);
  expect_plan_matches_reference(greedy, outputs, inputs, 1e-3);
}

// A chain of `length` ops on one value: mostly unary, every eighth op subtracts the
// row mean (a reduction read back through a broadcast), every 50th is a graph output.
Outputs long_chain(ir::Builder& b, const Node* x, int length) {
  Outputs outs;
  const Node* y = x;
  int made = 0;
  while (made < length) {
    if (made % 8 == 7) {
      const Node* s = must(b.reduce(Op::Sum, y, std::vector<int64_t>{1}, true));
      y = must(b.binary(Op::Sub, y, s));
      made += 2;
    } else {
      y = must(b.unary(made % 3 == 0 ? Op::Tanh : Op::Neg, y));
      made += 1;
    }
    if (made % 50 == 0) outs.push_back(y);
  }
  outs.push_back(y);
  return outs;
}

// A wide DAG: every node combines a recent value with a random earlier one; some are row
// reductions read back through broadcasts, some operands are transposed. Every value nothing
// else reads is an output, so the whole DAG is live.
Outputs wide_dag(ir::Builder& b, const std::vector<const Node*>& inputs, int count,
                 std::mt19937& rng) {
  std::vector<const Node*> pool = inputs;
  std::vector<bool> used(inputs.size(), false);
  auto take = [&](size_t i) {
    used[i] = true;
    return pool[i];
  };
  for (int made = 0; made < count; ++made) {
    size_t recent = pool.size() - 1 - rng() % std::min<size_t>(pool.size(), 16);
    const Node* a = take(recent);
    const Node* c = take(rng() % pool.size());
    const Node* n = nullptr;
    switch (rng() % 6) {  // values stay in [-1, 1]
      case 0:
        n = must(b.unary(Op::Tanh, a));
        break;
      case 1:
        n = must(
            b.binary(Op::Sub, a, must(b.reduce(Op::ReduceMax, c, std::vector<int64_t>{1}, true))));
        n = must(b.unary(Op::Tanh, n));
        break;
      case 2:
        n = must(b.unary(Op::Tanh, must(b.binary(Op::Add, a, must(b.permute(c, {1, 0}))))));
        break;
      default:
        n = must(b.binary(rng() % 2 ? Op::Mul : Op::Max, a, c));
        break;
    }
    pool.push_back(n);
    used.push_back(false);
  }
  Outputs outs;
  for (size_t i = inputs.size(); i < pool.size(); ++i)
    if (!used[i]) outs.push_back(pool[i]);
  return outs;
}

double fuse_millis(const Outputs& outputs, FusionPlan& plan) {
  auto start = std::chrono::steady_clock::now();
  plan = make_beam_fuser(reference_model())->fuse(outputs);
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
      .count();
}

TEST(BeamSearch, FusesAThousandNodeChainQuickly) {
  ir::Graph g;
  ir::Builder b(g);
  const Node* x = g.input(DType::f32, {64, 64}, "x");
  Outputs outs = long_chain(b, x, 1000);
  ASSERT_GE(ir::topo_order(outs).size(), 1000u);
  FusionPlan plan;
  double ms = fuse_millis(outs, plan);
  std::printf("[ timing ] beam fuser, chain of %zu live nodes: %.2f ms, %zu groups\n",
              ir::topo_order(outs).size(), ms, plan.groups.size());
  EXPECT_LT(ms, 2000);
  // Every output and reduction is [64,64] or read by row: one kernel, but for the size cap.
  const size_t computed = ir::topo_order(outs).size() - 1;  // all but the input
  EXPECT_EQ(plan.groups.size(), (computed + kMaxGroupNodes - 1) / kMaxGroupNodes);
}

TEST(BeamSearch, ChainWithRowReductionsMatchesTheReference) {
  // Short and small: the test interpreter does not hoist, so nested reductions multiply its work.
  ir::Graph g;
  ir::Builder b(g);
  const Node* x = g.input(DType::f32, {4, 8}, "x");
  Outputs outs = long_chain(b, x, 40);
  FusionPlan plan = make_beam_fuser(reference_model())->fuse(outs);
  EXPECT_EQ(plan.groups.size(), 1u);
  expect_plan_matches_reference(plan, outs, {x}, 1e-3);
}

TEST(BeamSearch, FusesAThousandNodeWideDagQuicklyAndDeterministically) {
  ir::Graph g;
  ir::Builder b(g);
  std::mt19937 rng(99);
  std::vector<const Node*> inputs;
  for (int i = 0; i < 4; ++i) inputs.push_back(g.input(DType::f32, {16, 16}, "x"));
  Outputs outs = wide_dag(b, inputs, 1000, rng);
  FusionPlan plan;
  double ms = fuse_millis(outs, plan);
  size_t live = ir::topo_order(outs).size();
  std::printf("[ timing ] beam fuser, wide DAG of %zu live nodes: %.2f ms, %zu groups\n", live, ms,
              plan.groups.size());
  EXPECT_GE(live, 1000u);
  EXPECT_LT(ms, 2000);
  FusionPlan again = make_beam_fuser(reference_model())->fuse(outs);
  ASSERT_EQ(again.groups.size(), plan.groups.size());  // deterministic
  for (size_t i = 0; i < plan.groups.size(); ++i) {
    EXPECT_EQ(again.groups[i].nodes, plan.groups[i].nodes);
    EXPECT_EQ(again.groups[i].inputs, plan.groups[i].inputs);
  }
  EXPECT_EQ(again.total_seconds, plan.total_seconds);
}

TEST(BeamSearch, WideDagsMatchTheReferenceUnderEveryOption) {
  for (uint32_t seed = 1; seed <= 12; ++seed) {
    ir::Graph g;
    ir::Builder b(g);
    std::mt19937 rng(seed);
    std::vector<const Node*> inputs;
    for (int i = 0; i < 3; ++i) inputs.push_back(g.input(DType::f32, {3, 3}, "x"));
    Outputs outs = wide_dag(b, inputs, 40, rng);
    for (BeamOptions o : {BeamOptions{1, 1}, BeamOptions{1, 4}, BeamOptions{2, 2},
                          BeamOptions{5, 4}, BeamOptions{8, 16}}) {
      SCOPED_TRACE(::testing::Message() << "seed " << seed << " max_blocks " << o.max_blocks
                                        << " beam_width " << o.beam_width);
      FusionPlan plan = make_beam_fuser(reference_model(), o)->fuse(outs);
      expect_plan_matches_reference(plan, outs, inputs, 1e-4);
    }
  }
}

}  // namespace
}  // namespace kiln::passes
