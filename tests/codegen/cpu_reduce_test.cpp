// Reductions in the cpu backend: every ReduceOp in every numeric dtype against a scalar fold,
// argmax/argmin ties and NaN, NaN propagation, several reduce variables, empty extents, and
// reductions nested in elementwise expressions and in other reductions.
#include <gtest/gtest.h>

#include <fmt/format.h>
#include <cmath>
#include <functional>
#include <limits>

#include "tests/codegen/cpu_test_support.h"

namespace kiln::codegen::testing {
namespace {

using kir::Alu;
using kir::Expr;
using kir::ReduceOp;
constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

const Expr* row_index(kir::ExprArena& a, int64_t cols, int32_t row_var, int32_t col_var) {
  return a.alu(Alu::Add, DType::i64,
               {a.alu(Alu::Mul, DType::i64, {a.var(row_var), a.index(cols)}), a.var(col_var)});
}

// out[r] = reduce_c x[r, c] over a [rows, cols] buffer.
std::vector<Buffer> reduce_rows(ReduceOp op, DType t, const std::vector<double>& x, int64_t rows,
                                int64_t cols) {
  auto a = std::make_shared<kir::ExprArena>();
  const bool arg = op == ReduceOp::ArgMax || op == ReduceOp::ArgMin;
  const DType out = arg ? DType::i32 : t;
  const Expr* r = a->reduce(op, out, a->load(0, t, row_index(*a, cols, 0, 1)), {1}, {cols});
  kir::Kernel k = make_kernel(fmt::format("reduce_{}", kir::reduce_op_name(op)),
                              {in_param(t, {rows, cols}), out_param(out, {rows})}, {rows}, a,
                              {{1, a->var(0), r}});
  return run_kernel(k, {Buffer(t, x)});
}

// The scalar fold of one row, in double (floats) or wrapping int64 (integers).
double fold(ReduceOp op, DType t, const std::vector<double>& row) {
  if (op == ReduceOp::ArgMax || op == ReduceOp::ArgMin) {
    size_t best = 0;
    for (size_t j = 1; j < row.size(); ++j) {
      if (std::isnan(row[best])) break;
      const bool better =
          std::isnan(row[j]) || (op == ReduceOp::ArgMax ? row[j] > row[best] : row[j] < row[best]);
      if (better) best = j;
    }
    return static_cast<double>(best);
  }
  if (!ir::is_float(t)) {
    int64_t acc = op == ReduceOp::Prod ? 1 : op == ReduceOp::Sum ? 0 : static_cast<int64_t>(row[0]);
    for (double v : row) {
      const int64_t x = static_cast<int64_t>(v);
      if (op == ReduceOp::Sum)
        acc = static_cast<int64_t>(static_cast<uint64_t>(acc) + static_cast<uint64_t>(x));
      if (op == ReduceOp::Prod)
        acc = static_cast<int64_t>(static_cast<uint64_t>(acc) * static_cast<uint64_t>(x));
      if (op == ReduceOp::Max) acc = std::max(acc, x);
      if (op == ReduceOp::Min) acc = std::min(acc, x);
    }
    return static_cast<double>(wrap_int(t, acc));
  }
  double acc = op == ReduceOp::Sum    ? 0
               : op == ReduceOp::Prod ? 1
               : op == ReduceOp::Max  ? -kInf
                                      : kInf;
  for (double v : row) {
    if (op == ReduceOp::Sum) acc += v;
    if (op == ReduceOp::Prod) acc *= v;
    if (op == ReduceOp::Max) acc = std::isnan(v) || std::isnan(acc) ? kNaN : std::max(acc, v);
    if (op == ReduceOp::Min) acc = std::isnan(v) || std::isnan(acc) ? kNaN : std::min(acc, v);
  }
  return to_dtype(t, acc);
}

// f32: reassociated (vectorized) accumulation.
double sum_tolerance(DType t) {
  return ir::compare_tolerance(t, 1e-5, 1e-13);
}

TEST(CpuReduce, EveryOpInEveryNumericDtype) {
  const int64_t rows = 6, cols = 37;
  for (DType t : ir::kAllDTypes) {
    if (t == DType::boolean) continue;
    for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Prod, ReduceOp::Max, ReduceOp::Min,
                        ReduceOp::ArgMax, ReduceOp::ArgMin}) {
      std::vector<double> x;
      for (int64_t j = 0; j < rows * cols; ++j) {
        // Prod: values near 1 (floats) or in {1,2,-1} (ints) so the product stays meaningful.
        double v = op == ReduceOp::Prod ? (ir::is_float(t) ? 1 + ((j * 7) % 11 - 5) * 0.01
                                                           : (j % 5 == 0   ? 2
                                                              : j % 7 == 0 ? -1
                                                                           : 1))
                                        : ((j * 37) % 101) - 50 + (ir::is_float(t) ? 0.25 : 0);
        if (t == DType::u8 && v < 0) v = -v;
        x.push_back(to_dtype(t, v));
      }
      auto res = reduce_rows(op, t, x, rows, cols);
      ASSERT_EQ(res.size(), 2u);
      for (int64_t r = 0; r < rows; ++r) {
        const std::vector<double> row(x.begin() + r * cols, x.begin() + (r + 1) * cols);
        const double want = fold(op, t, row);
        const double tol = (op == ReduceOp::Sum || op == ReduceOp::Prod) ? sum_tolerance(t) : 0;
        EXPECT_LE(rel_error(res[1].get(r), want, 1.0), tol)
            << kir::reduce_op_name(op) << " on " << ir::dtype_name(t) << " row " << r << ": got "
            << res[1].get(r) << ", want " << want;
      }
    }
  }
}

