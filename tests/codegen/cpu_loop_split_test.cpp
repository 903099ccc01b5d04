// Wrap-around indices and steps in the innermost loop (ir/loop_split.h): where the loop is cut,
// when it is left whole, and rolled / wrapped / padded / concatenated kernels against a plain loop
// (run_kernel also calls them in uneven chunks, which for rank-1 kernels cut across the pieces).
#include <gtest/gtest.h>

#include <fmt/format.h>
#include <array>
#include <cmath>

#include "codegen/cpu/llvm_emitter.h"
#include "ir/kernel_facts.h"
#include "ir/loop_split.h"
#include "tests/codegen/cpu_test_support.h"

namespace kiln::codegen::testing {
namespace {

using kir::Alu;
using kir::Expr;

struct Wrapped {
  std::shared_ptr<kir::ExprArena> a = std::make_shared<kir::ExprArena>();
  const Expr* p_plus(int32_t p, int64_t c) const {
    return c == 0 ? a->var(p) : a->alu(Alu::Add, DType::i64, {a->var(p), a->index(c)});
  }
  const Expr* mod(const Expr* x, int64_t n) const {
    return a->alu(Alu::Mod, DType::i64, {x, a->index(n)});
  }
  const Expr* div(const Expr* x, int64_t n) const {
    return a->alu(Alu::IDiv, DType::i64, {x, a->index(n)});
  }
};

// out[p] = x[(p + c1) % n] + 2 * x[(p + c2) % n] + (p + c3) / n over one axis of `n` elements.
kir::Kernel roll1d(const Wrapped& w, int64_t n, int64_t c1, int64_t c2, int64_t c3) {
  kir::ExprArena& a = *w.a;
  const Expr* v = a.alu(
      Alu::Add, DType::f32,
      {a.alu(
           Alu::Add, DType::f32,
           {a.load(0, DType::f32, w.mod(w.p_plus(0, c1), n)),
            a.alu(Alu::Mul, DType::f32,
                  {a.constant(DType::f32, 2), a.load(0, DType::f32, w.mod(w.p_plus(0, c2), n))})}),
       a.alu(Alu::Cast, DType::f32, {w.div(w.p_plus(0, c3), n)})});
  return make_kernel("roll", {in_param(DType::f32, {n}), out_param(DType::f32, {n})}, {n}, w.a,
                     {{1, a.var(0), v}});
}

TEST(CpuLoopSplit, CutsWhereTheIndicesWrap) {
  Wrapped w;
  kir::Kernel k = roll1d(w, 100, 1, 99, 30);
  kir::LoopSplit s = kir::split_innermost(k);
  EXPECT_EQ(s.bounds, (std::vector<int64_t>{0, 1, 70, 99, 100}));
  EXPECT_EQ(s.wraps.size(), 3u);
  const Expr* m1 = w.mod(w.p_plus(0, 1), 100);
  ASSERT_TRUE(s.wraps.count(m1));
  EXPECT_EQ(kir::wrap_quotient(s.wraps.at(m1), 0), 0);
  EXPECT_EQ(kir::wrap_quotient(s.wraps.at(m1), 99), 1);
  // A divisor with more than kMaxLoopPieces pieces, and an index that is not p + c: left whole.
  Wrapped w2;
  kir::Kernel many = roll1d(w2, 100, 1, 99, 0);
  many.stores[0].value = w2.a->alu(Alu::Cast, DType::f32, {w2.mod(w2.p_plus(0, 0), 7)});
  EXPECT_EQ(kir::split_innermost(many).bounds, (std::vector<int64_t>{0, 100}));
  Wrapped w3;
  const Expr* twice = w3.a->alu(Alu::Mul, DType::i64, {w3.a->var(0), w3.a->index(2)});
  kir::Kernel scaled =
      make_kernel("scaled", {in_param(DType::f32, {64}), out_param(DType::f32, {64})}, {64}, w3.a,
                  {{1, w3.a->var(0), w3.a->load(0, DType::f32, w3.mod(twice, 64))}});
  EXPECT_EQ(kir::split_innermost(scaled).bounds, (std::vector<int64_t>{0, 64}));
  EXPECT_TRUE(kir::split_innermost(scaled).wraps.empty());
}

TEST(CpuLoopSplit, RolledOneAxisKernelsMatchTheLoop) {
  for (auto [n, c1, c2, c3] : std::vector<std::array<int64_t, 4>>{
           {100, 1, 99, 30}, {37, 5, 36, 0}, {64, 0, 63, 200}, {9, 8, 1, 4}}) {
    SCOPED_TRACE(fmt::format("n={} c={},{},{}", n, c1, c2, c3));
    Wrapped w;
    std::vector<double> x;
    for (int64_t i = 0; i < n; ++i) x.push_back(static_cast<double>(i * 3 % 17));
    auto res = run_kernel(roll1d(w, n, c1, c2, c3), {Buffer(DType::f32, x)});
    ASSERT_EQ(res.size(), 2u);
    for (int64_t p = 0; p < n; ++p)
      EXPECT_EQ(res[1].get(p),
                x[(p + c1) % n] + 2 * x[(p + c2) % n] + static_cast<double>((p + c3) / n))
          << "p=" << p;
  }
}

// A wrap-around 3x3 neighbour sum over a [rows, cols] board (life's shape), rows also wrapped.
TEST(CpuLoopSplit, WrapAroundStencilMatchesTheLoop) {
  const int64_t rows = 7, cols = 45;
  Wrapped w;
  kir::ExprArena& a = *w.a;
  const Expr* sum = nullptr;
  for (int64_t dr : {rows - 1, int64_t{0}, int64_t{1}})
    for (int64_t dc : {cols - 1, int64_t{0}, int64_t{1}}) {
      const Expr* r = w.mod(w.p_plus(0, dr), rows);
      const Expr* c = w.mod(w.p_plus(1, dc), cols);
      const Expr* at =
          a.alu(Alu::Add, DType::i64, {a.alu(Alu::Mul, DType::i64, {r, a.index(cols)}), c});
      const Expr* v = a.load(0, DType::f32, at);
      sum = sum ? a.alu(Alu::Add, DType::f32, {sum, v}) : v;
    }
  const Expr* out = a.alu(Alu::Add, DType::i64,
                          {a.alu(Alu::Mul, DType::i64, {a.var(0), a.index(cols)}), a.var(1)});
  kir::Kernel k = make_kernel(
      "stencil", {in_param(DType::f32, {rows, cols}), out_param(DType::f32, {rows, cols})},
      {rows, cols}, w.a, {{1, out, sum}});
  EXPECT_EQ(kir::split_innermost(k).bounds, (std::vector<int64_t>{0, 1, 44, 45}));
  std::vector<double> x;
  for (int64_t i = 0; i < rows * cols; ++i) x.push_back(static_cast<double>((i * 7) % 11));
  auto res = run_kernel(k, {Buffer(DType::f32, x)});
  ASSERT_EQ(res.size(), 2u);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) {
      double want = 0;
      for (int64_t dr : {rows - 1, int64_t{0}, int64_t{1}})
        for (int64_t dc : {cols - 1, int64_t{0}, int64_t{1}})
          want += x[((r + dr) % rows) * cols + (c + dc) % cols];
      EXPECT_EQ(res[1].get(r * cols + c), want) << r << "," << c;
    }
}

// Index helpers for the views below: p + c, min, max, comparisons with constants.
struct Views : Wrapped {
  const Expr* op(Alu f, DType t, std::vector<const Expr*> args) const {
    return a->alu(f, t, std::move(args));
  }
  const Expr* min(const Expr* x, int64_t c) const {
    return op(Alu::Min, DType::i64, {x, a->index(c)});
  }
  const Expr* max(const Expr* x, int64_t c) const {
    return op(Alu::Max, DType::i64, {x, a->index(c)});
  }
  const Expr* cmp(Alu f, const Expr* x, int64_t c) const {
    return op(f, DType::boolean, {x, a->index(c)});
  }
  // row * width + col
  const Expr* at(const Expr* row, int64_t width, const Expr* col) const {
    return op(Alu::Add, DType::i64, {op(Alu::Mul, DType::i64, {row, a->index(width)}), col});
  }
};

// out[r, c] = 3 * concat(x[rows, w1], z[rows, w2], axis 1)[r, c], as lowering writes it: both
// operands read through clamped indices, the choice a where on c < w1.
kir::Kernel concat_rows(const Views& v, int64_t rows, int64_t w1, int64_t w2) {
  kir::ExprArena& a = *v.a;
  const Expr* c = a.var(1);
  const Expr* left = a.load(0, DType::f32, v.at(a.var(0), w1, v.min(c, w1 - 1)));
  const Expr* right = a.load(1, DType::f32, v.at(a.var(0), w2, v.max(v.p_plus(1, -w1), 0)));
  const Expr* value = v.op(Alu::Mul, DType::f32,
                           {v.op(Alu::Where, DType::f32, {v.cmp(Alu::Lt, c, w1), left, right}),
                            a.constant(DType::f32, 3)});
  return make_kernel("concat",
                     {in_param(DType::f32, {rows, w1}), in_param(DType::f32, {rows, w2}),
                      out_param(DType::f32, {rows, w1 + w2})},
                     {rows, w1 + w2}, v.a, {{2, v.at(a.var(0), w1 + w2, c), value}});
}

// out[r, c] = pad(x[rows, w], before, after, value 0.5)[r, c] * 2: x read at clamp(c - before),
// kept where 0 <= c - before < w.
kir::Kernel pad_rows(const Views& v, int64_t rows, int64_t w, int64_t before, int64_t after) {
  kir::ExprArena& a = *v.a;
  const Expr* j = v.p_plus(1, -before);
  const Expr* in = v.op(Alu::And, DType::boolean, {v.cmp(Alu::Ge, j, 0), v.cmp(Alu::Lt, j, w)});
  const Expr* x = a.load(0, DType::f32, v.at(a.var(0), w, v.min(v.max(j, 0), w - 1)));
  const Expr* padded = v.op(Alu::Where, DType::f32, {in, x, a.constant(DType::f32, 0.5)});
  const int64_t width = before + w + after;
  return make_kernel("pad", {in_param(DType::f32, {rows, w}), out_param(DType::f32, {rows, width})},
                     {rows, width}, v.a,
                     {{1, v.at(a.var(0), width, a.var(1)),
                       v.op(Alu::Mul, DType::f32, {padded, a.constant(DType::f32, 2)})}});
}

TEST(CpuLoopSplit, CutsWhereAPadOrAConcatSteps) {
  Views c;
  kir::LoopSplit s = kir::split_innermost(concat_rows(c, 4, 6, 4));
  EXPECT_EQ(s.bounds, (std::vector<int64_t>{0, 6, 10}));
  EXPECT_EQ(s.steps.size(), 4u);  // min, max, lt, where
  EXPECT_TRUE(s.wraps.empty());
  Views p;
  s = kir::split_innermost(pad_rows(p, 4, 7, 2, 1));
  EXPECT_EQ(s.bounds, (std::vector<int64_t>{0, 2, 9, 10}));
  EXPECT_EQ(s.steps.size(), 6u);  // ge, lt, and, where, max, min
  // The arms each piece takes: the pad value before and after, x inside.
  for (const Expr* e : s.steps) {
    if (e->alu != Alu::Where) continue;
    EXPECT_EQ(kir::step_at(e, 0), 2);
    EXPECT_EQ(kir::step_at(e, 2), 1);
    EXPECT_EQ(kir::step_at(e, 8), 1);
    EXPECT_EQ(kir::step_at(e, 9), 2);
  }
  // A clamp that never clamps over the extent is a step taken whole; a flip's index falls as p
  // rises, and a step over an outer variable is no step of the innermost loop.
  Views w;
  kir::ExprArena& a = *w.a;
  const Expr* never = w.min(a.var(1), 20);
  const Expr* flip = w.min(w.op(Alu::Sub, DType::i64, {a.index(9), a.var(1)}), 5);
  const Expr* outer = w.min(a.var(0), 2);
  const Expr* sum = w.op(Alu::Add, DType::i64, {w.op(Alu::Add, DType::i64, {never, flip}), outer});
  kir::Kernel k =
      make_kernel("clamps", {in_param(DType::f32, {40}), out_param(DType::f32, {4, 10})}, {4, 10},
                  w.a, {{1, w.at(a.var(0), 10, a.var(1)), a.load(0, DType::f32, sum)}});
  s = kir::split_innermost(k);
  EXPECT_EQ(s.bounds, (std::vector<int64_t>{0, 10}));
  EXPECT_EQ(s.steps, (std::unordered_set<const Expr*>{never}));
  EXPECT_EQ(kir::step_at(never, 9), 0);
  // The facts name them.
  Views named;
  const kir::Kernel concat = concat_rows(named, 4, 6, 4);
  const std::string text = kir::facts_text(concat, kir::analyze_kernel(concat));
  EXPECT_NE(
      text.find("loop cuts: innermost axis in 2 pieces [0,6) [6,10), 0 wrapping indexes, 4 steps"),
      std::string::npos)
      << text;
}

// Values exact against the views computed here, and no gather left: each piece reads its own
// operand contiguously.
TEST(CpuLoopSplit, PaddedAndConcatenatedRowsMatchTheLoopWithoutGathers) {
  const int64_t rows = 6;
  for (auto [w1, w2] : std::vector<std::array<int64_t, 2>>{{60, 40}, {37, 91}, {1, 64}}) {
    SCOPED_TRACE(fmt::format("concat {} | {}", w1, w2));
    Views v;
    std::vector<double> x, z;
    for (int64_t i = 0; i < rows * w1; ++i) x.push_back(static_cast<double>(i % 13) / 8);
    for (int64_t i = 0; i < rows * w2; ++i) z.push_back(-static_cast<double>(i % 7) / 4);
    std::shared_ptr<const CpuArtifact> art;
    auto res = run_kernel(concat_rows(v, rows, w1, w2),
                          {Buffer(DType::f32, x), Buffer(DType::f32, z)}, {}, &art);
    ASSERT_EQ(res.size(), 3u);
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < w1 + w2; ++c) {
        const double in = c < w1 ? x[r * w1 + c] : z[r * w2 + c - w1];
        EXPECT_EQ(res[2].get(r * (w1 + w2) + c), 3 * in) << r << "," << c;
      }
    ASSERT_TRUE(art);
    EXPECT_EQ(art->llvm_ir.find("gather"), std::string::npos) << art->llvm_ir;
  }
  for (auto [w, before, after] :
       std::vector<std::array<int64_t, 3>>{{90, 3, 7}, {64, 0, 5}, {33, 16, 0}, {5, 40, 40}}) {
    SCOPED_TRACE(fmt::format("pad {} by {}, {}", w, before, after));
    Views v;
    std::vector<double> x;
    for (int64_t i = 0; i < rows * w; ++i) x.push_back(static_cast<double>(i % 11) - 5);
    std::shared_ptr<const CpuArtifact> art;
    auto res = run_kernel(pad_rows(v, rows, w, before, after), {Buffer(DType::f32, x)}, {}, &art);
    ASSERT_EQ(res.size(), 2u);
    const int64_t width = before + w + after;
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < width; ++c) {
        const double want = c < before || c >= before + w ? 0.5 : x[r * w + c - before];
        EXPECT_EQ(res[1].get(r * width + c), 2 * want) << r << "," << c;
      }
    ASSERT_TRUE(art);
    EXPECT_EQ(art->llvm_ir.find("gather"), std::string::npos) << art->llvm_ir;
  }
}

