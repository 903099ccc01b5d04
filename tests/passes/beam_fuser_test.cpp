// The beam-search fuser: partitions of the graphs DESIGN.md §5 names, recomputation versus
// materialization, fusion reasons, and the graph where the beam beats greedy fusion.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <set>

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

struct Fixture : testing::GraphFixture {
  CostModel model{DeviceRates::reference_cpu()};
  FusionPlan fuse(const Outputs& outs, BeamOptions options = {}) {
    return make_beam_fuser(model, options)->fuse(outs);
  }
};

bool contains(const std::vector<const Node*>& v, const Node* n) {
  return std::find(v.begin(), v.end(), n) != v.end();
}

// Every graph edge between computed nodes in different groups has a reason, and only those.
void expect_reasons_complete(const FusionPlan& plan) {
  std::set<std::pair<uint32_t, uint32_t>> need, have;
  for (const FusedGroup& grp : plan.groups)
    for (const Node* n : grp.nodes)
      for (const Node* p : n->inputs)
        if (contains(grp.inputs, p) && p->op != Op::Input &&
            ir::op_kind(p->op) != ir::OpKind::Source)
          need.insert({p->id, n->id});
  for (const FusionReason& r : plan.reasons) {
    EXPECT_FALSE(r.reason.empty());
    EXPECT_TRUE(have.insert({r.producer->id, r.consumer->id}).second) << "duplicate reason";
  }
  EXPECT_EQ(need, have);
  ASSERT_EQ(plan.costs.size(), plan.groups.size());
  double total = 0;
  for (const GroupCost& c : plan.costs) total += c.seconds;
  EXPECT_DOUBLE_EQ(plan.total_seconds, total);
}

std::string reason_of(const FusionPlan& plan, const Node* producer, const Node* consumer) {
  for (const FusionReason& r : plan.reasons)
    if (r.producer == producer && r.consumer == consumer) return r.reason;
  return "(none)";
}

TEST(BeamFuser, ElementwiseChainIsOneGroup) {
  Fixture f;
  const Node* a = f.g.input(DType::f32, {1 << 20}, "a");
  const Node* b = f.g.input(DType::f32, {1 << 20}, "b");
  const Node* c = f.g.input(DType::f32, {1 << 20}, "c");
  const Node* mul = f.bin(Op::Mul, a, b);
  const Node* add = f.bin(Op::Add, mul, c);
  const Node* y = f.un(Op::Gelu, add);
  FusionPlan plan = f.fuse({y});
  ASSERT_EQ(plan.groups.size(), 1u);
  EXPECT_EQ(plan.groups[0].outputs, (std::vector<const Node*>{y}));
  EXPECT_EQ(plan.groups[0].inputs, (std::vector<const Node*>{a, b, c}));
  EXPECT_EQ(plan.groups[0].nodes, (std::vector<const Node*>{mul, add, y}));
  expect_reasons_complete(plan);
}

// A gather is inlined into its reader like a view: the lookup, the scaling, the positional term
// and the activation are one kernel that reads the table, the ids and the positions.
TEST(BeamFuser, EmbeddingLookupAndElementwiseChainIsOneGroup) {
  Fixture f;
  const Node* table = f.g.input(DType::f32, {32000, 512}, "table");
  const Node* ids = f.g.input(DType::i64, {8, 128}, "ids");
  const Node* pos = f.g.input(DType::f32, {128, 512}, "pos");
  const Node* e = must(f.b.gather(table, ids, 0));  // [8,128,512]
  const Node* y = f.un(Op::Gelu, f.bin(Op::Add, f.bin(Op::Mul, e, f.lit(22.6)), pos));
  FusionPlan plan = f.fuse({y});
  ASSERT_EQ(plan.groups.size(), 1u);
  EXPECT_EQ(plan.groups[0].outputs, (std::vector<const Node*>{y}));
  EXPECT_EQ(plan.groups[0].inputs, (std::vector<const Node*>{table, ids, pos}));
  expect_reasons_complete(plan);
}

TEST(BeamFuser, RowSoftmaxAndLayernormAreOneGroupEach) {
  Fixture f;
  const Node* x = f.g.input(DType::f32, {512, 1024}, "x");
  const Node* gamma = f.g.input(DType::f32, {1024}, "gamma");
  const Node* beta = f.g.input(DType::f32, {1024}, "beta");
  const Node* sm = must(f.b.softmax(x, -1));
  const Node* ln = must(f.b.layernorm(x, gamma, beta, -1, 1e-5));
  for (const Node* out : {sm, ln}) {
    FusionPlan plan = f.fuse({out});
    ASSERT_EQ(plan.groups.size(), 1u) << ir::op_enum_name(out->op);
    EXPECT_EQ(plan.groups[0].outputs, (std::vector<const Node*>{out}));
    EXPECT_TRUE(plan.reasons.empty());
  }
}

