// topk_indices through lowering and fusion: the kernel-IR selection scan of every axis, largest and
// smallest, run by the test interpreter against orders written out here, its kernel text, and the
// fusion rule (elementwise producers fuse into the top-k kernel; its indices are read from a
// buffer).
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

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

// The first k positions of each row of `x` (C order, `shape`) along `axis`, in the order of a
// selection written out: repeatedly the best (largest or smallest, lowest index on ties) of the
// positions not yet taken. No NaN in these inputs.
Buffer expected_topk(const Buffer& x, const ir::Shape& shape, size_t axis, int64_t k,
                     bool largest) {
  int64_t outer = 1, inner = 1;
  for (size_t d = 0; d < axis; ++d) outer *= shape[d];
  for (size_t d = axis + 1; d < shape.size(); ++d) inner *= shape[d];
  const int64_t len = shape[axis];
  Buffer out(static_cast<size_t>(outer * k * inner));
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < inner; ++i) {
      std::vector<bool> taken(static_cast<size_t>(len), false);
      for (int64_t j = 0; j < k; ++j) {
        int64_t best = -1;
        for (int64_t r = 0; r < len; ++r) {
          if (taken[static_cast<size_t>(r)]) continue;
          const double v = x[static_cast<size_t>((o * len + r) * inner + i)];
          const double b = best < 0 ? 0 : x[static_cast<size_t>((o * len + best) * inner + i)];
          if (best < 0 || (largest ? v > b : v < b)) best = r;
        }
        taken[static_cast<size_t>(best)] = true;
        out[static_cast<size_t>((o * k + j) * inner + i)] = static_cast<double>(best);
      }
    }
  return out;
}

TEST(LowerTopK, EveryAxisKAndDirection) {
  testing::GraphFixture f;
  const ir::Shape shape{2, 3, 4};
  const Node* x = f.g.input(DType::f32, shape, "x");
  Buffer data(24);
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<double>((i * 7) % 5) - 2;  // ties
  for (int64_t axis = -3; axis < 3; ++axis) {
    const auto a = static_cast<size_t>(axis < 0 ? axis + 3 : axis);
    for (int64_t k = 0; k <= shape[a]; ++k)
      for (bool largest : {true, false}) {
        const Node* y = must(f.b.topk_indices(x, k, axis, largest));
        EXPECT_EQ(testing::run_one_group(y, {{x, data}}), expected_topk(data, shape, a, k, largest))
            << "axis " << axis << " k " << k << " largest " << largest;
      }
  }
}

// The selected axis becomes the innermost domain variable (extent k), the operand is read at a
// variable of the scan's own (extent n); the store writes the output's own C-order index.
TEST(LowerTopK, KernelText) {
  testing::GraphFixture f;
  const Node* x = f.g.input(DType::f32, {3, 5}, "x");
  FusionPlan plan = make_first_fuser()->fuse({must(f.b.topk_indices(x, 2, 0, false))});
  ASSERT_EQ(plan.groups.size(), 1u);
  auto k = lower_group(plan.groups[0], "k");
  ASSERT_TRUE(k) << k.error().message;
  EXPECT_EQ(kir::print_kernel(k->kernel, false),
            "kernel\n"
            "  param %0 in f32[3,5]\n"
            "  param %1 out i64[2,5]\n"
            "  domain [5,2]\n"
            "  $0 = mul i64 v1, 5\n"
            "  $1 = add i64 $0, v0\n"
            "  $2 = mul i64 v2, 5\n"
            "  $3 = add i64 $2, v0\n"
            "  $4 = load f32 %0[$3]\n"
            "  $5 = scan.argmin i64 (v1; v2<3) $4\n"
            "  store %1[$1] $5\n");
}

