// Parallel loop nests and index math of the cpu backend: 1-D and 3-D domains, broadcasting and
// permuted reads, IDiv/Mod index expressions, several stores, scalar and empty domains, and
// f16/bf16 storage round trips.
#include <gtest/gtest.h>

#include <cmath>

#include "tests/codegen/cpu_test_support.h"

namespace kiln::codegen::testing {
namespace {

using kir::Alu;
using kir::Expr;

struct Ix {  // terse i64 index arithmetic over one arena
  kir::ExprArena& a;
  const Expr* v(int id) { return a.var(id); }
  const Expr* c(int64_t x) { return a.index(x); }
  const Expr* add(const Expr* x, const Expr* y) { return a.alu(Alu::Add, DType::i64, {x, y}); }
  const Expr* mul(const Expr* x, int64_t y) { return a.alu(Alu::Mul, DType::i64, {x, c(y)}); }
  const Expr* div(const Expr* x, int64_t y) { return a.alu(Alu::IDiv, DType::i64, {x, c(y)}); }
  const Expr* mod(const Expr* x, int64_t y) { return a.alu(Alu::Mod, DType::i64, {x, c(y)}); }
};

std::vector<double> ramp(int64_t n, double scale, double offset) {
  std::vector<double> v;
  for (int64_t j = 0; j < n; ++j) v.push_back(static_cast<float>(j * scale + offset));
  return v;
}

TEST(CpuLoopNest, Elementwise1DWithReversedRead) {
  auto arena = std::make_shared<kir::ExprArena>();
  Ix ix{*arena};
  const int64_t n = 1000;
  const Expr* i = ix.v(0);
  const Expr* rev = ix.add(ix.c(n - 1), ix.a.alu(Alu::Neg, DType::i64, {i}));
  const Expr* val =
      arena->alu(Alu::Add, DType::f32,
                 {arena->alu(Alu::Mul, DType::f32,
                             {arena->load(0, DType::f32, i), arena->constant(DType::f32, 2)}),
                  arena->load(1, DType::f32, rev)});
  kir::Kernel k = make_kernel(
      "ew1d", {in_param(DType::f32, {n}), in_param(DType::f32, {n}), out_param(DType::f32, {n})},
      {n}, arena, {{2, i, val}});
  auto x = ramp(n, 0.5, -3), y = ramp(n, -0.25, 7);
  auto res = run_kernel(k, {Buffer(DType::f32, x), Buffer(DType::f32, y)});
  ASSERT_EQ(res.size(), 3u);
  for (int64_t j = 0; j < n; ++j)
    ASSERT_EQ(res[2].get(j),
              static_cast<float>(static_cast<float>(x[j] * 2) + static_cast<float>(y[n - 1 - j])))
        << j << "\n"
        << kir::print_kernel(k);
}

TEST(CpuLoopNest, ThreeDimensionalDomainWithBroadcastReads) {
  // out[i,j,k] = x[i,j,k] + y[k] * z[i] + (100i + 10j + k), domain [3,5,7]
  auto arena = std::make_shared<kir::ExprArena>();
  Ix ix{*arena};
  const Expr *i = ix.v(0), *j = ix.v(1), *k = ix.v(2);
  const Expr* flat = ix.add(ix.add(ix.mul(i, 35), ix.mul(j, 7)), k);
  const Expr* code = ix.add(ix.add(ix.mul(i, 100), ix.mul(j, 10)), k);
  const Expr* yz = arena->alu(Alu::Mul, DType::f32,
                              {arena->load(1, DType::f32, k), arena->load(2, DType::f32, i)});
  const Expr* val =
      arena->alu(Alu::Add, DType::f32,
                 {arena->alu(Alu::Add, DType::f32, {arena->load(0, DType::f32, flat), yz}),
                  arena->alu(Alu::Cast, DType::f32, {code})});
  kir::Kernel kern = make_kernel(
      "ew3d",
      {in_param(DType::f32, {3, 5, 7}), in_param(DType::f32, {7}), in_param(DType::f32, {3}),
       out_param(DType::f32, {3, 5, 7}), out_param(DType::i32, {3, 5, 7})},
      {3, 5, 7}, arena, {{3, flat, val}, {4, flat, arena->alu(Alu::Cast, DType::i32, {code})}});
  auto x = ramp(105, 0.125, -1), y = ramp(7, 1.5, 0.5), z = ramp(3, -2, 1);
  auto res =
      run_kernel(kern, {Buffer(DType::f32, x), Buffer(DType::f32, y), Buffer(DType::f32, z)});
  ASSERT_EQ(res.size(), 5u);
  for (int a = 0; a < 3; ++a)
    for (int b = 0; b < 5; ++b)
      for (int c = 0; c < 7; ++c) {
        const int f = a * 35 + b * 7 + c;
        const float want = static_cast<float>(x[f]) +
                           static_cast<float>(y[c]) * static_cast<float>(z[a]) +
                           static_cast<float>(100 * a + 10 * b + c);
        EXPECT_FLOAT_EQ(res[3].get(f), want) << a << "," << b << "," << c << "\n"
                                             << kir::print_kernel(kern);
        EXPECT_EQ(res[4].get(f), 100 * a + 10 * b + c);
      }
}

TEST(CpuLoopNest, FlatDomainWithDivModBroadcasting) {
  // domain [105] = [3,5,7] flattened: out[v] = x[v] * y[v % 7] + z[v / 35] - w[(v / 7) % 5]
  auto arena = std::make_shared<kir::ExprArena>();
  Ix ix{*arena};
  const Expr* v = ix.v(0);
  auto ld = [&](int buf, const Expr* idx) { return arena->load(buf, DType::i32, idx); };
  const Expr* val =
      arena->alu(Alu::Sub, DType::i32,
                 {arena->alu(Alu::Add, DType::i32,
                             {arena->alu(Alu::Mul, DType::i32, {ld(0, v), ld(1, ix.mod(v, 7))}),
                              ld(2, ix.div(v, 35))}),
                  ld(3, ix.mod(ix.div(v, 7), 5))});
  kir::Kernel k = make_kernel(
      "divmod",
      {in_param(DType::i32, {105}), in_param(DType::i32, {7}), in_param(DType::i32, {3}),
       in_param(DType::i32, {5}), out_param(DType::i32, {105})},
      {105}, arena, {{4, v, val}});
  auto x = ramp(105, 3, -50), y = ramp(7, -2, 3), z = ramp(3, 1000, 0), w = ramp(5, 11, 1);
  auto res = run_kernel(k, {Buffer(DType::i32, x), Buffer(DType::i32, y), Buffer(DType::i32, z),
                            Buffer(DType::i32, w)});
  ASSERT_EQ(res.size(), 5u);
  for (int f = 0; f < 105; ++f)
    EXPECT_EQ(res[4].get(f), x[f] * y[f % 7] + z[f / 35] - w[(f / 7) % 5]) << f;
}

TEST(CpuLoopNest, TransposedRead) {
  auto arena = std::make_shared<kir::ExprArena>();
  Ix ix{*arena};
  const Expr *i = ix.v(0), *j = ix.v(1);
  kir::Kernel k = make_kernel(
      "transpose", {in_param(DType::f64, {7, 5}), out_param(DType::f64, {5, 7})}, {5, 7}, arena,
      {{1, ix.add(ix.mul(i, 7), j), arena->load(0, DType::f64, ix.add(ix.mul(j, 5), i))}});
  auto x = ramp(35, 1.25, 0);
  auto res = run_kernel(k, {Buffer(DType::f64, x)});
  ASSERT_EQ(res.size(), 2u);
  for (int a = 0; a < 5; ++a)
    for (int b = 0; b < 7; ++b) EXPECT_EQ(res[1].get(a * 7 + b), x[b * 5 + a]);
}

TEST(CpuLoopNest, ScalarDomainRunsOnce) {
  auto arena = std::make_shared<kir::ExprArena>();
  const Expr* zero = arena->index(0);
  kir::Kernel k = make_kernel(
      "scalar", {in_param(DType::i64, {}), out_param(DType::i64, {})}, {}, arena,
      {{1, zero,
        arena->alu(Alu::Add, DType::i64, {arena->load(0, DType::i64, zero), arena->index(5)})}});
  auto res = run_kernel(k, {Buffer(DType::i64, std::vector<double>{37})});
  ASSERT_EQ(res.size(), 2u);
  EXPECT_EQ(res[1].get_int(0), 42);
}

TEST(CpuLoopNest, EmptyInnerAxisTouchesNothing) {
  auto arena = std::make_shared<kir::ExprArena>();
  Ix ix{*arena};
  // x[i] would be hoisted out of the (empty) inner loop; with no points it must not be read.
  const Expr* val =
      arena->alu(Alu::Add, DType::f32,
                 {arena->load(0, DType::f32, ix.v(0)), arena->load(1, DType::f32, ix.v(1))});
  kir::Kernel k = make_kernel(
      "empty",
      {in_param(DType::f32, {3}), in_param(DType::f32, {0}), out_param(DType::f32, {3, 0})}, {3, 0},
      arena, {{2, ix.add(ix.mul(ix.v(0), 0), ix.v(1)), val}});
  auto art = backend().compile(k, {});
  ASSERT_TRUE(art.has_value()) << art.error().message;
  void* bufs[] = {nullptr, nullptr, nullptr};
  (*art)->fn(bufs, 0, 3);  // would crash on a null load
}

TEST(CpuLoopNest, F16AndBf16RoundTripEveryBitPattern) {
  for (DType t : {DType::f16, DType::bf16}) {
    const int64_t n = 65536;
    auto arena = std::make_shared<kir::ExprArena>();
    const Expr* i = arena->var(0);
    // out = in (through f32 registers); out2 = cast(cast(in, f32), t)
    const Expr* x = arena->load(0, t, i);
    const Expr* through_f32 = arena->alu(Alu::Cast, t, {arena->alu(Alu::Cast, DType::f32, {x})});
    kir::Kernel k =
        make_kernel("roundtrip", {in_param(t, {n}), out_param(t, {n}), out_param(t, {n})}, {n},
                    arena, {{1, i, x}, {2, i, through_f32}});
    Buffer in(t, static_cast<size_t>(n));
    for (int64_t j = 0; j < n; ++j) in.put(j, static_cast<uint16_t>(j));
    auto res = run_kernel(k, {in});
    ASSERT_EQ(res.size(), 3u);
    for (int64_t j = 0; j < n; ++j) {
      const double v = in.get(j);
      for (int out : {1, 2}) {
        if (std::isnan(v))
          EXPECT_TRUE(std::isnan(res[out].get(j))) << ir::dtype_name(t) << " pattern " << j;
        else
          ASSERT_EQ(res[out].raw<uint16_t>(j), static_cast<uint16_t>(j))
              << ir::dtype_name(t) << " pattern " << j;
      }
    }
  }
}

TEST(CpuLoopNest, F16AndBf16ComputeInF32AndRoundOnStore) {
  for (DType t : {DType::f16, DType::bf16}) {
    const int64_t n = 2000;
    auto arena = std::make_shared<kir::ExprArena>();
    const Expr* i = arena->var(0);
    const Expr* val =
        arena->alu(Alu::Mul, t,
                   {arena->alu(Alu::Add, t, {arena->load(0, t, i), arena->load(1, t, i)}),
                    arena->constant(t, 0.1)});
    kir::Kernel k = make_kernel(
        "half", {in_param(t, {n}), in_param(t, {n}), out_param(t, {n}), out_param(DType::f32, {n})},
        {n}, arena, {{2, i, val}});
    auto a = ramp(n, 0.37, -300), b = ramp(n, -0.011, 5);
    Buffer ba(t, a), bb(t, b);
    auto res = run_kernel(k, {ba, bb});
    ASSERT_EQ(res.size(), 4u);
    const float c = static_cast<float>(to_dtype(t, 0.1));  // the constant holds a t value
    for (int64_t j = 0; j < n; ++j) {
      const float want = (static_cast<float>(ba.get(j)) + static_cast<float>(bb.get(j))) * c;
      EXPECT_EQ(res[2].get(j), to_dtype(t, want)) << ir::dtype_name(t) << " element " << j;
    }
  }
}

}  // namespace
}  // namespace kiln::codegen::testing