TEST(BeamFuser, MatmulWithBiasAndActivationIsOneGroup) {
  Fixture f;
  const Node* x = f.g.input(DType::f32, {64, 128}, "x");
  const Node* w = f.g.input(DType::f32, {128, 32}, "w");
  const Node* bias = f.g.input(DType::f32, {32}, "bias");
  const Node* mm = must(f.b.matmul(x, w));
  const Node* y = f.un(Op::Relu, f.bin(Op::Add, mm, bias));
  FusionPlan plan = f.fuse({y});
  ASSERT_EQ(plan.groups.size(), 1u);
  EXPECT_TRUE(contains(plan.groups[0].nodes, mm));
  EXPECT_EQ(plan.groups[0].inputs, (std::vector<const Node*>{x, w, bias}));
}

// A reduction never evaluates a matmul of its own kernel: it would compute x @ w again in its
// loop, as a loose sum of separately rounded products in another order than the matmul's loop
// nest, and a value would have other bits there than where the matmul's kernel writes it (a
// softmax of a small projection came out 1 ulp apart in a traced replay and in the function run
// again, Python.trace). The softmax reads the projection from a buffer, with h an output or not.
TEST(BeamFuser, AReductionReadsAMatmulFromItsBufferNotFromItsOwnKernel) {
  for (bool h_is_output : {false, true}) {
    SCOPED_TRACE(h_is_output ? "h an output" : "softmax alone");
    Fixture f;
    const Node* x = f.g.input(DType::f32, {4, 6}, "x");
    const Node* w = f.g.input(DType::f32, {6, 5}, "w");
    const Node* bias = f.g.input(DType::f32, {5}, "bias");
    const Node* mm = must(f.b.matmul(x, w));
    const Node* h = f.bin(Op::Mul, f.un(Op::Relu, f.bin(Op::Add, mm, bias)), f.lit(0.5));
    const Node* y = must(f.b.softmax(h, -1));
    FusionPlan plan = f.fuse(h_is_output ? Outputs{h, y} : Outputs{y});
    for (const FusedGroup& grp : plan.groups) {
      if (!contains(grp.nodes, mm)) continue;
      for (const Node* n : grp.nodes) EXPECT_FALSE(ir::is_reduce(n->op)) << ir::op_enum_name(n->op);
    }
    expect_reasons_complete(plan);
  }
}

// A matmul's kernel holds no other reduction, before or after the matmul is placed: with one,
// codegen computes the matmul as a loose reduction, in other arithmetic than its loop nest, so
// its value would depend on what else shares its kernel (RandomGraphFuzz seed 1971: a sum of a
// small tensor beside a [6,6] @ [6,2] whose result a where chose between).
TEST(BeamFuser, AMatmulSharesItsKernelWithNoOtherReduction) {
  for (bool sum_first : {false, true}) {
    SCOPED_TRACE(sum_first ? "the sum placed first" : "the matmul placed first");
    Fixture f;
    const Node* a = f.g.input(DType::f32, {6, 6}, "a");
    const Node* w = f.g.input(DType::f32, {6, 2}, "w");
    const Node* c = f.g.input(DType::f32, {6, 2}, "c");
    const Node* s =
        sum_first ? must(f.b.reduce(Op::Sum, c, std::vector<int64_t>{0}, true)) : nullptr;
    const Node* mm = must(f.b.matmul(a, w));
    if (!sum_first) s = must(f.b.reduce(Op::Sum, c, std::vector<int64_t>{0}, true));
    const Node* y = f.bin(Op::Add, f.un(Op::Abs, mm), s);
    FusionPlan plan = f.fuse(Outputs{y, mm});
    int with_mm = 0;
    for (const FusedGroup& grp : plan.groups) {
      if (!contains(grp.nodes, mm)) continue;
      ++with_mm;
      for (const Node* n : grp.nodes)
        EXPECT_TRUE(n == mm || !ir::is_reduce(n->op)) << ir::op_enum_name(n->op);
    }
    EXPECT_EQ(with_mm, 1);
    expect_reasons_complete(plan);
  }
}