TEST(CpuReduce, ArgMaxArgMinTiesAndNaN) {
  const std::vector<std::vector<double>> rows = {
      {1, 3, 3, 2}, {kNaN, 1, kNaN, 5}, {5, kNaN, 7, kNaN}, {-kInf, -kInf, -kInf, -kInf},
      {2, 2, 2, 2}, {kInf, 1, kInf, 0}, {0, -1, -1, 4},     {3, 1, 4, 1}};
  const std::vector<int> want_max = {1, 0, 1, 0, 0, 0, 3, 2};
  const std::vector<int> want_min = {0, 0, 1, 0, 0, 3, 1, 1};
  for (DType t : {DType::f32, DType::f64, DType::f16, DType::bf16}) {
    std::vector<double> x;
    for (const auto& r : rows) x.insert(x.end(), r.begin(), r.end());
    auto amax = reduce_rows(ReduceOp::ArgMax, t, x, 8, 4);
    auto amin = reduce_rows(ReduceOp::ArgMin, t, x, 8, 4);
    ASSERT_EQ(amax.size(), 2u);
    ASSERT_EQ(amin.size(), 2u);
    for (int r = 0; r < 8; ++r) {
      EXPECT_EQ(amax[1].get(r), want_max[r]) << ir::dtype_name(t) << " argmax row " << r;
      EXPECT_EQ(amin[1].get(r), want_min[r]) << ir::dtype_name(t) << " argmin row " << r;
    }
  }
  // Integer ties: the first extreme wins.
  auto imax = reduce_rows(ReduceOp::ArgMax, DType::i8, {-128, 127, 127, -128}, 1, 4);
  auto imin = reduce_rows(ReduceOp::ArgMin, DType::i8, {-128, 127, 127, -128}, 1, 4);
  ASSERT_EQ(imax.size(), 2u);
  ASSERT_EQ(imin.size(), 2u);
  EXPECT_EQ(imax[1].get(0), 1);
  EXPECT_EQ(imin[1].get(0), 0);
}

TEST(CpuReduce, MaxMinSumPropagateNaNAndInf) {
  const std::vector<double> x = {1, kNaN, 3, 2, 1, 2, 3, 4, -kInf, 1, 2, 3, kInf, -kInf, 0, 0};
  auto mx = reduce_rows(ReduceOp::Max, DType::f32, x, 4, 4);
  auto mn = reduce_rows(ReduceOp::Min, DType::f32, x, 4, 4);
  auto sm = reduce_rows(ReduceOp::Sum, DType::f32, x, 4, 4);
  ASSERT_EQ(mx.size(), 2u);
  EXPECT_TRUE(std::isnan(mx[1].get(0)));
  EXPECT_TRUE(std::isnan(mn[1].get(0)));
  EXPECT_TRUE(std::isnan(sm[1].get(0)));
  EXPECT_EQ(mx[1].get(1), 4);
  EXPECT_EQ(mn[1].get(2), -kInf);
  EXPECT_EQ(sm[1].get(2), -kInf);
  EXPECT_TRUE(std::isnan(sm[1].get(3)));  // inf + -inf
  EXPECT_EQ(mx[1].get(3), kInf);
}

