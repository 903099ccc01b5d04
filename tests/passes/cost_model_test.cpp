// The fusion cost model on small groups with known answers: bytes, hoisted work, and which of
// two partitions of the same graph is cheaper.
#include <gtest/gtest.h>

#include <algorithm>

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
  double seconds(const std::vector<FusedGroup>& groups) {
    double s = 0;
    for (const FusedGroup& grp : groups) s += model.estimate(grp).seconds;
    return s;
  }
};

TEST(CostModel, FormulaAddsBytesLaunchesAndWork) {
  Fixture f;
  const Node* x = f.g.input(DType::f32, {1000}, "x");
  const Node* y = f.un(Op::Exp, x);
  GroupCost c = f.model.estimate({.nodes = {y}, .outputs = {y}, .inputs = {x}});
  EXPECT_DOUBLE_EQ(c.bytes, 8000);  // 4000 read + 4000 written
  EXPECT_EQ(c.launches, 1);
  EXPECT_DOUBLE_EQ(c.flops, 20 * 1000);
  DeviceRates r = DeviceRates::reference_cpu();
  EXPECT_DOUBLE_EQ(c.seconds, 8000 / r.bandwidth + r.launch_overhead + 20000 / r.compute_rate);
}

// An embedding lookup reads the rows it gathers, not the table; a group that also reads the table
// another way reads all of it.
TEST(CostModel, AGatheredTableCountsTheRowsItGives) {
  Fixture f;
  const Node* table = f.g.input(DType::f32, {4096, 256}, "table");
  const Node* ids = f.g.input(DType::i32, {1}, "ids");
  const Node* row = must(f.b.gather(table, ids, 0));  // [1, 256]
  const Node* y = f.un(Op::Exp, row);
  GroupCost c = f.model.estimate({.nodes = {row, y}, .outputs = {y}, .inputs = {table, ids}});
  EXPECT_DOUBLE_EQ(c.bytes, 256 * 4 + 4 + 256 * 4);  // the row, the id, the output
  const Node* total = f.red(Op::Sum, table, 1);      // [4096, 1]: reads the whole table
  GroupCost both = f.model.estimate({.nodes = {row, y, total}, .outputs = {y, total}, .inputs = {table, ids}});
  EXPECT_DOUBLE_EQ(both.bytes, 4096.0 * 256 * 4 + 4 + 256 * 4 + 4096 * 4);
}