// A matmul the plan writes is not read through a view in its own kernel: the view would
// evaluate it again at other indices there, as a loose sum (RandomGraphFuzz seed 2205). Alone,
// the view of it is the matmul's kernel.
TEST(BeamFuser, AWrittenMatmulIsReadThroughAViewFromItsBuffer) {
  for (bool mm_is_output : {false, true}) {
    SCOPED_TRACE(mm_is_output ? "x @ w an output" : "its flip alone");
    Fixture f;
    const Node* x = f.g.input(DType::f32, {4, 4}, "x");
    const Node* w = f.g.input(DType::f32, {4, 4}, "w");
    const Node* mm = must(f.b.matmul(x, w));
    const Node* y = must(f.b.flip(mm, {0, 1}));
    FusionPlan plan = f.fuse(mm_is_output ? Outputs{mm, y} : Outputs{y});
    for (const FusedGroup& grp : plan.groups) {
      if (!contains(grp.nodes, mm)) continue;
      EXPECT_EQ(contains(grp.nodes, y), !mm_is_output);
    }
    expect_reasons_complete(plan);
  }
}

TEST(BeamFuser, TwoLayerMlpIsTwoGroupsSplitAtTheMatmulOperand) {
  Fixture f;
  const Node* x = f.g.input(DType::f32, {64, 128}, "x");
  const Node* w1 = f.g.input(DType::f32, {128, 256}, "w1");
  const Node* b1 = f.g.input(DType::f32, {256}, "b1");
  const Node* w2 = f.g.input(DType::f32, {256, 32}, "w2");
  const Node* b2 = f.g.input(DType::f32, {32}, "b2");
  const Node* h = f.un(Op::Gelu, f.bin(Op::Add, must(f.b.matmul(x, w1)), b1));
  const Node* mm2 = must(f.b.matmul(h, w2));
  const Node* y = f.bin(Op::Add, mm2, b2);
  FusionPlan plan = f.fuse({y});
  ASSERT_EQ(plan.groups.size(), 2u);
  EXPECT_EQ(plan.groups[0].outputs, (std::vector<const Node*>{h}));
  EXPECT_EQ(plan.groups[1].outputs, (std::vector<const Node*>{y}));
  EXPECT_EQ(reason_of(plan, h, mm2), "matmul operand");
  expect_reasons_complete(plan);
}

// softmax(q kᵀ s) v is one kernel (passes/attention_match.h): the backends emit it flash-style,
// so nothing of the [2,128,128] scores is written.
TEST(BeamFuser, AttentionIsOneKernel) {
  Fixture f;
  const Node* q = f.g.input(DType::f32, {2, 128, 64}, "q");
  const Node* k = f.g.input(DType::f32, {2, 128, 64}, "k");
  const Node* v = f.g.input(DType::f32, {2, 128, 64}, "v");
  const Node* y = must(f.b.attention(q, k, v, true, 0.125));
  FusionPlan plan = f.fuse({y});
  ASSERT_EQ(plan.groups.size(), 1u);
  EXPECT_EQ(plan.groups[0].outputs, (std::vector<const Node*>{y}));
  EXPECT_EQ(plan.groups[0].inputs, (std::vector<const Node*>{q, k, v}));
  // Priced as one flash loop nest: both contractions once, half of them under the causal mask.
  const double dense = 2.0 * 2 * 128 * 128 * (64 + 64);
  EXPECT_LT(plan.costs[0].flops, dense);
  expect_reasons_complete(plan);
}

// The same ops written out one by one, with an additive mask read from a buffer, fuse the same.
TEST(BeamFuser, AttentionWrittenOutOpByOpIsOneKernel) {
  Fixture f;
  const Node* q = f.g.input(DType::f32, {4, 96, 32}, "q");
  const Node* k = f.g.input(DType::f32, {4, 80, 32}, "k");
  const Node* v = f.g.input(DType::f32, {4, 80, 48}, "v");
  const Node* mask = f.g.input(DType::f32, {96, 80}, "mask");
  const Node* kt = must(f.b.permute(k, {0, 2, 1}));
  const Node* s = f.bin(Op::Add, f.bin(Op::Mul, must(f.b.matmul(q, kt)), must(f.b.scalar(0.25, DType::f32))), mask);
  const Node* y = must(f.b.matmul(must(f.b.softmax(s, -1)), v));
  FusionPlan plan = f.fuse({y});
  ASSERT_EQ(plan.groups.size(), 1u);
  EXPECT_EQ(plan.groups[0].inputs.size(), 4u);
  expect_reasons_complete(plan);
}