TEST(CpuReduce, LongContiguousSumAndMaxMatchTheFold) {
  // Long enough for the vectorized loop body and its remainder.
  const int64_t rows = 3, cols = 1031;
  std::vector<double> x;
  for (int64_t j = 0; j < rows * cols; ++j)
    x.push_back(static_cast<float>(std::sin(j * 0.37) * 10));
  x[cols + 517] = 1e4;            // max in the middle of row 1
  x[2 * cols + cols - 1] = kNaN;  // NaN in the remainder of row 2
  auto sm = reduce_rows(ReduceOp::Sum, DType::f32, x, rows, cols);
  auto mx = reduce_rows(ReduceOp::Max, DType::f32, x, rows, cols);
  ASSERT_EQ(sm.size(), 2u);
  ASSERT_EQ(mx.size(), 2u);
  for (int64_t r = 0; r < rows; ++r) {
    const std::vector<double> row(x.begin() + r * cols, x.begin() + (r + 1) * cols);
    EXPECT_LE(rel_error(sm[1].get(r), fold(ReduceOp::Sum, DType::f32, row), 1.0), 1e-5) << r;
    EXPECT_EQ(rel_error(mx[1].get(r), fold(ReduceOp::Max, DType::f32, row)), 0) << r;
  }
}

// A float product or sum too short to vectorize multiplies or adds in order, whatever its body:
// one of a loop-invariant value (a broadcast scalar), unrolled, carried reassoc and LLVM regrouped
// 7 equal factors into powers of them, another value than the same product of a buffer's 7
// elements (RandomGraphFuzz.AValueIsTheSameWhicheverPlanComputesIt, seed 168).
TEST(CpuReduce, AShortProductOrSumOfOneValueFoldsInOrder) {
  for (ReduceOp op : {ReduceOp::Prod, ReduceOp::Sum})
    for (int64_t n : {3, 5, 7})
      for (double value : {1.0999999046325684, 1.2345678806304932, -0.7071067690849304,
                           3.1415927410125732, 1.0000001192092896}) {
        auto a = std::make_shared<kir::ExprArena>();
        // out[] = op over j < n of x[0]: the body does not depend on j.
        const Expr* r = a->reduce(op, DType::f32, a->load(0, DType::f32, a->index(0)), {0}, {n});
        kir::Kernel k =
            make_kernel("fold_one_value", {in_param(DType::f32, {1}), out_param(DType::f32, {})},
                        {}, a, {{1, a->index(0), r}});
        auto res = run_kernel(k, {Buffer(DType::f32, std::vector<double>{value})});
        ASSERT_EQ(res.size(), 2u);
        const auto x = static_cast<float>(value);
        float want = op == ReduceOp::Prod ? 1.0f : 0.0f;
        for (int64_t j = 0; j < n; ++j) want = op == ReduceOp::Prod ? want * x : want + x;
        EXPECT_EQ(res[1].get(0), want) << kir::reduce_op_name(op) << " of " << n << " x " << x;
      }
}

// A reduction over one element opens no loop, so a sum around it is the innermost loop and sums
// in lanes, as the same sum over a buffer holding those values does. As a loop, it made the outer
// sum a loop with another inside, summed in order: another value by plan (RandomGraphFuzz seed
// 1077, a softmax over the sums of one element each).
TEST(CpuReduce, ASumAroundAReductionOfOneElementSumsAsOverABuffer) {
  const int64_t n = 300;
  std::vector<double> x, y;
  for (int64_t j = 0; j < n; ++j) {
    x.push_back(std::sin(j * 0.37) * 10 + 1e3 * std::cos(j * 1.3));
    y.push_back(x.back() * 1.5);
  }
  auto a = std::make_shared<kir::ExprArena>();
  // out[] = sum over j < n of (sum over k < 1 of x[j + k]) * 1.5
  const Expr* inner = a->reduce(
      ReduceOp::Sum, DType::f64,
      a->load(0, DType::f64, a->alu(Alu::Add, DType::i64, {a->var(0), a->var(1)})), {1}, {1});
  const Expr* outer =
      a->reduce(ReduceOp::Sum, DType::f64,
                a->alu(Alu::Mul, DType::f64, {inner, a->constant(DType::f64, 1.5)}), {0}, {n});
  kir::Kernel nested = make_kernel("nested", {in_param(DType::f64, {n}), out_param(DType::f64, {})},
                                   {}, a, {{1, a->index(0), outer}});
  auto b = std::make_shared<kir::ExprArena>();
  kir::Kernel flat = make_kernel(
      "flat", {in_param(DType::f64, {n}), out_param(DType::f64, {})}, {}, b,
      {{1, b->index(0),
        b->reduce(ReduceOp::Sum, DType::f64, b->load(0, DType::f64, b->var(0)), {0}, {n})}});
  auto got = run_kernel(nested, {Buffer(DType::f64, x)});
  auto want = run_kernel(flat, {Buffer(DType::f64, y)});
  ASSERT_EQ(got.size(), 2u);
  ASSERT_EQ(want.size(), 2u);
  EXPECT_EQ(got[1].get(0), want[1].get(0));
}