TEST(CostModel, WorkIsPricedByKindAndSmallBuffersAtTheCacheBandwidth) {
  // Measured rates by kind: matmul flops, each costly op (exp) its time per element, and the rest
  // at the compute rate; an intermediate of at most kCacheResidentBytes at the cache bandwidth.
  DeviceRates r = DeviceRates::reference_cpu();
  r.matmul_rate = 400e9;
  r.op_seconds[Op::Exp] = 0.1e-9;  // per element
  r.cache_bandwidth = 128e9;
  CostModel model(r);
  testing::GraphFixture f;
  const Node* x = f.g.input(DType::f32, {1000}, "x");
  const Node* e = f.un(Op::Exp, x);
  const Node* a = f.bin(Op::Add, e, x);
  GroupCost c = model.estimate({.nodes = {e, a}, .outputs = {a}, .inputs = {x}});
  EXPECT_DOUBLE_EQ(c.flops, 21 * 1000);
  // x is a graph input: from memory; a (4000 bytes) stays in the caches.
  EXPECT_DOUBLE_EQ(c.seconds, 4000 / r.bandwidth + 4000 / 128e9 + r.launch_overhead + 1000 * 0.1e-9 +
                                  1000 / r.compute_rate);
  const Node* z = f.un(Op::Neg, a);  // reading the intermediate a: both buffers in the caches
  GroupCost zc = model.estimate({.nodes = {z}, .outputs = {z}, .inputs = {a}});
  EXPECT_DOUBLE_EQ(zc.seconds, 8000 / 128e9 + r.launch_overhead + 1000 / r.compute_rate);
  const Node* big = f.g.input(DType::f32, {1 << 21}, "big");  // 8 MiB: memory
  const Node* y = f.un(Op::Neg, big);
  GroupCost b = model.estimate({.nodes = {y}, .outputs = {y}, .inputs = {big}});
  EXPECT_DOUBLE_EQ(b.seconds, 2.0 * (1 << 23) / r.bandwidth + r.launch_overhead + (1 << 21) / r.compute_rate);
  const Node* p = f.g.input(DType::f32, {64, 32}, "p");
  const Node* q = f.g.input(DType::f32, {32, 16}, "q");
  const Node* mm = must(f.b.matmul(p, q));
  GroupCost m = model.estimate({.nodes = {mm}, .outputs = {mm}, .inputs = {p, q}});
  EXPECT_DOUBLE_EQ(m.flops, 2.0 * 64 * 16 * 32);
  EXPECT_DOUBLE_EQ(m.seconds, 4.0 * (64 * 32 + 32 * 16) / r.bandwidth + 4.0 * 64 * 16 / 128e9 +
                                  r.launch_overhead + 2.0 * 64 * 16 * 32 / 400e9);
  // Without the rates by kind (the reference rates), everything is priced as before.
  CostModel plain(DeviceRates::reference_cpu());
  EXPECT_DOUBLE_EQ(plain.estimate({.nodes = {mm}, .outputs = {mm}, .inputs = {p, q}}).seconds,
                   4.0 * (64 * 32 + 32 * 16 + 64 * 16) / 32e9 + 5e-6 + 2.0 * 64 * 16 * 32 / 50e9);
}

// A group of fewer than kOneCoreWorkOps operations runs on one core (the cpu wakes no worker for
// it): its work is priced at the serial rate where the device measured one, a larger group's at
// the rate of all cores.
TEST(CostModel, WorkTooSmallToWakeASecondCoreIsPricedOnOne) {
  DeviceRates r = DeviceRates::reference_cpu();
  r.compute_rate = 100e9;
  r.serial_compute_rate = 40e9;
  r.op_seconds[Op::Exp] = 0.1e-9;
  CostModel model(r);
  testing::GraphFixture f;
  const Node* x = f.g.input(DType::f32, {4096}, "x");
  const Node* e = f.un(Op::Exp, x);
  const Node* a = f.bin(Op::Add, e, x);  // 21 operations a point: 86016 in all
  GroupCost small = model.estimate({.nodes = {e, a}, .outputs = {a}, .inputs = {x}});
  ASSERT_LT(small.flops, kOneCoreWorkOps);
  const double work = (4096 * 0.1e-9 + 4096 / 100e9) * (100e9 / 40e9);
  EXPECT_DOUBLE_EQ(small.seconds, 2 * 4096 * 4 / r.bandwidth + r.launch_overhead + work);
  // Without a serial rate (the reference rates, a GPU's), the same group at the all-core rates.
  GroupCost plain = Fixture{}.model.estimate({.nodes = {e, a}, .outputs = {a}, .inputs = {x}});
  DeviceRates ref = DeviceRates::reference_cpu();
  EXPECT_DOUBLE_EQ(plain.seconds, 2 * 4096 * 4 / ref.bandwidth + ref.launch_overhead + small.flops / ref.compute_rate);
  // 64 times the points: over the threshold, every core's rate.
  const Node* big = f.g.input(DType::f32, {4096 * 64}, "big");
  const Node* be = f.un(Op::Exp, big);
  const Node* ba = f.bin(Op::Add, be, big);
  GroupCost large = model.estimate({.nodes = {be, ba}, .outputs = {ba}, .inputs = {big}});
  ASSERT_GE(large.flops, kOneCoreWorkOps);
  EXPECT_DOUBLE_EQ(large.seconds, 2 * 4096 * 64 * 4 / r.bandwidth + r.launch_overhead +
                                      4096 * 64 * (0.1e-9 + 1 / 100e9));
}