// Heads split from and merged back into the model axis by views (a transformer's layout): the
// attention is written in its own [batch, heads, rows, columns] shape, so that its kernel stays
// the loop nest the backends recognize, and the merge is a kernel of its own.
TEST(BeamFuser, AttentionBetweenHeadViewsKeepsItsOwnShape) {
  Fixture f;
  const Node* q = f.g.input(DType::f32, {2, 40, 64}, "q");
  const Node* k = f.g.input(DType::f32, {2, 40, 64}, "k");
  const Node* v = f.g.input(DType::f32, {2, 40, 64}, "v");
  auto heads = [&](const Node* x) {
    return must(f.b.permute(must(f.b.reshape(x, {2, 40, 4, 16})), {0, 2, 1, 3}));
  };
  const Node* a = must(f.b.attention(heads(q), heads(k), heads(v), true, 0.25));
  const Node* y = must(f.b.reshape(must(f.b.permute(a, {0, 2, 1, 3})), {2, 40, 64}));
  FusionPlan plan = f.fuse({y});
  ASSERT_EQ(plan.groups.size(), 2u);
  EXPECT_EQ(plan.groups[0].outputs, (std::vector<const Node*>{a}));
  EXPECT_EQ(plan.groups[0].inputs, (std::vector<const Node*>{q, k, v}));
  EXPECT_EQ(plan.groups[1].outputs, (std::vector<const Node*>{y}));
  expect_reasons_complete(plan);
}

// Two layers' causal attentions share one interned mask node: each kernel computes the mask
// (a comparison of aranges, which the backends recognize as causal) instead of reading a mask
// buffer written by a kernel of its own.
TEST(BeamFuser, AttentionsSharingACausalMaskEachComputeIt) {
  Fixture f;
  const Node* q = f.g.input(DType::f32, {4, 64, 32}, "q");
  const Node* k = f.g.input(DType::f32, {4, 64, 32}, "k");
  const Node* v = f.g.input(DType::f32, {4, 64, 32}, "v");
  const Node* k2 = f.g.input(DType::f32, {4, 64, 32}, "k2");
  const Node* a = must(f.b.attention(q, k, v, true, 0.25));
  const Node* y = must(f.b.attention(a, k2, v, true, 0.25));
  FusionPlan plan = f.fuse({y});
  ASSERT_EQ(plan.groups.size(), 2u);
  EXPECT_EQ(plan.groups[0].inputs, (std::vector<const Node*>{q, k, v}));
  EXPECT_EQ(plan.groups[1].inputs, (std::vector<const Node*>{a, k2, v}));
  for (const FusedGroup& grp : plan.groups)
    EXPECT_TRUE(std::any_of(grp.nodes.begin(), grp.nodes.end(),
                            [](const Node* n) { return n->op == Op::Ge; }));
  expect_reasons_complete(plan);
}

// When the probabilities are an output too they are written, and no matmul is inlined into a
// reduction's loop (the scores would be contracted once per reduction).
TEST(BeamFuser, AttentionWhoseProbabilitiesAreAnOutputIsNotOneKernel) {
  Fixture f;
  const Node* q = f.g.input(DType::f32, {2, 128, 64}, "q");
  const Node* k = f.g.input(DType::f32, {2, 128, 64}, "k");
  const Node* v = f.g.input(DType::f32, {2, 128, 64}, "v");
  const Node* kt = must(f.b.permute(k, {0, 2, 1}));
  const Node* p = must(f.b.softmax(must(f.b.matmul(q, kt)), -1));
  const Node* y = must(f.b.matmul(p, v));
  FusionPlan plan = f.fuse({y, p});
  ASSERT_GE(plan.groups.size(), 2u);
  for (const FusedGroup& grp : plan.groups) {
    int matmuls = 0, reductions = 0;
    for (const Node* n : grp.nodes) {
      matmuls += n->op == Op::Matmul;
      reductions += ir::is_reduce(n->op);
    }
    EXPECT_FALSE(matmuls > 0 && reductions > 0) << "a matmul inlined into a reduction's loop";
  }
  expect_reasons_complete(plan);
}

TEST(BeamFuser, MeanAndVarianceOfTheSameRowsShareOneKernel) {
  Fixture f;
  const Node* x = f.g.input(DType::f32, {256, 512}, "x");
  const Node* mean = must(f.b.mean(x, std::vector<int64_t>{1}, true));
  const Node* d = f.bin(Op::Sub, x, mean);
  const Node* var = must(f.b.mean(f.bin(Op::Mul, d, d), std::vector<int64_t>{1}, true));
  FusionPlan plan = f.fuse({mean, var});
  ASSERT_EQ(plan.groups.size(), 1u);
  EXPECT_EQ(plan.groups[0].outputs, (std::vector<const Node*>{mean, var}));
  EXPECT_EQ(plan.groups[0].inputs, (std::vector<const Node*>{x}));
}