// A sum over a view of a buffer (a pad, a concat, a roll: indices through min, max, where and
// mod) adds in the order the same sum over that view written to a buffer does: in lanes. Read
// through the view, the index was not affine in the summed variable, the loop summed in order,
// and a dot with a padded vector was 1 ulp from the dot with the pad written (RandomGraphFuzz
// seed 1970).
TEST(CpuReduce, ASumOverAPadConcatOrRollAddsAsOverItsBuffer) {
  const int64_t n = 512, x_len = 300, before = 100;
  const float pad_value = 0.5f;
  std::vector<double> x, y, z;
  for (int64_t j = 0; j < n; ++j) {
    // Magnitudes from 1e-3 to 1e3: an order of addition shows in the last bits.
    y.push_back(static_cast<float>(std::sin(j * 0.37) * std::pow(10.0, (j % 7) - 3)));
    z.push_back(static_cast<float>(std::cos(j * 0.11) * std::pow(10.0, (j % 5) - 2)));
    if (j < x_len) x.push_back(static_cast<float>(1e3 * std::cos(j * 1.3) + j * 1e-3));
  }
  // The views written out: the pad, the concat of x and z's tail, x rolled by 37.
  const int64_t tail = n - x_len, shift = 37;
  std::vector<double> padded(n, pad_value), joined(x), rolled;
  for (int64_t j = 0; j < x_len; ++j) padded[before + j] = x[j];
  joined.insert(joined.end(), z.begin(), z.begin() + tail);
  for (int64_t j = 0; j < n; ++j) rolled.push_back(joined[(j + shift) % n]);

  // out[] = sum over j < n of view(j) * y[j], the view built from its index j.
  const auto dot = [&](const char* name, std::vector<kir::Param> params,
                       const std::function<const Expr*(kir::ExprArena&)>& view) {
    auto a = std::make_shared<kir::ExprArena>();
    const int32_t y_param = static_cast<int32_t>(params.size());
    params.push_back(in_param(DType::f32, {n}));
    params.push_back(out_param(DType::f32, {}));
    const Expr* r =
        a->reduce(ReduceOp::Sum, DType::f32,
                  a->alu(Alu::Mul, DType::f32, {view(*a), a->load(y_param, DType::f32, a->var(0))}),
                  {0}, {n});
    return make_kernel(name, std::move(params), {}, a, {{y_param + 1, a->index(0), r}});
  };
  const auto clamp = [](kir::ExprArena& a, const Expr* i, int64_t hi) {
    return a.alu(Alu::Min, DType::i64, {a.alu(Alu::Max, DType::i64, {i, a.index(0)}), a.index(hi)});
  };
  const kir::Kernel over_buffer = dot("over_buffer", {in_param(DType::f32, {n})},
                                      [](auto& a) { return a.load(0, DType::f32, a.var(0)); });
  const kir::Kernel over_pad = dot("over_pad", {in_param(DType::f32, {x_len})}, [&](auto& a) {
    const Expr* i = a.alu(Alu::Sub, DType::i64, {a.var(0), a.index(before)});
    const Expr* inside = a.alu(Alu::And, DType::boolean,
                               {a.alu(Alu::Ge, DType::boolean, {i, a.index(0)}),
                                a.alu(Alu::Lt, DType::boolean, {i, a.index(x_len)})});
    return a.alu(
        Alu::Where, DType::f32,
        {inside, a.load(0, DType::f32, clamp(a, i, x_len - 1)), a.constant(DType::f32, pad_value)});
  });
  // concat(x, z[:tail]) at index i.
  const auto concat_at = [&](kir::ExprArena& a, const Expr* i) {
    const Expr* in_x = a.alu(Alu::Lt, DType::boolean, {i, a.index(x_len)});
    return a.alu(Alu::Where, DType::f32,
                 {in_x, a.load(0, DType::f32, clamp(a, i, x_len - 1)),
                  a.load(1, DType::f32,
                         clamp(a, a.alu(Alu::Sub, DType::i64, {i, a.index(x_len)}), tail - 1))});
  };
  const std::vector<kir::Param> two = {in_param(DType::f32, {x_len}), in_param(DType::f32, {n})};
  const kir::Kernel over_concat =
      dot("over_concat", two, [&](auto& a) { return concat_at(a, a.var(0)); });
  const kir::Kernel over_roll = dot("over_roll", two, [&](auto& a) {
    return concat_at(a,
                     a.alu(Alu::Mod, DType::i64,
                           {a.alu(Alu::Add, DType::i64, {a.var(0), a.index(shift)}), a.index(n)}));
  });

  const auto sum = [&](const kir::Kernel& k, std::vector<Buffer> in) {
    in.push_back(Buffer(DType::f32, y));
    std::vector<Buffer> out = run_kernel(k, std::move(in));
    return out.empty() ? std::numeric_limits<double>::quiet_NaN() : out.back().get(0);
  };
  const double want_pad = sum(over_buffer, {Buffer(DType::f32, padded)});
  EXPECT_EQ(sum(over_pad, {Buffer(DType::f32, x)}), want_pad);
  EXPECT_EQ(sum(over_concat, {Buffer(DType::f32, x), Buffer(DType::f32, z)}),
            sum(over_buffer, {Buffer(DType::f32, joined)}));
  EXPECT_EQ(sum(over_roll, {Buffer(DType::f32, x), Buffer(DType::f32, z)}),
            sum(over_buffer, {Buffer(DType::f32, rolled)}));
  // And each is the sum, within a float sum's rounding.
  double exact = 0;
  for (int64_t j = 0; j < n; ++j) exact += padded[j] * y[j];
  EXPECT_LE(rel_error(want_pad, exact, 1.0), 1e-5);
}

