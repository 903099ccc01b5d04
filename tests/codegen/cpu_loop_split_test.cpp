// Wrap-around indices in the innermost loop (ir/loop_split.h): where the loop is cut,
// when it is left whole, and rolled / wrapped kernels against a plain loop (run_kernel also calls
// them in uneven chunks, which for rank-1 kernels cut across the pieces).
#include <gtest/gtest.h>

#include <fmt/format.h>
#include <array>

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

}  // namespace
}  // namespace kiln::codegen::testing