TEST(CostModel, ElementwiseChainIsCheaperFused) {
  Fixture f;
  const int64_t n = 1 << 16;
  const Node* a = f.g.input(DType::f32, {n}, "a");
  const Node* b = f.g.input(DType::f32, {n}, "b");
  const Node* c = f.g.input(DType::f32, {n}, "c");
  const Node* mul = f.bin(Op::Mul, a, b);
  const Node* add = f.bin(Op::Add, mul, c);
  const Node* y = f.un(Op::Gelu, add);
  FusedGroup fused{.nodes = {mul, add, y}, .outputs = {y}, .inputs = {a, b, c}};
  GroupCost fc = f.model.estimate(fused);
  EXPECT_DOUBLE_EQ(fc.bytes, 4.0 * n * 4);
  EXPECT_DOUBLE_EQ(fc.flops, (1 + 1 + 25) * static_cast<double>(n));
  std::vector<FusedGroup> split{{.nodes = {mul}, .outputs = {mul}, .inputs = {a, b}},
                                {.nodes = {add}, .outputs = {add}, .inputs = {mul, c}},
                                {.nodes = {y}, .outputs = {y}, .inputs = {add}}};
  EXPECT_LT(fc.seconds, f.seconds(split));
}

TEST(CostModel, RowReductionReadThroughBroadcastIsComputedOncePerRow) {
  Fixture f;
  const int64_t r = 256, cols = 256;
  const Node* x = f.g.input(DType::f32, {r, cols}, "x");
  const Node* m = f.red(Op::ReduceMax, x, 1);  // [R,1]
  const Node* y = f.un(Op::Exp, f.bin(Op::Sub, x, m));
  const Node* sub = y->inputs[0];
  FusedGroup fused{.nodes = {m, sub, y}, .outputs = {y}, .inputs = {x}};
  // The max's R*C body once, then sub and exp per element.
  EXPECT_DOUBLE_EQ(f.model.estimate(fused).flops, static_cast<double>(r * cols) * (1 + 1 + 20));
  std::vector<FusedGroup> split{{.nodes = {m}, .outputs = {m}, .inputs = {x}},
                                {.nodes = {sub, y}, .outputs = {y}, .inputs = {x, m}}};
  EXPECT_LT(f.model.estimate(fused).seconds, f.seconds(split));
}

TEST(CostModel, ColumnReductionFusedIntoItsConsumerIsRecomputedPerRow) {
  Fixture f;
  const int64_t r = 256, cols = 256;
  const Node* x = f.g.input(DType::f32, {r, cols}, "x");
  const Node* m = f.red(Op::ReduceMax, x, 0);  // [1,C]: depends on the inner loop
  const Node* y = f.un(Op::Exp, f.bin(Op::Sub, x, m));
  const Node* sub = y->inputs[0];
  FusedGroup fused{.nodes = {m, sub, y}, .outputs = {y}, .inputs = {x}};
  double rc = static_cast<double>(r * cols);
  EXPECT_DOUBLE_EQ(f.model.estimate(fused).flops, rc * static_cast<double>(r) + rc * 21);
  std::vector<FusedGroup> split{{.nodes = {m}, .outputs = {m}, .inputs = {x}},
                                {.nodes = {sub, y}, .outputs = {y}, .inputs = {x, m}}};
  EXPECT_GT(f.model.estimate(fused).seconds, f.seconds(split));
}

TEST(CostModel, MatmulCountsItsContraction) {
  Fixture f;
  const Node* x = f.g.input(DType::f32, {8, 16}, "x");
  const Node* w = f.g.input(DType::f32, {16, 4}, "w");
  const Node* mm = must(f.b.matmul(x, w));
  GroupCost c = f.model.estimate({.nodes = {mm}, .outputs = {mm}, .inputs = {x, w}});
  EXPECT_DOUBLE_EQ(c.flops, 2.0 * 8 * 4 * 16);
  EXPECT_DOUBLE_EQ(c.bytes, 4.0 * (8 * 16 + 16 * 4 + 8 * 4));
}