// A reduction's order is the graph's (kir::ReduceOrder), not its body's: a sum over a row adds in
// lanes whether the kernel reads its terms from a buffer, through a permute's strides, or with a
// loop of its own (a sliding max inlined into the sum), and a sum across rows adds in order even
// where its kernel reads the terms contiguously. Read through strides or with a loop inside, the
// row was summed in order, 1 ulp from the same sum over the terms written to a buffer
// (RandomGraphFuzz seed 20261792: a log-softmax over a padded sliding max of 64).
TEST(CpuReduce, ASumAddsInTheGraphsOrderHoweverItsKernelReadsTheTerms) {
  using kir::ReduceOrder;
  for (const int64_t n : {64, 100, 300}) {
    SCOPED_TRACE(fmt::format("{} terms", n));
    std::vector<double> x, maxima, column;  // x: n + 1 values; column: x's, 3 apart
    for (int64_t j = 0; j <= n; ++j)
      x.push_back(std::sin(j * 0.37) * std::pow(10.0, static_cast<double>(j % 9) - 4));
    for (int64_t j = 0; j < n; ++j) maxima.push_back(std::max(x[j], x[j + 1]));
    std::vector<double> strided(3 * n, 0.0);
    for (int64_t j = 0; j < n; ++j) strided[3 * j + 1] = x[j];
    column.assign(x.begin(), x.begin() + n);
    double in_order = 0, maxima_in_order = 0;
    for (int64_t j = 0; j < n; ++j) in_order += x[j], maxima_in_order += maxima[j];

    // out[] = sum over j < n of term(j), in `order`.
    const auto sum = [&](const char* name, int64_t in_len, ReduceOrder order,
                         const std::function<const Expr*(kir::ExprArena&)>& term,
                         const std::vector<double>& in) {
      auto a = std::make_shared<kir::ExprArena>();
      const Expr* r = a->reduce(ReduceOp::Sum, DType::f64, term(*a), {0}, {n}, {}, order);
      const kir::Kernel k =
          make_kernel(name, {in_param(DType::f64, {in_len}), out_param(DType::f64, {})}, {}, a,
                      {{1, a->index(0), r}});
      std::vector<Buffer> out = run_kernel(k, {Buffer(DType::f64, in)});
      return out.empty() ? std::numeric_limits<double>::quiet_NaN() : out.back().get(0);
    };
    const auto contiguous = [](kir::ExprArena& a) { return a.load(0, DType::f64, a.var(0)); };
    const auto every_third = [](kir::ExprArena& a) {
      return a.load(0, DType::f64,
                    a.alu(Alu::Add, DType::i64,
                          {a.alu(Alu::Mul, DType::i64, {a.var(0), a.index(3)}), a.index(1)}));
    };
    const auto sliding_max = [](kir::ExprArena& a) {
      return a.reduce(ReduceOp::Max, DType::f64,
                      a.load(0, DType::f64, a.alu(Alu::Add, DType::i64, {a.var(0), a.var(1)})), {1},
                      {2});
    };
    const double lanes = sum("buffer", n, ReduceOrder::lanes, contiguous, column);
    const double maxima_lanes = sum("maxima", n, ReduceOrder::lanes, contiguous, maxima);
    // The data tells the orders apart (else this test could not fail).
    ASSERT_NE(lanes, in_order);
    ASSERT_NE(maxima_lanes, maxima_in_order);
    EXPECT_EQ(sum("buffer_loads", n, ReduceOrder::loads, contiguous, column), lanes);
    EXPECT_EQ(sum("strided", 3 * n, ReduceOrder::lanes, every_third, strided), lanes);
    EXPECT_EQ(sum("nested", n + 1, ReduceOrder::lanes, sliding_max, x), maxima_lanes);
    EXPECT_EQ(sum("buffer_in_order", n, ReduceOrder::in_order, contiguous, column), in_order);
    EXPECT_EQ(sum("strided_in_order", 3 * n, ReduceOrder::in_order, every_third, strided),
              in_order);
  }
}

