// Lowering: kernels of every movement op, broadcasting, reductions, argmax and matmul, run by the
// test interpreter and compared with hand-computed values.
#include <gtest/gtest.h>

#include <cmath>

#include "passes/lower.h"
#include "tests/passes/test_support.h"

namespace kiln::passes {
namespace {

using ir::DType;
using ir::Node;
using ir::Op;
using testing::Buffer;
using testing::iota;
using testing::must;
using testing::run_one_group;

struct Fixture {
  ir::Graph g;
  ir::Builder b{g};
  const Node* in(ir::Shape s, const char* name = "x") {
    return g.input(DType::f32, std::move(s), name);
  }
  const Node* bin(Op op, const Node* l, const Node* r) { return must(b.binary(op, l, r)); }
  // Runs a unary view of x = iota(numel) through a kernel.
  Buffer view(const Node* x, const Node* y) { return run_one_group(y, {{x, iota(x->numel())}}); }
};

std::string kernel_text(const Node* out) {
  FusionPlan plan = make_first_fuser()->fuse({out});
  auto lowered = lower_group(plan.groups.at(0), "k");
  return lowered ? kir::print_kernel(lowered->kernel) : lowered.error().message;
}

int count(const std::string& text, const std::string& word) {
  int n = 0;
  for (size_t p = text.find(word); p != std::string::npos; p = text.find(word, p + 1)) ++n;
  return n;
}

TEST(Lower, GeluOfFmaHasOneStoreAndThreeLoads) {
  Fixture f;
  const Node* a = f.in({16777216}, "a");
  const Node* b = f.in({16777216}, "b");
  const Node* c = f.in({16777216}, "c");
  const Node* y = must(f.b.unary(Op::Gelu, f.bin(Op::Add, f.bin(Op::Mul, a, b), c)));
  std::string text = kernel_text(y);
  EXPECT_EQ(count(text, "store "), 1) << text;
  EXPECT_EQ(count(text, " = load "), 3) << text;
  EXPECT_EQ(count(text, "param "), 4) << text;
  EXPECT_NE(text.find("domain [16777216]"), std::string::npos) << text;
  EXPECT_NE(text.find("# a"), std::string::npos) << text;
}

TEST(Lower, ContiguousReshapeNeedsNoIndexArithmetic) {
  Fixture f;
  const Node* x = f.in({2, 3});
  const Node* y = must(f.b.reshape(x, {3, 2}));
  EXPECT_EQ(f.view(x, y), iota(6));
  std::string text = kernel_text(must(f.b.unary(Op::Exp, y)));
  EXPECT_EQ(count(text, "idiv"), 0) << text;
  EXPECT_EQ(count(text, "mod"), 0) << text;
}

TEST(Lower, PermuteThenReshape) {
  Fixture f;
  const Node* x = f.in({2, 3});
  const Node* t = must(f.b.permute(x, {1, 0}));  // [3,2]: [[0,3],[1,4],[2,5]]
  EXPECT_EQ(f.view(x, t), (Buffer{0, 3, 1, 4, 2, 5}));
  EXPECT_EQ(f.view(x, must(f.b.reshape(t, {2, 3}))), (Buffer{0, 3, 1, 4, 2, 5}));
}

TEST(Lower, ExpandAndBroadcasting) {
  Fixture f;
  const Node* col = f.in({3, 1}, "col");
  const Node* row = f.in({4}, "row");
  EXPECT_EQ(f.view(col, must(f.b.expand(col, {2, 3, 2}))),
            (Buffer{0, 0, 1, 1, 2, 2, 0, 0, 1, 1, 2, 2}));
  const Node* sum = f.bin(Op::Add, col, row);  // [3,4]: col*? + row
  Buffer got = run_one_group(sum, {{col, {10, 20, 30}}, {row, {1, 2, 3, 4}}});
  EXPECT_EQ(got, (Buffer{11, 12, 13, 14, 21, 22, 23, 24, 31, 32, 33, 34}));
}

TEST(Lower, SliceWithStepsAndNegativeStep) {
  Fixture f;
  const Node* x = f.in({2, 5});
  EXPECT_EQ(f.view(x, must(f.b.slice(x, 1, 1, std::nullopt, 2))), (Buffer{1, 3, 6, 8}));
  EXPECT_EQ(f.view(x, must(f.b.slice(x, 1, std::nullopt, std::nullopt, -2))),
            (Buffer{4, 2, 0, 9, 7, 5}));
  EXPECT_EQ(f.view(x, must(f.b.slice(x, 0, -1, std::nullopt, 1))), (Buffer{5, 6, 7, 8, 9}));
}

TEST(Lower, PadGuardsEveryLoad) {
  Fixture f;
  const Node* x = f.in({2, 2});
  const Node* y = must(f.b.pad(x, {1, 0}, {0, 2}, -1.0));  // [3,4]
  EXPECT_EQ(f.view(x, y), (Buffer{-1, -1, -1, -1, 0, 1, -1, -1, 2, 3, -1, -1}));
  // A slice that reads only padding becomes the constant.
  const Node* only_pad = must(f.b.slice(y, 0, 0, 1, 1));
  EXPECT_EQ(f.view(x, only_pad), (Buffer{-1, -1, -1, -1}));
  EXPECT_EQ(count(kernel_text(must(f.b.unary(Op::Neg, only_pad))), "load"), 0);
}

TEST(Lower, ConcatSelectsThePiece) {
  Fixture f;
  const Node* a = f.in({2, 2}, "a");
  const Node* b = f.in({2, 1}, "b");
  const Node* c = f.in({2, 3}, "c");
  const Node* y = must(f.b.concat({a, b, c}, 1));  // [2,6]
  Buffer got = run_one_group(y, {{a, {1, 2, 3, 4}}, {b, {10, 20}}, {c, {5, 6, 7, 8, 9, 0}}});
  EXPECT_EQ(got, (Buffer{1, 2, 10, 5, 6, 7, 3, 4, 20, 8, 9, 0}));
  const Node* rows = must(f.b.concat({a, a}, 0));  // [4,2]
  EXPECT_EQ(run_one_group(rows, {{a, {1, 2, 3, 4}}}), (Buffer{1, 2, 3, 4, 1, 2, 3, 4}));
}

TEST(Lower, FlipRollUnfold) {
  Fixture f;
  const Node* x = f.in({2, 3});
  EXPECT_EQ(f.view(x, must(f.b.flip(x, {0, 1}))), (Buffer{5, 4, 3, 2, 1, 0}));
  EXPECT_EQ(f.view(x, must(f.b.flip(x, {1}))), (Buffer{2, 1, 0, 5, 4, 3}));
  EXPECT_EQ(f.view(x, must(f.b.roll(x, {1}, {1}))), (Buffer{2, 0, 1, 5, 3, 4}));
  EXPECT_EQ(f.view(x, must(f.b.roll(x, {-1, 2}, {0, 1}))), (Buffer{4, 5, 3, 1, 2, 0}));
  const Node* v = f.in({7}, "v");
  EXPECT_EQ(f.view(v, must(f.b.unfold(v, 0, 3, 2))), (Buffer{0, 1, 2, 2, 3, 4, 4, 5, 6}));
  EXPECT_EQ(f.view(x, must(f.b.unfold(x, 1, 2, 1))), (Buffer{0, 1, 1, 2, 3, 4, 4, 5}));
}

TEST(Lower, ReductionsKeepdimBothWays) {
  Fixture f;
  const Node* x = f.in({2, 3});
  Buffer data{1, 5, 3, -2, 4, 0};
  auto run = [&](const Node* y) { return run_one_group(y, {{x, data}}); };
  EXPECT_EQ(run(must(f.b.reduce(Op::Sum, x, std::vector<int64_t>{1}, false))), (Buffer{9, 2}));
  const Node* keep = must(f.b.reduce(Op::Sum, x, std::vector<int64_t>{0}, true));
  EXPECT_EQ(keep->shape, (ir::Shape{1, 3}));
  EXPECT_EQ(run(keep), (Buffer{-1, 9, 3}));
  EXPECT_EQ(run(must(f.b.reduce(Op::ReduceMax, x, std::nullopt, false))), (Buffer{5}));
  EXPECT_EQ(run(must(f.b.reduce(Op::ReduceMin, x, std::vector<int64_t>{1}, true))),
            (Buffer{1, -2}));
  EXPECT_EQ(run(must(f.b.reduce(Op::Prod, x, std::vector<int64_t>{1}, false))), (Buffer{15, 0}));
  // Broadcasting a reduced value back over its rows: x - max(x, 1, keepdim).
  const Node* centered =
      f.bin(Op::Sub, x, must(f.b.reduce(Op::ReduceMax, x, std::vector<int64_t>{1}, true)));
  FusionPlan plan = make_first_fuser()->fuse({centered});
  ASSERT_EQ(plan.groups.size(), 2u);
  auto max_k = lower_group(plan.groups[0], "max");
  auto sub_k = lower_group(plan.groups[1], "sub");
  ASSERT_TRUE(max_k && sub_k);
  std::vector<Buffer> b1{data, {}};
  ASSERT_EQ(testing::run_kernel(max_k->kernel, b1), "");
  std::vector<Buffer> b2{data, b1[1], {}};
  ASSERT_EQ(testing::run_kernel(sub_k->kernel, b2), "");
  EXPECT_EQ(b2[2], (Buffer{-4, 0, -2, -6, 0, -4}));
}

TEST(Lower, ReduceOverMiddleAxesOfRank3) {
  Fixture f;
  const Node* x = f.in({2, 3, 2});
  const Node* y = must(f.b.reduce(Op::Sum, x, std::vector<int64_t>{0, 2}, false));
  EXPECT_EQ(f.view(x, y), (Buffer{0 + 1 + 6 + 7, 2 + 3 + 8 + 9, 4 + 5 + 10 + 11}));
  const Node* scalar = must(f.b.reduce(Op::Sum, x, std::nullopt, false));
  EXPECT_EQ(f.view(x, scalar), (Buffer{66}));
  EXPECT_NE(kernel_text(scalar).find("domain []"), std::string::npos);
}

// An axis of one element is no loop of a reduction: a sum over it is its start plus the value (a
// lone -0.0 sums to +0.0, as the loop summed it), a max, min or product the value itself. A
// reduction left over such an axis kept a matmul sharing its kernel from being recognized, and
// made a sum around it a loop with another inside (RandomGraphFuzz seeds 647 and 1077).
TEST(Lower, AReductionOverAxesOfOneElementIsNoLoop) {
  Fixture f;
  const Node* x = f.in({2, 1, 3});
  const Buffer data{1, -0.0, 3, -2, 4.5, 0};
  auto run = [&](const Node* y) { return run_one_group(y, {{x, data}}); };
  const Node* sum = must(f.b.reduce(Op::Sum, x, std::vector<int64_t>{1}, false));
  EXPECT_EQ(count(kernel_text(sum), "reduce"), 0) << kernel_text(sum);
  const Buffer summed = run(sum);
  EXPECT_EQ(summed, data);
  EXPECT_FALSE(std::signbit(summed[1]));  // 0 + -0.0
  for (Op op : {Op::ReduceMax, Op::ReduceMin, Op::Prod}) {
    const Node* y = must(f.b.reduce(op, x, std::vector<int64_t>{1}, true));
    EXPECT_EQ(count(kernel_text(y), "reduce"), 0) << kernel_text(y);
    const Buffer got = run(y);
    EXPECT_EQ(got, data) << ir::op_enum_name(op);
    EXPECT_TRUE(std::signbit(got[1])) << ir::op_enum_name(op);
  }
  // Over that axis and another: one loop, over the other.
  const Node* both = must(f.b.reduce(Op::Sum, x, std::vector<int64_t>{0, 1}, false));
  EXPECT_NE(kernel_text(both).find("reduce.sum f32 (v1<2>)"), std::string::npos)
      << kernel_text(both);
  EXPECT_EQ(run(both), (Buffer{-1, 4.5, 3}));
}

TEST(Lower, ArgmaxFirstIndexOnTies) {
  Fixture f;
  const Node* x = f.in({2, 3});
  Buffer data{1, 3, 3, 5, 2, 5};
  const Node* am = must(f.b.arg_reduce(Op::ArgMax, x, 1, false));
  EXPECT_EQ(am->dtype, DType::i32);
  EXPECT_EQ(run_one_group(am, {{x, data}}), (Buffer{1, 0}));
  const Node* amin = must(f.b.arg_reduce(Op::ArgMin, x, 0, true));
  EXPECT_EQ(run_one_group(amin, {{x, data}}), (Buffer{0, 1, 0}));
}

// out[b, m, n] = sum_k a[b or 0, m, k] * w[b or 0, k, n], computed directly.
Buffer reference_matmul(const Buffer& a, const Buffer& w, int64_t batch, bool a_batched,
                        bool w_batched, int64_t M, int64_t K, int64_t N) {
  Buffer out;
  for (int64_t bi = 0; bi < batch; ++bi)
    for (int64_t m = 0; m < M; ++m)
      for (int64_t n = 0; n < N; ++n) {
        double acc = 0;
        for (int64_t k = 0; k < K; ++k)
          acc += a[static_cast<size_t>((a_batched ? bi * M * K : 0) + m * K + k)] *
                 w[static_cast<size_t>((w_batched ? bi * K * N : 0) + k * N + n)];
        out.push_back(acc);
      }
  return out;
}

TEST(Lower, Matmul) {
  Fixture f;
  const Node* a = f.in({2, 3}, "a");
  const Node* w = f.in({3, 2}, "w");
  Buffer got =
      run_one_group(must(f.b.matmul(a, w)), {{a, {1, 2, 3, 4, 5, 6}}, {w, {7, 8, 9, 10, 11, 12}}});
  EXPECT_EQ(got, (Buffer{58, 64, 139, 154}));
}

TEST(Lower, BatchedAndBroadcastBatchMatmul) {
  Fixture f;
  const Node* a = f.in({2, 2, 3}, "a");
  const Node* w = f.in({2, 3, 4}, "w");
  const Node* w2 = f.in({3, 4}, "w2");
  Buffer av = iota(12, -3), wv = iota(24, -10), w2v = iota(12, 1);
  EXPECT_EQ(run_one_group(must(f.b.matmul(a, w)), {{a, av}, {w, wv}}),
            reference_matmul(av, wv, 2, true, true, 2, 3, 4));
  EXPECT_EQ(run_one_group(must(f.b.matmul(a, w2)), {{a, av}, {w2, w2v}}),
            reference_matmul(av, w2v, 2, true, false, 2, 3, 4));
  const Node* a1 = f.in({1, 2, 3}, "a1");
  Buffer a1v = iota(6, 2);
  EXPECT_EQ(run_one_group(must(f.b.matmul(a1, w)), {{a1, a1v}, {w, wv}}),
            reference_matmul(a1v, wv, 2, false, true, 2, 3, 4));
}

TEST(Lower, SourcesCastAndWhere) {
  Fixture f;
  const Node* x = f.in({4});
  const Node* r = must(f.b.arange(2, 10, 2, DType::f32));  // 2 4 6 8
  const Node* y = must(f.b.where(f.bin(Op::Gt, x, r), x, must(f.b.full({4}, -1, DType::f32))));
  EXPECT_EQ(run_one_group(y, {{x, {3, 1, 7, 8}}}), (Buffer{3, -1, 7, -1}));
  const Node* i = must(f.b.cast(f.bin(Op::Mul, x, must(f.b.scalar(2.5, DType::f32))), DType::i32));
  EXPECT_EQ(run_one_group(i, {{x, {1, 2, -1, 3}}}), (Buffer{2, 5, -2, 7}));
}

TEST(Lower, LabelsAndParamOrder) {
  Fixture f;
  const Node* x = f.in({4}, "x");
  const Node* y = f.g.input(DType::f32, {4});
  FusionPlan plan = make_first_fuser()->fuse({f.bin(Op::Add, y, x)});
  auto k = lower_group(plan.groups.at(0), "add");
  ASSERT_TRUE(k);
  ASSERT_EQ(k->kernel.params.size(), 3u);
  EXPECT_EQ(k->params, (std::vector<const Node*>{y, x, plan.groups[0].outputs[0]}));
  EXPECT_EQ(k->kernel.params[0].label, "%t" + std::to_string(y->id));
  EXPECT_EQ(k->kernel.params[1].label, "x");
  EXPECT_TRUE(k->kernel.params[2].output);
  EXPECT_FALSE(k->kernel.params[0].output);
}

TEST(Lower, MissingInputIsAnError) {
  Fixture f;
  const Node* x = f.in({4}, "x");
  FusedGroup grp{.nodes = {}, .outputs = {must(f.b.unary(Op::Exp, x))}, .inputs = {}};
  auto k = lower_group(grp, "bad");
  ASSERT_FALSE(k);
  EXPECT_NE(k.error().message.find("not one of its inputs"), std::string::npos)
      << k.error().message;
}

// Whole plans: the groups of softmax and layernorm run in order give the textbook results.
TEST(LowerPlan, SoftmaxRows) {
  Fixture f;
  const Node* x = f.in({2, 3});
  Buffer data{1, 2, 3, -1, 0, 5};
  std::vector<Buffer> out = testing::run_plan({must(f.b.softmax(x, -1))}, {{x, data}});
  ASSERT_EQ(out.size(), 1u);
  ASSERT_EQ(out[0].size(), 6u);
  for (size_t r = 0; r < 2; ++r) {
    double denom = 0;
    for (size_t c = 0; c < 3; ++c) denom += std::exp(data[r * 3 + c]);
    for (size_t c = 0; c < 3; ++c)
      EXPECT_NEAR(out[0][r * 3 + c], std::exp(data[r * 3 + c]) / denom, 1e-6) << r << "," << c;
  }
}

TEST(LowerPlan, LayernormAndMatmulEpilogue) {
  Fixture f;
  const Node* x = f.in({2, 4});
  const Node* gamma = f.in({4}, "g");
  const Node* beta = f.in({4}, "b");
  Buffer xv{1, 2, 3, 6, -2, 0, 2, 4}, gv{1, 2, 1, 0.5}, bv{0, 1, -1, 0};
  std::vector<Buffer> out = testing::run_plan({must(f.b.layernorm(x, gamma, beta, -1, 1e-5))},
                                              {{x, xv}, {gamma, gv}, {beta, bv}});
  ASSERT_EQ(out[0].size(), 8u);
  for (size_t r = 0; r < 2; ++r) {
    double mu = 0, var = 0;
    for (size_t c = 0; c < 4; ++c) mu += xv[r * 4 + c] / 4;
    for (size_t c = 0; c < 4; ++c) var += (xv[r * 4 + c] - mu) * (xv[r * 4 + c] - mu) / 4;
    for (size_t c = 0; c < 4; ++c)
      EXPECT_NEAR(out[0][r * 4 + c], (xv[r * 4 + c] - mu) / std::sqrt(var + 1e-5) * gv[c] + bv[c],
                  1e-5);
  }
  // relu(x @ w + bias): two kernels, the epilogue reading the matmul's buffer.
  const Node* w = f.in({4, 2}, "w");
  const Node* bias = f.in({2}, "bias");
  const Node* y = must(f.b.unary(Op::Relu, f.bin(Op::Add, must(f.b.matmul(x, w)), bias)));
  std::vector<Buffer> mm =
      testing::run_plan({y}, {{x, xv}, {w, {1, 0, 0, 1, 1, 0, 0, -1}}, {bias, {-3, 1}}});
  EXPECT_EQ(mm[0], (Buffer{1, 0, 0, 0}));  // rows: [4-3, 2-6+1] and [0-3, 0-4+1]
}

TEST(Lower, EmptyTensors) {
  Fixture f;
  const Node* x = f.in({3, 0});
  const Node* s = must(f.b.reduce(Op::Sum, x, std::vector<int64_t>{1}, false));
  EXPECT_EQ(run_one_group(s, {{x, {}}}), (Buffer{0, 0, 0}));
  const Node* r = must(f.b.reshape(x, {0, 3}));
  EXPECT_EQ(run_one_group(must(f.b.unary(Op::Exp, r)), {{x, {}}}), Buffer{});
  const Node* a = f.in({3, 1}, "a");
  const Node* c = must(f.b.concat({x, a, x}, 1));
  EXPECT_EQ(run_one_group(c, {{x, {}}, {a, {7, 8, 9}}}), (Buffer{7, 8, 9}));
}

// The same graph built in two arenas lowers to byte-identical kernel text (the cache key).
TEST(Lower, DeterministicText) {
  auto build = [](ir::Graph& g) {
    ir::Builder b(g);
    const Node* x = g.input(DType::f32, {8, 6}, "x");
    const Node* w = g.input(DType::f32, {6, 5}, "w");
    const Node* p = must(b.pad(must(b.roll(x, {3}, {1})), {1, 0}, {0, 2}, 0.0));
    const Node* s = must(b.slice(must(b.concat({p, must(b.flip(p, {0}))}, 1)), 1, 0, 6, 1));
    return must(b.matmul(s, w));
  };
  ir::Graph g1, g2;
  g2.input(DType::f32, {1}, "unrelated");  // shifts every id and slot of the second graph
  FusionPlan p1 = make_first_fuser()->fuse({build(g1)});
  FusionPlan p2 = make_first_fuser()->fuse({build(g2)});
  ASSERT_EQ(p1.groups.size(), 2u);  // the concat operand of the matmul is materialized
  ASSERT_EQ(p2.groups.size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    auto k1 = lower_group(p1.groups[i], "a");
    auto k2 = lower_group(p2.groups[i], "b");
    ASSERT_TRUE(k1 && k2);
    EXPECT_EQ(kir::print_kernel(k1->kernel, false), kir::print_kernel(k2->kernel, false));
  }
}

// Whether some load's index expression reads another load: the gather's indirect read.
bool has_indirect_load(const kir::Kernel& k) {
  auto reads_load = [](const kir::Expr* root) {
    std::vector<const kir::Expr*> stack{root};
    while (!stack.empty()) {
      const kir::Expr* e = stack.back();
      stack.pop_back();
      if (e->kind == kir::ExprKind::Load) return true;
      stack.insert(stack.end(), e->args.begin(), e->args.end());
    }
    return false;
  };
  for (const kir::Expr* e : kir::kernel_exprs(k))
    if (e->kind == kir::ExprKind::Load && reads_load(e->args[0])) return true;
  return false;
}

// The test interpreter fails on any out-of-range load, so indices past either end (after
// wrapping negatives once) show the clamp.
TEST(Lower, GatherIsAnIndirectLoadKeptInBounds) {
  Fixture f;
  const Node* table = f.in({4, 2}, "table");
  const Node* ids = f.g.input(DType::i64, {5}, "ids");
  const Node* e = must(f.b.gather(table, ids, 0));
  const Node* y = f.bin(Op::Add, e, must(f.b.scalar(1, DType::f32)));
  FusionPlan plan = make_first_fuser()->fuse({y});
  ASSERT_EQ(plan.groups.size(), 1u);
  auto lowered = lower_group(plan.groups[0], "k");
  ASSERT_TRUE(lowered) << lowered.error().message;
  EXPECT_TRUE(has_indirect_load(lowered->kernel)) << kir::print_kernel(lowered->kernel);
  Buffer got = run_one_group(y, {{table, iota(8)}, {ids, {3, -1, 0, 9, -7}}});
  // rows 3, 3 (-1 + 4), 0, 3 (9 clamped), 0 (-7 + 4 = -3 clamped)
  EXPECT_EQ(got, (Buffer{7, 8, 7, 8, 1, 2, 7, 8, 1, 2}));
}

TEST(Lower, GatherElementsAlongEachAxis) {
  Fixture f;
  const Node* x = f.in({2, 3});  // iota: [[0,1,2],[3,4,5]]
  const Node* cols = f.g.input(DType::i32, {2, 2}, "cols");
  Buffer got =
      run_one_group(must(f.b.gather_elements(x, cols, 1)), {{x, iota(6)}, {cols, {2, -1, 5, -9}}});
  EXPECT_EQ(got, (Buffer{2, 2, 5, 3}));
  const Node* rows = f.g.input(DType::i64, {1, 3}, "rows");
  got = run_one_group(must(f.b.gather_elements(x, rows, 0)), {{x, iota(6)}, {rows, {1, -2, 7}}});
  EXPECT_EQ(got, (Buffer{3, 1, 5}));
}

// A scalar index drops the axis; an index gathered by an index (two levels of indirect loads).
TEST(Lower, GatherScalarIndexAndGatherOfIndices) {
  Fixture f;
  const Node* x = f.in({2, 3});
  const Node* one = f.g.input(DType::i64, {}, "one");
  EXPECT_EQ(run_one_group(must(f.b.gather(x, one, 1)), {{x, iota(6)}, {one, {-2}}}),
            (Buffer{1, 4}));
  const Node* perm = f.g.input(DType::i32, {3}, "perm");
  const Node* pick = f.g.input(DType::i32, {2}, "pick");
  const Node* chosen = must(f.b.gather(perm, pick, 0));
  EXPECT_EQ(run_one_group(must(f.b.gather(x, chosen, 1)),
                          {{x, iota(6)}, {perm, {2, 0, 1}}, {pick, {0, 2}}}),
            (Buffer{2, 1, 5, 4}));
}

// scatter_elements: one kernel whose value at each output element is a reduction over the
// indices' axis (no store but the output's), run by the kernel interpreter (which fails on any
// out-of-range load) with a duplicate, a wrapped and two dropped indices.
TEST(Lower, ScatterElementsIsAFoldOverTheIndicesAxis) {
  Fixture f;
  const Node* x = f.in({1, 5});  // iota: [0,1,2,3,4]
  const Node* idx = f.g.input(DType::i32, {1, 6}, "idx");
  const Node* upd = f.in({1, 6}, "upd");
  const Buffer ids{0, -1, 0, 7, -6, 2}, ups{10, 20, 30, 40, 50, 60};
  const std::pair<const char*, Buffer> expected[] = {{"none", {30, 1, 60, 3, 20}},
                                                     {"add", {40, 1, 62, 3, 24}},
                                                     {"mul", {0, 1, 120, 3, 80}},
                                                     {"max", {30, 1, 60, 3, 20}},
                                                     {"min", {0, 1, 2, 3, 4}}};
  for (const auto& [red, want] : expected) {
    const Node* y = must(f.b.scatter_elements(x, idx, upd, 1, red));
    std::string text = kernel_text(y);
    EXPECT_EQ(count(text, "store "), 1) << text;
    EXPECT_EQ(count(text, "reduce."), 1) << text;
    EXPECT_EQ(run_one_group(y, {{x, iota(5)}, {idx, ids}, {upd, ups}}), want) << red;
  }
  // Indices shorter than the data on the other axis: rows past them keep the data.
  const Node* x2 = f.in({3, 2}, "x2");
  const Node* i2 = f.g.input(DType::i64, {1, 2}, "i2");
  const Node* u2 = f.in({1, 2}, "u2");
  EXPECT_EQ(run_one_group(must(f.b.scatter_elements(x2, i2, u2, 1, "none")),
                          {{x2, iota(6)}, {i2, {1, 1}}, {u2, {7, 8}}}),
            (Buffer{0, 8, 2, 3, 4, 5}));
  EXPECT_EQ(run_one_group(must(f.b.scatter_elements(x2, i2, u2, 0, "add")),
                          {{x2, iota(6)}, {i2, {2, -3}}, {u2, {7, 8}}}),
            (Buffer{0, 9, 2, 3, 11, 5}));
}

}  // namespace
}  // namespace kiln::passes