// A decoder's attention output projection, its residual and the RMSNorm that follows: the norm's
// sum of squares reads the product's row, so in one kernel both would be plain loops re-running
// the contraction (no matmul loop nest; 141 us against 3.9 as two kernels). The projection and
// the residual are one kernel, the norm another, whatever the launch overhead.
TEST(BeamFuser, AReductionOfAMatmulsRowIsItsOwnKernel) {
  for (const double launch : {5e-6, 50e-6}) {
    DeviceRates rates = DeviceRates::reference_cpu();
    rates.launch_overhead = launch;
    rates.matmul_rate = 250e9;
    Fixture f;
    f.model = CostModel(rates);
    const Node* o = f.g.input(DType::f32, {1, 256}, "o");
    const Node* x = f.g.input(DType::f32, {1, 256}, "x");
    const Node* w = f.g.input(DType::f32, {256, 256}, "w");
    const Node* gain = f.g.input(DType::f32, {256}, "gain");
    const Node* mm = must(f.b.matmul(o, w));
    const Node* h = f.bin(Op::Add, x, mm);
    const Node* ms = must(f.b.mean(f.bin(Op::Mul, h, h), std::vector<int64_t>{1}, true));
    const Node* y = f.bin(Op::Mul, f.bin(Op::Mul, h, f.un(Op::Rsqrt, f.bin(Op::Add, ms, f.lit(1e-5)))), gain);
    FusionPlan plan = f.fuse({h, y});
    for (const FusedGroup& grp : plan.groups)
      EXPECT_FALSE(contains(grp.nodes, mm) && contains(grp.nodes, ms))
          << "launch " << launch << ": the sum re-runs the matmul in its kernel";
    ASSERT_EQ(plan.groups.size(), 2u) << "launch " << launch;
    EXPECT_EQ(plan.groups[0].outputs, (std::vector<const Node*>{h}));
    expect_reasons_complete(plan);
  }
}

// A decoder's q, k and v projections of one row, and a cache update that takes the v row: each
// projection is a kernel of its own (the backends' matmul loop nest computes one contraction),
// and the v projection is not computed inside the [512, 256] update, once per row of it.
TEST(BeamFuser, EachMatmulIsAKernelOfItsOwnShape) {
  for (const bool measured_like : {false, true}) {
    Fixture f;
    if (measured_like) {
      DeviceRates rates = DeviceRates::reference_cpu();
      rates.launch_overhead = 20e-6;
      rates.matmul_rate = 250e9;
      f.model = CostModel(rates);
    }
    const Node* h = f.g.input(DType::f32, {1, 256}, "h");
    const Node* here = f.g.input(DType::boolean, {512, 1}, "here");
    const Node* cache = f.g.input(DType::f32, {512, 256}, "cache");
    std::vector<const Node*> proj;
    for (const char* name : {"wq", "wk", "wv"})
      proj.push_back(must(f.b.matmul(h, f.g.input(DType::f32, {256, 256}, name))));
    const Node* q = f.un(Op::Relu, proj[0]);
    const Node* k = f.un(Op::Relu, proj[1]);
    const Node* updated = must(f.b.where(here, proj[2], cache));
    FusionPlan plan = f.fuse({q, k, updated});
    for (const FusedGroup& grp : plan.groups) {
      int matmuls = 0;
      for (const Node* n : grp.nodes) {
        if (n->op != Op::Matmul) continue;
        ++matmuls;
        for (const Node* o : grp.outputs)
          EXPECT_EQ(o->shape, n->shape) << "a matmul computed in a kernel of another shape";
      }
      EXPECT_LE(matmuls, 1) << (measured_like ? "measured-like rates" : "reference rates");
    }
    EXPECT_EQ(reason_of(plan, proj[2], updated), "matmul result read in another shape");
    expect_reasons_complete(plan);
  }
}

// The cost model prices a matmul that a reduction's loop runs again as two loose contractions,
// not two runs at the matmul rate.
TEST(CostModel, AMatmulRunAgainByAReductionIsPricedAsLooseContractions) {
  DeviceRates rates = DeviceRates::reference_cpu();
  rates.matmul_rate = 250e9;
  const CostModel model(rates);
  Fixture f;
  const Node* o = f.g.input(DType::f32, {1, 256}, "o");
  const Node* w = f.g.input(DType::f32, {256, 256}, "w");
  const Node* mm = must(f.b.matmul(o, w));
  const Node* sq = f.bin(Op::Mul, mm, mm);
  const Node* sum = f.red(Op::Sum, sq, 1);
  const Node* y = f.bin(Op::Mul, mm, sum);
  const FusedGroup fused{.nodes = {mm, sq, sum, y}, .outputs = {y}, .inputs = {o, w}};
  const FusedGroup alone{.nodes = {mm}, .outputs = {mm}, .inputs = {o, w}};
  const GroupCost c = model.estimate(fused);
  const double contraction = 2.0 * 256 * 256;
  EXPECT_GE(c.seconds, model.loose_contraction_seconds(2 * contraction));
  EXPECT_LT(model.estimate(alone).seconds, model.loose_contraction_seconds(contraction) / 4);
}