// A softmax over the rows of a transposed buffer (its terms read 3 apart) keeps its row of
// exponentials (row_reuse.h) while its sum is staged, and equals the softmax over the buffer
// transposed, bit for bit: the staged row's fill loop also fills the kept row.
TEST(CpuReduce, ASoftmaxOverStridedRowsKeepsItsRowAndAddsInLanes) {
  using kir::ReduceOrder;
  const int64_t rows = 3;
  for (const int64_t n : {100, 300}) {
    SCOPED_TRACE(fmt::format("rows of {}", n));
    std::vector<double> x_rows, x_columns(rows * n);  // [rows, n] and its transpose [n, rows]
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t j = 0; j < n; ++j) {
        const double v = std::sin(j * 0.37 + r) * static_cast<double>(j % 11) + 1e-3 * j;
        x_rows.push_back(v);
        x_columns[j * rows + r] = v;
      }
    const auto softmax = [&](bool strided) {
      auto a = std::make_shared<kir::ExprArena>();
      const auto x = [&](int32_t v) {
        const Expr* at =
            strided ? a->alu(Alu::Add, DType::i64,
                             {a->alu(Alu::Mul, DType::i64, {a->var(v), a->index(rows)}), a->var(0)})
                    : a->alu(Alu::Add, DType::i64,
                             {a->alu(Alu::Mul, DType::i64, {a->var(0), a->index(n)}), a->var(v)});
        return a->load(0, DType::f64, at);
      };
      const Expr* mx = a->reduce(ReduceOp::Max, DType::f64, x(2), {2}, {n}, {}, ReduceOrder::lanes);
      const auto shifted_exp = [&](int32_t v) {
        return a->alu(Alu::Exp, DType::f64, {a->alu(Alu::Sub, DType::f64, {x(v), mx})});
      };
      const Expr* sum =
          a->reduce(ReduceOp::Sum, DType::f64, shifted_exp(3), {3}, {n}, {}, ReduceOrder::lanes);
      const Expr* at = a->alu(Alu::Add, DType::i64,
                              {a->alu(Alu::Mul, DType::i64, {a->var(0), a->index(n)}), a->var(1)});
      return make_kernel(strided ? "strided" : "rows",
                         {in_param(DType::f64, {rows * n}), out_param(DType::f64, {rows * n})},
                         {rows, n}, a,
                         {{1, at, a->alu(Alu::Div, DType::f64, {shifted_exp(1), sum})}});
    };
    const kir::Kernel strided = softmax(true);
    auto art = backend().compile(strided, {});
    ASSERT_TRUE(art.has_value()) << art.error().message;
    EXPECT_NE((*art)->llvm_ir.find(fmt::format("alloca [{} x double]", n)), std::string::npos)
        << "no kept row";
    EXPECT_NE((*art)->llvm_ir.find("r3.fill"), std::string::npos) << "no staged sum";
    std::vector<Buffer> want = run_kernel(softmax(false), {Buffer(DType::f64, x_rows)});
    std::vector<Buffer> got = run_kernel(strided, {Buffer(DType::f64, x_columns)});
    ASSERT_FALSE(want.empty());
    ASSERT_FALSE(got.empty());
    int differ = 0;
    for (int64_t i = 0; i < rows * n; ++i) differ += got.back().get(i) != want.back().get(i);
    EXPECT_EQ(differ, 0);
  }
}

