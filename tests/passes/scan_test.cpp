// cumsum through lowering and fusion: the kernel-IR scan of every axis and direction run by the
// test interpreter against sums written out here, its kernel text, and the fusion rule (elementwise
// producers fuse into the scan's kernel; the scan's value is read from a buffer).
#include <gtest/gtest.h>

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

// The running sum of `x` (C order, `shape`) along `axis`, step by step in scan order.
Buffer expected_cumsum(const Buffer& x, const ir::Shape& shape, size_t axis, bool exclusive,
                       bool reverse) {
  int64_t outer = 1, inner = 1;
  for (size_t d = 0; d < axis; ++d) outer *= shape[d];
  for (size_t d = axis + 1; d < shape.size(); ++d) inner *= shape[d];
  const int64_t len = shape[axis];
  Buffer out(x.size());
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < inner; ++i) {
      double acc = 0;
      for (int64_t s = 0; s < len; ++s) {
        const auto at = static_cast<size_t>((o * len + (reverse ? len - 1 - s : s)) * inner + i);
        if (exclusive) out[at] = acc;
        acc += x[at];
        if (!exclusive) out[at] = acc;
      }
    }
  return out;
}

TEST(LowerScan, EveryAxisAndDirection) {
  testing::GraphFixture f;
  const ir::Shape shape{2, 3, 4};
  const Node* x = f.g.input(DType::f32, shape, "x");
  Buffer data(24);
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<double>((i * 7) % 11) - 3;
  for (int64_t axis = -3; axis < 3; ++axis)
    for (bool exclusive : {false, true})
      for (bool reverse : {false, true}) {
        const Node* y = must(f.b.cumsum(x, axis, exclusive, reverse));
        const auto a = static_cast<size_t>(axis < 0 ? axis + 3 : axis);
        EXPECT_EQ(testing::run_one_group(y, {{x, data}}),
                  expected_cumsum(data, shape, a, exclusive, reverse))
            << "axis " << axis << " exclusive " << exclusive << " reverse " << reverse;
      }
}

TEST(LowerScan, RankOneLengthOneAndEmpty) {
  testing::GraphFixture f;
  const Node* v = f.g.input(DType::f32, {5}, "v");
  EXPECT_EQ(testing::run_one_group(must(f.b.cumsum(v, 0, false, false)), {{v, {1, 2, 3, 4, 5}}}),
            (Buffer{1, 3, 6, 10, 15}));
  EXPECT_EQ(testing::run_one_group(must(f.b.cumsum(v, -1, true, true)), {{v, {1, 2, 3, 4, 5}}}),
            (Buffer{14, 12, 9, 5, 0}));
  const Node* one = f.g.input(DType::f32, {3, 1}, "one");
  EXPECT_EQ(testing::run_one_group(must(f.b.cumsum(one, 1, true, false)), {{one, {4, 5, 6}}}),
            (Buffer{0, 0, 0}));
  EXPECT_EQ(testing::run_one_group(must(f.b.cumsum(one, 1, false, true)), {{one, {4, 5, 6}}}),
            (Buffer{4, 5, 6}));
  const Node* empty = f.g.input(DType::f32, {2, 0}, "empty");
  EXPECT_EQ(testing::run_one_group(must(f.b.cumsum(empty, 1, false, false)), {{empty, {}}}),
            Buffer{});
}

// The scanned axis becomes the innermost domain variable; the store writes the output's own
// C-order index (reversed along the axis for a reverse scan).
TEST(LowerScan, KernelText) {
  testing::GraphFixture f;
  const Node* x = f.g.input(DType::f32, {3, 5}, "x");
  FusionPlan plan = make_first_fuser()->fuse({must(f.b.cumsum(x, 0, false, true))});
  ASSERT_EQ(plan.groups.size(), 1u);
  auto k = lower_group(plan.groups[0], "k");
  ASSERT_TRUE(k) << k.error().message;
  EXPECT_EQ(kir::print_kernel(k->kernel, false),
            "kernel\n"
            "  param %0 in f32[3,5]\n"
            "  param %1 out f32[3,5]\n"
            "  domain [5,3]\n"
            "  $0 = mul i64 v1, -5\n"
            "  $1 = add i64 $0, v0\n"
            "  $2 = add i64 $1, 10\n"
            "  $3 = load f32 %0[$2]\n"
            "  $4 = scan.sum f32 (v1) $3\n"
            "  store %1[$2] $4\n");
}