// One step of Conway's life on a torus: the eight rolled neighbours of `g`.
const Node* life_step(Fixture& f, const Node* g) {
  const Node* n = nullptr;
  for (int64_t dy : {-1, 0, 1})
    for (int64_t dx : {-1, 0, 1}) {
      if (dy == 0 && dx == 0) continue;
      const Node* r = must(f.b.roll(g, {dy, dx}, {0, 1}));
      n = n ? f.bin(Op::Add, n, r) : r;
    }
  const Node* three = f.bin(Op::Eq, n, f.lit(3));
  const Node* two = f.bin(Op::Eq, n, f.lit(2));
  const Node* alive = f.bin(Op::Eq, g, f.lit(1));
  const Node* next = f.bin(Op::Or, three, f.bin(Op::And, alive, two));
  return must(f.b.cast(next, DType::f32));
}

TEST(BeamFuser, LifeStencilChainIsOneGroupPerStep) {
  Fixture f;
  const Node* g = f.g.input(DType::f32, {32, 32}, "g");
  std::vector<const Node*> steps;
  for (int s = 0; s < 12; ++s) steps.push_back(g = life_step(f, g));
  FusionPlan plan = f.fuse({g});
  ASSERT_EQ(plan.groups.size(), steps.size());
  for (size_t s = 0; s < steps.size(); ++s) {
    EXPECT_EQ(plan.groups[s].outputs, (std::vector<const Node*>{steps[s]}));
    if (s > 0) {
      EXPECT_EQ(plan.groups[s].inputs, (std::vector<const Node*>{steps[s - 1]}));
    }
  }
  expect_reasons_complete(plan);
  bool views = std::any_of(plan.reasons.begin(), plan.reasons.end(), [](const FusionReason& r) {
    return r.reason == "read through several views";
  });
  EXPECT_TRUE(views);
}

TEST(BeamFuser, ColumnReductionIsMaterializedRatherThanRecomputedPerRow) {
  Fixture f;
  const Node* x = f.g.input(DType::f32, {256, 256}, "x");
  const Node* y = must(f.b.softmax(x, 0));  // column softmax
  FusionPlan plan = f.fuse({y});
  ASSERT_GE(plan.groups.size(), 2u);
  for (const FusedGroup& grp : plan.groups)
    for (const Node* n : grp.nodes)
      if (ir::is_reduce(n->op)) {
        EXPECT_EQ(n->shape, grp.outputs[0]->shape) << "reduction inlined";
      }
  expect_reasons_complete(plan);
}

// t = x*2 (cheap) or five tanh of x (expensive), read by a [R,C] output and a row sum.
struct SharedValue {
  Fixture f;
  const Node* x = f.g.input(DType::f32, {256, 256}, "x");
  const Node* t;
  const Node* u;
  const Node* r;
  explicit SharedValue(bool expensive) {
    t = f.bin(Op::Mul, x, f.lit(2));
    for (int i = 0; expensive && i < 5; ++i) t = f.un(Op::Tanh, t);
    u = f.bin(Op::Add, t, f.lit(1));
    r = must(f.b.reduce(Op::Sum, t, std::vector<int64_t>{1}, false));
  }
};

TEST(BeamFuser, CheapValueReadByTwoGroupsIsRecomputed) {
  SharedValue s(false);
  FusionPlan plan = s.f.fuse({s.u, s.r});
  ASSERT_EQ(plan.groups.size(), 2u);
  for (const FusedGroup& grp : plan.groups) {
    EXPECT_TRUE(contains(grp.nodes, s.t));
    EXPECT_FALSE(contains(grp.outputs, s.t));
    EXPECT_EQ(grp.inputs, (std::vector<const Node*>{s.x}));
  }
}

TEST(BeamFuser, ExpensiveValueReadByTwoGroupsIsMaterialized) {
  SharedValue s(true);
  FusionPlan plan = s.f.fuse({s.u, s.r});
  ASSERT_EQ(plan.groups.size(), 2u);
  EXPECT_EQ(plan.groups[0].outputs, (std::vector<const Node*>{s.t, s.u}));
  EXPECT_EQ(plan.groups[1].inputs, (std::vector<const Node*>{s.t}));
  // r cannot join t's [R,C] kernel, and recomputing five tanh per element costs more than a buffer.
  EXPECT_EQ(reason_of(plan, s.t, s.r), "cheaper to materialize");
  expect_reasons_complete(plan);
}