// A row read by two reductions (a variance: the mean, then the squares about it) over more than
// 128 columns stays two loops: unrolled whole, LLVM kept the first pass's loads for the second,
// 64 AVX-512 vectors for a 1024-wide f32 row, half of them spilled to the stack (layernorm over
// 8192 x 1024 on 2 Xeon threads: 1.37-1.41 ms against 1.25-1.29 rolled). Each pass still runs 4
// vectors at once.
TEST(CpuReduce, ALongRowReadTwiceStaysALoop) {
  const int64_t rows = 4, cols = 1024;
  auto a = std::make_shared<kir::ExprArena>();
  const Expr* mean = a->alu(
      Alu::Mul, DType::f32,
      {a->reduce(ReduceOp::Sum, DType::f32, a->load(0, DType::f32, row_index(*a, cols, 0, 1)),
                 {1}, {cols}),
       a->constant(DType::f32, 1.0 / cols)});
  const Expr* d = a->alu(Alu::Sub, DType::f32,
                         {a->load(0, DType::f32, row_index(*a, cols, 0, 2)), mean});
  const Expr* var = a->reduce(ReduceOp::Sum, DType::f32, a->alu(Alu::Mul, DType::f32, {d, d}),
                              {2}, {cols});
  kir::Kernel k = make_kernel("variance",
                              {in_param(DType::f32, {rows, cols}), out_param(DType::f32, {rows})},
                              {rows}, a, {{1, a->var(0), var}});
  auto art = backend().compile(k, {});
  ASSERT_TRUE(art.has_value()) << art.error().message;
  const std::string& ir = (*art)->llvm_ir;
  EXPECT_NE(ir.find("llvm.loop.unroll.disable"), std::string::npos) << ir;
  size_t vector_loads = 0;
  for (size_t at = ir.find("load <"); at != std::string::npos; at = ir.find("load <", at + 1))
    ++vector_loads;
  // Rolled: 4 a pass, and a few in the remainders; unrolled: 64 (AVX-512) or 128 (AVX2) a pass.
  EXPECT_LT(vector_loads, 40u) << ir;
  std::vector<double> x;
  for (int64_t j = 0; j < rows * cols; ++j)
    x.push_back(static_cast<float>(std::sin(j * 0.37) * 4 + (j / cols)));
  auto out = run_kernel(k, {Buffer(DType::f32, x)});
  ASSERT_EQ(out.size(), 2u);
  for (int64_t r = 0; r < rows; ++r) {
    double m = 0, v = 0;
    for (int64_t c = 0; c < cols; ++c) m += x[r * cols + c];
    m /= cols;
    for (int64_t c = 0; c < cols; ++c) v += (x[r * cols + c] - m) * (x[r * cols + c] - m);
    EXPECT_LE(rel_error(out[1].get(r), v, 1.0), 1e-4) << r;
  }
}

TEST(CpuReduce, SeveralReduceVariablesAndEmptyExtent) {
  // out[i] = sum_{j,k} x[i,j,k] over [3,5,7]; empty[i] = sum over a zero extent = 0, max = -inf
  auto a = std::make_shared<kir::ExprArena>();
  const Expr* idx =
      a->alu(Alu::Add, DType::i64,
             {a->alu(Alu::Mul, DType::i64, {a->var(0), a->index(35)}),
              a->alu(Alu::Add, DType::i64,
                     {a->alu(Alu::Mul, DType::i64, {a->var(1), a->index(7)}), a->var(2)})});
  const Expr* x = a->load(0, DType::f64, idx);
  const Expr* s = a->reduce(ReduceOp::Sum, DType::f64, x, {1, 2}, {5, 7});
  const Expr* e = a->reduce(ReduceOp::Sum, DType::f64, a->load(0, DType::f64, a->var(3)), {3}, {0});
  const Expr* m = a->reduce(ReduceOp::Max, DType::f64, a->load(0, DType::f64, a->var(4)), {4}, {0});
  kir::Kernel k = make_kernel("multi",
                              {in_param(DType::f64, {3, 5, 7}), out_param(DType::f64, {3}),
                               out_param(DType::f64, {3}), out_param(DType::f64, {3})},
                              {3}, a, {{1, a->var(0), s}, {2, a->var(0), e}, {3, a->var(0), m}});
  std::vector<double> xs;
  for (int j = 0; j < 105; ++j) xs.push_back(j * 0.5 - 10);
  auto res = run_kernel(k, {Buffer(DType::f64, xs)});
  ASSERT_EQ(res.size(), 4u);
  for (int i = 0; i < 3; ++i) {
    double want = 0;
    for (int j = 0; j < 35; ++j) want += xs[i * 35 + j];
    EXPECT_DOUBLE_EQ(res[1].get(i), want);
    EXPECT_EQ(res[2].get(i), 0);
    EXPECT_EQ(res[3].get(i), -kInf);
  }
}