TEST(LowerScan, AReadInsideItsGroupIsAnError) {
  testing::GraphFixture f;
  const Node* x = f.g.input(DType::f32, {4}, "x");
  const Node* s = must(f.b.cumsum(x, 0, false, false));
  const Node* y = f.bin(Op::Mul, s, s);
  FusedGroup grp{{s, y}, {y}, {x}};
  auto k = lower_group(grp, "bad");
  ASSERT_FALSE(k);
  EXPECT_NE(k.error().message.find("is read inside its group"), std::string::npos)
      << k.error().message;
}

// cumsum(exp(x) * 2) + 1 on the beam fuser: exp and mul join the scan's kernel (fuse-on-read),
// the add reads the scan's buffer; the plan computes what the reference gives.
TEST(FuseScan, ElementwiseProducersJoinTheScan) {
  testing::GraphFixture f;
  const Node* x = f.g.input(DType::f32, {4, 64}, "x");
  const Node* e = f.un(Op::Exp, x);
  const Node* m = f.bin(Op::Mul, e, f.lit(2));
  const Node* s = must(f.b.cumsum(m, 1, false, false));
  const Node* y = f.bin(Op::Add, s, f.lit(1));
  CostModel model{DeviceRates::reference_cpu()};
  for (const FusionPlan& plan :
       {make_beam_fuser(model)->fuse({y}), make_first_fuser()->fuse({y})}) {
    std::string groups;
    for (const FusedGroup& g : plan.groups) {
      groups += "[";
      for (const Node* n : g.nodes) groups += std::string(ir::op_enum_name(n->op)) + " ";
      groups += "] ";
    }
    ASSERT_EQ(plan.groups.size(), 2u) << groups;
    const FusedGroup& scan = plan.groups[0];
    EXPECT_TRUE(holds(scan, e) && holds(scan, m) && holds(scan, s));
    EXPECT_EQ(scan.outputs, std::vector<const Node*>{s});
    EXPECT_EQ(plan.groups[1].inputs, std::vector<const Node*>{s});
    Buffer xv(256);
    for (size_t i = 0; i < xv.size(); ++i) xv[i] = static_cast<double>(i % 9) / 8 - 0.5;
    std::vector<Buffer> out = testing::run_fusion_plan(plan, {y}, {{x, xv}});
    ASSERT_EQ(out.size(), 1u);
    Buffer want(256);
    for (size_t r = 0; r < 4; ++r) {
      float acc = 0;
      for (size_t c = 0; c < 64; ++c) {
        acc += static_cast<float>(std::exp(static_cast<float>(xv[r * 64 + c])) * 2.0f);
        want[r * 64 + c] = static_cast<float>(acc + 1.0f);
      }
    }
    for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(out[0][i], want[i], 1e-4) << i;
  }
}

// A reduction feeding a scan stays in a kernel of its own (a scan kernel holds no reduction),
// and so does a scan feeding a scan.
TEST(FuseScan, NoReductionOrScanInsideAScanKernel) {
  testing::GraphFixture f;
  const Node* x = f.g.input(DType::f32, {8, 16}, "x");
  const Node* centered = f.bin(Op::Sub, x, f.red(Op::Sum, x, 1));
  const Node* s1 = must(f.b.cumsum(centered, 1, false, false));
  const Node* s2 = must(f.b.cumsum(s1, 0, true, false));
  CostModel model{DeviceRates::reference_cpu()};
  FusionPlan plan = make_beam_fuser(model)->fuse({s2});
  ASSERT_EQ(plan.groups.size(), 3u);
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
  bool scan_reason = false;
  for (const FusionReason& r : plan.reasons)
    scan_reason |= r.producer == s1 && r.reason == "scan output (read from a buffer)";
  EXPECT_TRUE(scan_reason);
}