TEST(BeamFuser, GreedyClosesTheOnlyOpenGroupWhereTheBeamKeepsTwo) {
  // Two interleaved chains of different shapes whose every value is an output: greedy fusion
  // (one open group) must start a kernel per node; the beam keeps both chains open.
  Fixture f;
  const Node* x = f.g.input(DType::f32, {64, 64}, "x");
  const Node* y = f.g.input(DType::f32, {32}, "y");
  Outputs outs;
  for (int i = 0; i < 4; ++i) {
    x = f.un(Op::Tanh, x);
    y = f.un(Op::Sin, y);
    outs.push_back(x);
    outs.push_back(y);
  }
  FusionPlan beam = f.fuse(outs);
  FusionPlan greedy = f.fuse(outs, {.max_blocks = 1, .beam_width = 1});
  EXPECT_EQ(beam.groups.size(), 2u);
  EXPECT_EQ(greedy.groups.size(), 8u);
  EXPECT_LT(beam.total_seconds, greedy.total_seconds);
  EXPECT_EQ(reason_of(greedy, x->inputs[0], x), "max_blocks reached");
  expect_reasons_complete(greedy);
  expect_reasons_complete(beam);
}

// A kernel computes at most kMaxGroupNodes ops: compile time grows faster than linearly in a
// kernel's size, so a longer chain is cut, and the cut says why.
TEST(BeamFuser, ALongChainIsCutIntoKernelsOfBoundedSize) {
  Fixture f;
  const Node* x = f.g.input(DType::f32, {16}, "x");
  std::vector<const Node*> chain;
  for (int i = 0; i < 2500; ++i) chain.push_back(x = f.un(i % 2 ? Op::Tanh : Op::Sin, x));
  FusionPlan plan = f.fuse({x});
  ASSERT_EQ(plan.groups.size(), (chain.size() + kMaxGroupNodes - 1) / kMaxGroupNodes);
  size_t total = 0;
  for (const FusedGroup& grp : plan.groups) {
    EXPECT_LE(grp.nodes.size(), static_cast<size_t>(kMaxGroupNodes));
    total += grp.nodes.size();
  }
  EXPECT_EQ(total, chain.size()) << "each op computed once";
  EXPECT_EQ(reason_of(plan, chain[kMaxGroupNodes - 1], chain[kMaxGroupNodes]), "kernel size limit");
  expect_reasons_complete(plan);
}

TEST(BeamFuser, ConsumerOfTwoDependentGroupsCannotJoinTheFirst) {
  // a (expensive, [R,C]) -> s = row sum of a ([R], an output) -> y = a * s ([R,C]). y in a's
  // group would read s, which reads a: a cycle between the two kernels.
  Fixture f;
  const Node* x = f.g.input(DType::f32, {128, 128}, "x");
  const Node* a = x;
  for (int i = 0; i < 5; ++i) a = f.un(Op::Tanh, a);
  const Node* s = must(f.b.reduce(Op::Sum, a, std::vector<int64_t>{1}, false));
  const Node* y = f.bin(Op::Mul, a, must(f.b.reshape(s, {128, 1})));
  FusionPlan plan = f.fuse({s, y});
  ASSERT_EQ(plan.groups.size(), 3u);
  EXPECT_EQ(plan.groups[0].outputs, (std::vector<const Node*>{a}));
  EXPECT_EQ(reason_of(plan, a, s), "cheaper to materialize");
  EXPECT_EQ(reason_of(plan, s, y->inputs[1]), "shape mismatch");  // s, an output, read via reshape
  EXPECT_EQ(reason_of(plan, a, y), "would create a cycle");
  expect_reasons_complete(plan);
}

// Other paths between groups are traced for at most 1024 producers at a time. Fusion
// over 1100 values of distinct shapes, each read back after its group was closed, asks about
// 1100 producers; the cycle of the test above, placed last, is answered in the second pass.
TEST(BeamFuser, CyclesAreFoundPastAThousandProducerGroups) {
  Fixture f;
  Outputs outs;
  std::vector<const Node*> first;
  for (int64_t i = 0; i < 1100; ++i) {
    first.push_back(f.un(Op::Tanh, f.g.input(DType::f32, {i + 1}, fmt::format("x{}", i))));
    outs.push_back(first.back());
  }
  std::vector<const Node*> second;
  for (const Node* p : first) {
    second.push_back(f.un(Op::Exp, p));
    outs.push_back(second.back());
  }
  const Node* a = f.g.input(DType::f32, {128, 128}, "x");
  for (int i = 0; i < 5; ++i) a = f.un(Op::Tanh, a);
  const Node* s = must(f.b.reduce(Op::Sum, a, std::vector<int64_t>{1}, false));
  const Node* y = f.bin(Op::Mul, a, must(f.b.reshape(s, {128, 1})));
  for (const Node* out : {a, s, y}) outs.push_back(out);  // a an output: written by its kernel
  FusionPlan plan = f.fuse(outs);
  for (size_t i = 0; i < first.size(); ++i)
    ASSERT_EQ(reason_of(plan, first[i], second[i]), "max_blocks reached") << i;
  EXPECT_EQ(reason_of(plan, a, y), "would create a cycle");
  expect_reasons_complete(plan);
}