TEST(CostModel, ElementwiseOperandOfAnInlinedMatmulIsRecomputedPerColumn) {
  // tanh(x) read as a matmul operand depends on the row and the contraction loop, not on the
  // output column: it is evaluated N times per element, once per column.
  Fixture f;
  const Node* x = f.g.input(DType::f32, {8, 16}, "x");
  const Node* w = f.g.input(DType::f32, {16, 4}, "w");
  const Node* t = f.un(Op::Tanh, x);
  const Node* mm = must(f.b.matmul(t, w));
  GroupCost c = f.model.estimate({.nodes = {t, mm}, .outputs = {mm}, .inputs = {x, w}});
  EXPECT_DOUBLE_EQ(c.flops, 2.0 * 8 * 4 * 16 + 20.0 * 8 * 16 * 4);
}

TEST(CostModel, MatmulInlinedIntoASoftmaxIsContractedOncePerLoopNest) {
  // softmax(x @ w) in one kernel: the scores are evaluated by the max's loop, the sum's loop and
  // the output loop; with them materialized, the softmax reads a buffer.
  Fixture f;
  const Node* x = f.g.input(DType::f32, {64, 256}, "x");
  const Node* w = f.g.input(DType::f32, {256, 64}, "w");
  const Node* s = must(f.b.matmul(x, w));
  const Node* y = must(f.b.softmax(s, -1));
  std::vector<const Node*> nodes = ir::topo_order({y});
  nodes.erase(
      std::remove_if(nodes.begin(), nodes.end(), [](const Node* n) { return n->op == Op::Input; }),
      nodes.end());
  FusedGroup fused{.nodes = nodes, .outputs = {y}, .inputs = {x, w}};
  double contraction = 2.0 * 64 * 64 * 256;
  EXPECT_GE(f.model.estimate(fused).flops, 3 * contraction);
  EXPECT_LT(f.model.estimate(fused).flops, 3 * contraction + 64 * 64 * 100);
  std::vector<const Node*> rest(nodes.begin() + 1, nodes.end());
  ASSERT_EQ(nodes[0], s);
  std::vector<FusedGroup> split{{.nodes = {s}, .outputs = {s}, .inputs = {x, w}},
                                {.nodes = rest, .outputs = {y}, .inputs = {s}}};
  EXPECT_LT(f.seconds(split), f.model.estimate(fused).seconds);
}

TEST(CostModel, MatmulReducedByItsOnlyReaderIsContractedOnce) {
  Fixture f;
  const Node* x = f.g.input(DType::f32, {64, 256}, "x");
  const Node* w = f.g.input(DType::f32, {256, 64}, "w");
  const Node* s = must(f.b.matmul(x, w));
  const Node* r = f.red(Op::Sum, f.un(Op::Relu, s), 1);
  const Node* relu = r->inputs[0];
  GroupCost c = f.model.estimate({.nodes = {s, relu, r}, .outputs = {r}, .inputs = {x, w}});
  EXPECT_DOUBLE_EQ(c.flops, 2.0 * 64 * 64 * 256 + 64 * 64 + 64 * 64);
}

TEST(CostModel, DeadNodesCostNothing) {
  Fixture f;
  const Node* x = f.g.input(DType::f32, {100}, "x");
  const Node* unused = f.un(Op::Exp, x);
  const Node* y = f.un(Op::Neg, x);
  GroupCost c = f.model.estimate({.nodes = {unused, y}, .outputs = {y}, .inputs = {x}});
  EXPECT_DOUBLE_EQ(c.flops, 100);
}

}  // namespace
}  // namespace kiln::passes