// topk_indices(exp(x) * 2) on both fusers: exp and mul join the top-k kernel (fuse-on-read), and
// the gather of x at the indices reads their buffer, with the reason recorded.
TEST(FuseTopK, ElementwiseProducersJoinTheSelection) {
  testing::GraphFixture f;
  const Node* x = f.g.input(DType::f32, {4, 16}, "x");
  const Node* e = f.un(Op::Exp, x);
  const Node* m = f.bin(Op::Mul, e, f.lit(2));
  const Node* idx = must(f.b.topk_indices(m, 3, 1, true));
  const Node* v = must(f.b.gather_elements(x, idx, 1));
  CostModel model{DeviceRates::reference_cpu()};
  for (const FusionPlan& plan :
       {make_beam_fuser(model)->fuse({v}), make_first_fuser()->fuse({v})}) {
    std::string groups;
    for (const FusedGroup& g : plan.groups) {
      groups += "[";
      for (const Node* n : g.nodes) groups += std::string(ir::op_enum_name(n->op)) + " ";
      groups += "] ";
    }
    ASSERT_EQ(plan.groups.size(), 2u) << groups;
    const FusedGroup& topk = plan.groups[0];
    EXPECT_TRUE(holds(topk, e) && holds(topk, m) && holds(topk, idx)) << groups;
    EXPECT_EQ(topk.outputs, std::vector<const Node*>{idx});
    EXPECT_EQ(plan.groups[1].inputs, (std::vector<const Node*>{x, idx})) << groups;
    Buffer xv(64);
    for (size_t i = 0; i < xv.size(); ++i) xv[i] = static_cast<double>((i * 5) % 7) / 4 - 0.5;
    std::vector<Buffer> out = testing::run_fusion_plan(plan, {v}, {{x, xv}});
    ASSERT_EQ(out.size(), 1u);
    Buffer mv(64);  // exp is increasing: the order of exp(x) * 2 is x's
    for (size_t i = 0; i < mv.size(); ++i)
      mv[i] = static_cast<float>(std::exp(static_cast<float>(xv[i])) * 2.0f);
    const Buffer want_idx = expected_topk(mv, {4, 16}, 1, 3, true);
    for (size_t r = 0; r < 4; ++r)
      for (size_t j = 0; j < 3; ++j) {
        const auto at = static_cast<size_t>(want_idx[r * 3 + j]);
        EXPECT_EQ(out[0][r * 3 + j], xv[r * 16 + at]) << r << "," << j;
      }
  }
  FusionPlan beam = make_beam_fuser(model)->fuse({v});
  bool reason = false;
  for (const FusionReason& r : beam.reasons)
    reason |= r.producer == idx && r.reason == "topk output (read from a buffer)";
  EXPECT_TRUE(reason);
}

// A reduction feeding a top-k stays in a kernel of its own (a scan kernel holds no reduction).
TEST(FuseTopK, NoReductionInsideATopKKernel) {
  testing::GraphFixture f;
  const Node* x = f.g.input(DType::f32, {8, 16}, "x");
  const Node* sums = f.red(Op::Sum, x, 1);
  const Node* idx = must(f.b.topk_indices(sums, 4, 0, false));
  CostModel model{DeviceRates::reference_cpu()};
  FusionPlan plan = make_beam_fuser(model)->fuse({idx});
  ASSERT_EQ(plan.groups.size(), 2u);
  for (const FusedGroup& g : plan.groups) {
    int scans = 0, reduces = 0;
    for (const Node* n : g.nodes) {
      scans += ir::op_kind(n->op) == ir::OpKind::Scan;
      reduces += ir::is_reduce(n->op);
    }
    EXPECT_LE(scans + reduces, 1);
    auto k = lower_group(g, "k");
    EXPECT_TRUE(k) << k.error().message;
  }
  bool reason = false;
  for (const FusionReason& r : plan.reasons)
    reason |= r.consumer == idx &&
              r.reason == "topk operand (no reduction, matmul or scan inside a topk kernel)";
  std::string all;
  for (const FusionReason& r : plan.reasons)
    all += fmt::format("{} -> {}: {}; ", ir::op_enum_name(r.producer->op),
                       ir::op_enum_name(r.consumer->op), r.reason);
  EXPECT_TRUE(reason) << all;
}

}  // namespace
}  // namespace kiln::passes