TEST(CpuReduce, SoftmaxReducesNestedInElementwise) {
  // out[r,c] = exp(x[r,c] - max_c' x[r,c']) / sum_c'' exp(x[r,c''] - max_c' x[r,c'])
  const int64_t rows = 4, cols = 19;
  auto a = std::make_shared<kir::ExprArena>();
  const Expr* mx = a->reduce(ReduceOp::Max, DType::f32,
                             a->load(0, DType::f32, row_index(*a, cols, 0, 2)), {2}, {cols});
  auto shifted_exp = [&](int32_t col_var) {
    return a->alu(Alu::Exp, DType::f32,
                  {a->alu(Alu::Sub, DType::f32,
                          {a->load(0, DType::f32, row_index(*a, cols, 0, col_var)), mx})});
  };
  const Expr* sum = a->reduce(ReduceOp::Sum, DType::f32, shifted_exp(3), {3}, {cols});
  const Expr* val = a->alu(Alu::Div, DType::f32, {shifted_exp(1), sum});
  kir::Kernel k = make_kernel(
      "softmax", {in_param(DType::f32, {rows, cols}), out_param(DType::f32, {rows, cols})},
      {rows, cols}, a, {{1, row_index(*a, cols, 0, 1), val}});
  std::vector<double> x;
  for (int64_t j = 0; j < rows * cols; ++j)
    x.push_back(static_cast<float>(std::cos(j * 1.3) * 5 + (j / cols) * 100));
  auto res = run_kernel(k, {Buffer(DType::f32, x)});
  ASSERT_EQ(res.size(), 2u);
  for (int64_t r = 0; r < rows; ++r) {
    double m = -kInf, s = 0;
    for (int64_t c = 0; c < cols; ++c) m = std::max(m, x[r * cols + c]);
    for (int64_t c = 0; c < cols; ++c) s += std::exp(x[r * cols + c] - m);
    for (int64_t c = 0; c < cols; ++c)
      EXPECT_LE(rel_error(res[1].get(r * cols + c), std::exp(x[r * cols + c] - m) / s), 1e-6)
          << r << "," << c << "\n"
          << kir::print_kernel(k);
  }
}

TEST(CpuReduce, ReduceInsideAnotherReduce) {
  // var[r] = sum_j (x[r,j] - mean_k x[r,k])^2 with mean = sum_k x[r,k] * (1/cols); i64 argmax of it
  // too
  const int64_t rows = 5, cols = 23;
  auto a = std::make_shared<kir::ExprArena>();
  const Expr* mean =
      a->alu(Alu::Mul, DType::f64,
             {a->reduce(ReduceOp::Sum, DType::f64,
                        a->load(0, DType::f64, row_index(*a, cols, 0, 2)), {2}, {cols}),
              a->constant(DType::f64, 1.0 / cols)});
  const Expr* d =
      a->alu(Alu::Sub, DType::f64, {a->load(0, DType::f64, row_index(*a, cols, 0, 1)), mean});
  const Expr* var =
      a->reduce(ReduceOp::Sum, DType::f64, a->alu(Alu::Mul, DType::f64, {d, d}), {1}, {cols});
  kir::Kernel k =
      make_kernel("variance", {in_param(DType::f64, {rows, cols}), out_param(DType::f64, {rows})},
                  {rows}, a, {{1, a->var(0), var}});
  std::vector<double> x;
  for (int64_t j = 0; j < rows * cols; ++j) x.push_back(std::sin(j * 0.7) * (1 + j / cols));
  auto res = run_kernel(k, {Buffer(DType::f64, x)});
  ASSERT_EQ(res.size(), 2u);
  for (int64_t r = 0; r < rows; ++r) {
    double m = 0, v = 0;
    for (int64_t c = 0; c < cols; ++c) m += x[r * cols + c];
    m /= cols;
    for (int64_t c = 0; c < cols; ++c) v += (x[r * cols + c] - m) * (x[r * cols + c] - m);
    EXPECT_LE(rel_error(res[1].get(r), v), 1e-12) << r << "\n" << kir::print_kernel(k);
  }
}

}  // namespace
}  // namespace kiln::codegen::testing