// A concat along the only axis: chunks of every size cut across the pieces (run_kernel), and the
// code is not served at another extent (its pieces are this one's).
TEST(CpuLoopSplit, AConcatOverOneAxisMatchesTheLoopInChunks) {
  const int64_t n1 = 30, n2 = 21;
  Views v;
  kir::ExprArena& a = *v.a;
  const Expr* p = a.var(0);
  const Expr* value = v.op(Alu::Where, DType::f32,
                           {v.cmp(Alu::Lt, p, n1), a.load(0, DType::f32, v.min(p, n1 - 1)),
                            a.load(1, DType::f32, v.max(v.p_plus(0, -n1), 0))});
  kir::Kernel k = make_kernel(
      "concat1d",
      {in_param(DType::f32, {n1}), in_param(DType::f32, {n2}), out_param(DType::f32, {n1 + n2})},
      {n1 + n2}, v.a, {{2, p, value}});
  std::vector<double> x, z;
  for (int64_t i = 0; i < n1; ++i) x.push_back(static_cast<double>(i));
  for (int64_t i = 0; i < n2; ++i) z.push_back(static_cast<double>(100 + i));
  auto res = run_kernel(k, {Buffer(DType::f32, x), Buffer(DType::f32, z)});
  ASSERT_EQ(res.size(), 3u);
  for (int64_t i = 0; i < n1 + n2; ++i) EXPECT_EQ(res[2].get(i), i < n1 ? x[i] : z[i - n1]) << i;
  const kir::KernelFacts facts = kir::analyze_kernel(k);
  EXPECT_EQ(facts.loop_split.bounds, (std::vector<int64_t>{0, n1, n1 + n2}));
  EXPECT_FALSE(cpu::serves_any_outer_extent(k, facts, CheckMode::none, 0));
  // One piece, but its clamp is taken as its arm over this extent: not served at another either.
  Views w;
  kir::Kernel clamp =
      make_kernel("clamp1d", {in_param(DType::f32, {n1}), out_param(DType::f32, {n1})}, {n1}, w.a,
                  {{1, w.a->var(0), w.a->load(0, DType::f32, w.min(w.a->var(0), n1 + 5))}});
  const kir::KernelFacts clamp_facts = kir::analyze_kernel(clamp);
  EXPECT_EQ(clamp_facts.loop_split.bounds, (std::vector<int64_t>{0, n1}));
  EXPECT_EQ(clamp_facts.loop_split.steps.size(), 1u);
  EXPECT_FALSE(cpu::serves_any_outer_extent(clamp, clamp_facts, CheckMode::none, 0));
}