TEST(BeamFuser, ViewsAndSourcesAsOutputsAreWrittenByAKernel) {
  Fixture f;
  const Node* x = f.g.input(DType::f32, {4, 6}, "x");
  const Node* t = f.un(Op::Exp, x);
  const Node* tp = must(f.b.permute(t, {1, 0}));
  const Node* ones = must(f.b.full({6, 4}, 1, DType::f32));
  const Node* sum = f.bin(Op::Add, tp, ones);
  FusionPlan plan = f.fuse({x, tp, ones, sum});
  size_t outputs = 0;
  for (const FusedGroup& grp : plan.groups) {
    outputs += grp.outputs.size();
    EXPECT_FALSE(contains(grp.nodes, x));
    for (const Node* o : grp.outputs) EXPECT_EQ(o->shape, grp.outputs[0]->shape);
  }
  EXPECT_EQ(outputs, 3u);  // the input x is no kernel's output
  expect_reasons_complete(plan);
  std::vector<testing::Buffer> got =
      testing::run_fusion_plan(plan, {tp, ones, sum}, {{x, testing::iota(24, -12)}});
  ASSERT_EQ(got.size(), 3u);
  ASSERT_EQ(got[2].size(), 24u);
  EXPECT_NEAR(got[2][1], std::exp(static_cast<float>(-12 + 6)) + 1, 1e-4);  // [0,1] = x[1,0]
}

TEST(BeamFuser, GraphOfOnlyInputsHasNoGroups) {
  Fixture f;
  const Node* x = f.g.input(DType::f32, {4}, "x");
  FusionPlan plan = f.fuse({x});
  EXPECT_TRUE(plan.groups.empty());
  EXPECT_EQ(plan.total_seconds, 0);
}

// Placements of equal work (the `+ 1` after matmul and relu at the end of the matmul's kernel, or
// at the start of the softmax's) sum the same terms in another order, and their costs differ in
// the last bits, which fall either way as the batch changes. The search compares costs at float
// precision, so every batch groups alike: before, batch 17 grouped otherwise than 16 and 31,
// and the automatic shape policy met a "first" kernel again at such a change
// (docs/dynamic-shapes.md). Below 13 rows one kernel is cheaper: a difference in work, not a tie.
TEST(BeamFuser, EqualWorkGroupsAlikeAtEveryBatch) {
  DeviceRates measured;  // rates of the kind a cpu device measures
  measured.matmul_rate = 180e9;
  measured.cache_bandwidth = 90e9;
  measured.serial_compute_rate = 30e9;
  measured.op_seconds = {{Op::Exp, 0.35e-9}};
  for (const DeviceRates& rates : {DeviceRates::reference_cpu(), measured}) {
    SCOPED_TRACE(rates.str());
    CostModel model(rates);
    std::string first;
    for (int64_t n : {13, 16, 17, 31, 32, 33, 64, 100, 1000}) {
      testing::GraphFixture f;
      const Node* x = f.g.input(DType::f32, {n, 16}, "x");
      const Node* w = f.g.input(DType::f32, {16, 8}, "w");
      const Node* a = f.bin(Op::Add, f.un(Op::Relu, must(f.b.matmul(x, w))), f.lit(1.0));
      const Node* e = f.un(Op::Exp, f.bin(Op::Sub, a, f.red(Op::ReduceMax, a, 1)));
      const Node* y = f.bin(Op::Div, e, f.red(Op::Sum, e, 1));
      const FusionPlan plan = make_beam_fuser(model, {})->fuse({y});
      // The grouping by node ids (the same ids at every n: the graph is built alike).
      std::string groups;
      for (const FusedGroup& grp : plan.groups) {
        groups += "[";
        for (const Node* node : grp.nodes) groups += fmt::format(" %{}", node->id);
        groups += " ]";
      }
      if (first.empty()) first = groups;
      EXPECT_EQ(groups, first) << "n = " << n;
    }
  }
}

}  // namespace
}  // namespace kiln::passes