// Three results of unrelated shapes: z * 3 [3], x * 2 [6] and cumsum(exp(y)) [4, 1] read through
// a transpose. The scan is read from a buffer, so it may join only a group whose outputs have its
// shape: before that rule the search put it with z * 3, and the transpose then had no placement
// (the fuser aborted: "beam fuser: no placement for node"). Every fuser gives a plan that computes
// the three results.
TEST(FuseScan, AScanJoinsNoGroupOfAnotherOutputShape) {
  testing::GraphFixture f;
  const Node* x = f.g.input(DType::f32, {6}, "x");
  const Node* y = f.g.input(DType::f32, {4, 1}, "y");
  const Node* z = f.g.input(DType::f32, {3}, "z");
  const Node* r1 = f.bin(Op::Mul, z, f.lit(3));
  const Node* r2 = f.bin(Op::Mul, x, f.lit(2));
  const Node* r3 = must(f.b.permute(must(f.b.cumsum(f.un(Op::Exp, y), 0, false, false)), {1, 0}));
  const Buffer xv{1, 2, 3, 4, 5, 6}, yv{0.5, -1, 0.25, 2}, zv{1, -2, 3};
  CostModel model{DeviceRates::reference_cpu()};
  for (int blocks : {1, 3, 8, 20})
    for (const FusionPlan& plan : {make_beam_fuser(model, {blocks, 4})->fuse({r1, r2, r3}),
                                   make_first_fuser()->fuse({r1, r2, r3})}) {
      std::vector<Buffer> out =
          testing::run_fusion_plan(plan, {r1, r2, r3}, {{x, xv}, {y, yv}, {z, zv}});
      ASSERT_EQ(out.size(), 3u);
      EXPECT_EQ(out[0], (Buffer{3, -6, 9}));
      EXPECT_EQ(out[1], (Buffer{2, 4, 6, 8, 10, 12}));
      ASSERT_EQ(out[2].size(), 4u);
      float acc = 0;
      for (size_t i = 0; i < 4; ++i) {
        acc += std::exp(static_cast<float>(yv[i]));
        EXPECT_NEAR(out[2][i], acc, 1e-5) << "blocks " << blocks << ", element " << i;
      }
    }
}

// A column minimum of a [4, 4] result read by a scan through an elementwise op: the scan's kernel
// holds no reduction, so the minimum is read from a buffer. Unforced, the search put the minimum
// in the [4, 4] result's kernel (where no [4] value can be written) and the scan had no
// placement (the fuser aborted). Four results: where(...) [4, 1], cumsum along a length-1 axis,
// the [4, 4] concatenation and the scan of its column minimum plus one.
TEST(FuseScan, AReductionAScanReadsIsWrittenToABuffer) {
  testing::GraphFixture f;
  const Node* p0 = f.g.input(DType::f32, {4, 1}, "p0");
  const Node* t = f.un(Op::Tanh, p0);
  const Node* c2 = must(f.b.concat({t, f.bin(Op::Mul, t, f.lit(2))}, 1));
  const Node* c4 = must(f.b.concat({c2, f.bin(Op::Mul, c2, f.lit(2))}, 1));
  const Node* w = must(f.b.where(f.bin(Op::Gt, p0, f.lit(0)), p0, f.bin(Op::Mul, t, f.lit(0.5))));
  const Node* mins = must(f.b.reduce(Op::ReduceMin, c4, std::vector<int64_t>{0}, false));
  const Node* scan = must(f.b.cumsum(f.bin(Op::Add, mins, f.lit(1)), 0, false, false));
  const Node* row_scan = must(f.b.cumsum(p0, 1, false, false));
  const Buffer pv{0.5, -1, 0.25, 2};
  CostModel model{DeviceRates::reference_cpu()};
  for (int blocks : {1, 3, 5, 20})
    for (const FusionPlan& plan :
         {make_beam_fuser(model, {blocks, 4})->fuse({w, row_scan, c4, scan}),
          make_first_fuser()->fuse({w, row_scan, c4, scan})}) {
      std::vector<Buffer> out = testing::run_fusion_plan(plan, {w, row_scan, c4, scan}, {{p0, pv}});
      ASSERT_EQ(out.size(), 4u);
      const float scale[4] = {1, 2, 2, 4};  // c4 is [t, 2t] next to [2t, 4t]
      float t_min = 1e30f, acc = 0;
      for (size_t r = 0; r < 4; ++r) {
        const float tr = std::tanh(static_cast<float>(pv[r]));
        EXPECT_NEAR(out[0][r], pv[r] > 0 ? pv[r] : tr * 0.5f, 1e-6) << r;
        EXPECT_EQ(out[1][r], pv[r]) << r;
        for (size_t c = 0; c < 4; ++c)
          EXPECT_NEAR(out[2][r * 4 + c], tr * scale[c], 1e-5) << r << "," << c;
        t_min = std::min(t_min, tr);
      }
      for (size_t c = 0; c < 4; ++c) {  // column c of c4 is tanh(p0) * scale[c]: its minimum too
        acc += t_min * scale[c] + 1;
        EXPECT_NEAR(out[3][c], acc, 1e-5) << "blocks " << blocks << ", element " << c;
      }
    }
}

}  // namespace
}  // namespace kiln::passes