// out[r] = sum over c < w1 + w2 of concat(x[rows, w1], z[rows, w2], axis 1)[r, c] * y[c]: the
// concat read through clamped indices and a where on c < w1, inside the sum.
kir::Kernel concat_dot(const Views& v, int64_t rows, int64_t w1, int64_t w2) {
  kir::ExprArena& a = *v.a;
  const Expr* c = a.var(1);
  const Expr* left = a.load(0, DType::f32, v.at(a.var(0), w1, v.min(c, w1 - 1)));
  const Expr* right = a.load(1, DType::f32, v.at(a.var(0), w2, v.max(v.p_plus(1, -w1), 0)));
  const Expr* joined = v.op(Alu::Where, DType::f32, {v.cmp(Alu::Lt, c, w1), left, right});
  const Expr* sum =
      a.reduce(kir::ReduceOp::Sum, DType::f32,
               v.op(Alu::Mul, DType::f32, {joined, a.load(2, DType::f32, c)}), {1}, {w1 + w2});
  return make_kernel("concat_dot",
                     {in_param(DType::f32, {rows, w1}), in_param(DType::f32, {rows, w2}),
                      in_param(DType::f32, {w1 + w2}), out_param(DType::f32, {rows})},
                     {rows}, v.a, {{3, a.var(0), sum}});
}

// The same sum over the concat written to a buffer [rows, w].
kir::Kernel buffer_dot(const Views& v, int64_t rows, int64_t w) {
  kir::ExprArena& a = *v.a;
  const Expr* sum = a.reduce(
      kir::ReduceOp::Sum, DType::f32,
      v.op(Alu::Mul, DType::f32,
           {a.load(0, DType::f32, v.at(a.var(0), w, a.var(1))), a.load(1, DType::f32, a.var(1))}),
      {1}, {w});
  return make_kernel(
      "buffer_dot",
      {in_param(DType::f32, {rows, w}), in_param(DType::f32, {w}), out_param(DType::f32, {rows})},
      {rows}, v.a, {{2, a.var(0), sum}});
}

// A sum over a concatenated row in blocks of lanes: the blocks inside one operand read it
// contiguously (no gather where the concat falls between blocks), and every sum is the one over
// the row written to a buffer, bit for bit, wherever the concat falls.
TEST(CpuLoopSplit, ARowSumOverAConcatReadsEachOperandsBlocksContiguously) {
  const int64_t rows = 5;
  for (auto [w1, w2] : std::vector<std::array<int64_t, 2>>{{512, 512}, {600, 424}, {300, 701}}) {
    SCOPED_TRACE(fmt::format("concat {} | {}", w1, w2));
    const int64_t w = w1 + w2;
    std::vector<double> x, z, y, joined;
    // Magnitudes from 1e-3 to 1e3: an order of addition shows in the last bits.
    for (int64_t i = 0; i < rows * w1; ++i)
      x.push_back(static_cast<float>(std::sin(i * 0.37) * std::pow(10.0, i % 7 - 3)));
    for (int64_t i = 0; i < rows * w2; ++i)
      z.push_back(static_cast<float>(std::cos(i * 0.11) * std::pow(10.0, i % 5 - 2)));
    for (int64_t c = 0; c < w; ++c) y.push_back(static_cast<float>(1 + std::sin(c * 1.3)));
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < w; ++c) joined.push_back(c < w1 ? x[r * w1 + c] : z[r * w2 + c - w1]);
    Views v;
    const kir::Kernel k = concat_dot(v, rows, w1, w2);
    const kir::KernelFacts facts = kir::analyze_kernel(k);
    ASSERT_EQ(facts.reduce_splits.size(), 1u);
    EXPECT_EQ(facts.reduce_splits[0].split.bounds, (std::vector<int64_t>{0, w1, w}));
    const std::string text = kir::facts_text(k, facts);
    EXPECT_NE(
        text.find(fmt::format("over v1<{}> in 2 pieces [0,{}) [{},{}), 4 steps", w, w1, w1, w)),
        std::string::npos)
        << text;
    std::shared_ptr<const CpuArtifact> art;
    auto got = run_kernel(k, {Buffer(DType::f32, x), Buffer(DType::f32, z), Buffer(DType::f32, y)},
                          {}, &art);
    Views b;
    auto want =
        run_kernel(buffer_dot(b, rows, w), {Buffer(DType::f32, joined), Buffer(DType::f32, y)});
    ASSERT_EQ(got.size(), 4u);
    ASSERT_EQ(want.size(), 3u);
    for (int64_t r = 0; r < rows; ++r) EXPECT_EQ(got[3].get(r), want[2].get(r)) << "row " << r;
    ASSERT_TRUE(art);
    if (w1 % 128 == 0) {  // the concat falls between blocks
      EXPECT_EQ(art->llvm_ir.find("gather"), std::string::npos) << art->llvm_ir;
    }
  }
}

}  // namespace
}  // namespace kiln::codegen::testing
