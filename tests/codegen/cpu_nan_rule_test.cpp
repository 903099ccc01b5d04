// kiln's NaN and signed-zero rule (docs/graph-format.md) on the cpu backend, bit for bit, at
// every vector width: max/min/relu/sign elementwise, the max/min reductions and argmax/argmin, with
// NaN, +-0 and +-inf in every position of vector bodies and scalar tails.
#include <gtest/gtest.h>

#include <fmt/format.h>
#include <bit>
#include <cmath>
#include <limits>

#include "ir/scalar_semantics.h"
#include "tests/codegen/cpu_test_support.h"

namespace kiln::codegen::testing {
namespace {

using kir::Alu;
using kir::Expr;
using kir::ReduceOp;
constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr DType kFloats[] = {DType::f32, DType::f64, DType::f16, DType::bf16};
// 0: the host's choice; the rest force the loop vectorizer's width (1 = scalar code).
constexpr int kVectorWidths[] = {0, 1, 4, 8, 16};

const std::vector<double> kSpecials = {kNaN, 0.0, -0.0, 1.0, -1.0, kInf, -kInf, 2.5};

// Same value and same sign bit; any NaN matches any NaN (payloads are not part of the rule).
bool same(double got, double want) {
  if (std::isnan(want) || std::isnan(got)) return std::isnan(want) && std::isnan(got);
  return got == want && std::signbit(got) == std::signbit(want);
}

std::string show(double v) {
  return std::isnan(v) ? "nan" : fmt::format("{}{}", std::signbit(v) && v == 0 ? "-" : "", v);
}

// out[i] = op(a[i], b[i]) over every ordered pair of specials, the pair list repeated with a
// shift so that each pair lands in vector lanes and in the scalar tail.
void check_binary(Alu op, DType t, int width) {
  SCOPED_TRACE(fmt::format("{} on {}, vector_width {}", kir::alu_name(op), ir::dtype_name(t), width));
  std::vector<double> av, bv;
  for (int rep = 0; rep < 3; ++rep) {
    for (double x : kSpecials)
      for (double y : kSpecials) {
        av.push_back(x);
        bv.push_back(y);
      }
    av.push_back(1.0);  // shifts the next repetition by one lane
    bv.push_back(2.0);
  }
  const int64_t n = static_cast<int64_t>(av.size());
  auto arena = std::make_shared<kir::ExprArena>();
  const Expr* i = arena->var(0);
  const bool unary = op == Alu::Relu || op == Alu::Sign;
  const Expr* e = unary ? arena->alu(op, t, {arena->load(0, t, i)})
                        : arena->alu(op, t, {arena->load(0, t, i), arena->load(1, t, i)});
  kir::Kernel k = make_kernel("rule", {in_param(t, {n}), in_param(t, {n}), out_param(t, {n})}, {n},
                              arena, {{2, i, e}});
  TuneParams params;
  params.vector_width = width;
  std::vector<Buffer> res = run_kernel(k, {Buffer(t, av), Buffer(t, bv)}, params);
  ASSERT_EQ(res.size(), 3u);
  for (int64_t j = 0; j < n; ++j) {
    const double want = op == Alu::Max    ? ir::ieee_maximum(av[j], bv[j])
                        : op == Alu::Min  ? ir::ieee_minimum(av[j], bv[j])
                        : op == Alu::Relu ? ir::ieee_maximum(av[j], 0.0)
                                          // sign: NaN stays NaN, both zeros give +0 (numpy.sign)
                                          : (std::isnan(av[j]) ? av[j]
                                             : av[j] > 0       ? 1.0
                                             : av[j] < 0       ? -1.0
                                                               : 0.0);
    EXPECT_TRUE(same(res[2].get(j), want))
        << "a=" << show(av[j]) << " b=" << show(bv[j]) << " got " << show(res[2].get(j))
        << " want " << show(want);
  }
}

TEST(CpuNanRule, MaxMinReluSignAtEveryVectorWidth) {
  for (DType t : kFloats)
    for (int width : kVectorWidths)
      for (Alu op : {Alu::Max, Alu::Min, Alu::Relu, Alu::Sign}) check_binary(op, t, width);
}

// Rows of `cols` values: the fill value everywhere except `special` at column `at`.
struct RowCase {
  double fill;
  double special;
  int64_t at;
};

double fold_rule(ReduceOp op, const std::vector<double>& row) {
  if (op == ReduceOp::ArgMax || op == ReduceOp::ArgMin) {
    size_t best = 0;
    for (size_t j = 0; j < row.size(); ++j) {
      if (std::isnan(row[j])) return static_cast<double>(j);  // the first NaN
      if (op == ReduceOp::ArgMax ? row[j] > row[best] : row[j] < row[best]) best = j;
    }
    return static_cast<double>(best);
  }
  double acc = op == ReduceOp::Max ? -kInf : kInf;
  for (double v : row) acc = op == ReduceOp::Max ? ir::ieee_maximum(acc, v) : ir::ieee_minimum(acc, v);
  return acc;
}

void check_reduce(ReduceOp op, DType t, int width, int64_t cols) {
  SCOPED_TRACE(fmt::format("reduce.{} on {}, vector_width {}, {} columns", kir::reduce_op_name(op),
                           ir::dtype_name(t), width, cols));
  std::vector<RowCase> cases;
  for (int64_t at : {int64_t{0}, cols / 2, cols - 1}) {
    cases.push_back({1.0, kNaN, at});
    cases.push_back({-kInf, kNaN, at});
    cases.push_back({-0.0, 0.0, at});   // max +0, min -0
    cases.push_back({0.0, -0.0, at});
    cases.push_back({-1.0, kInf, at});
    cases.push_back({1.0, -kInf, at});
  }
  cases.push_back({-0.0, -0.0, 0});  // all -0: max stays -0
  cases.push_back({kInf, kInf, 0});  // all +inf: min is +inf, argmin the first
  const int64_t rows = static_cast<int64_t>(cases.size());
  std::vector<double> x;
  for (const RowCase& c : cases)
    for (int64_t j = 0; j < cols; ++j) x.push_back(j == c.at ? c.special : c.fill);

  auto a = std::make_shared<kir::ExprArena>();
  const bool arg = op == ReduceOp::ArgMax || op == ReduceOp::ArgMin;
  const DType out = arg ? DType::i32 : t;
  const Expr* index = a->alu(Alu::Add, DType::i64,
                             {a->alu(Alu::Mul, DType::i64, {a->var(0), a->index(cols)}), a->var(1)});
  const Expr* r = a->reduce(op, out, a->load(0, t, index), {1}, {cols});
  kir::Kernel k = make_kernel("rule_reduce", {in_param(t, {rows, cols}), out_param(out, {rows})},
                              {rows}, a, {{1, a->var(0), r}});
  TuneParams params;
  params.vector_width = width;
  std::vector<Buffer> res = run_kernel(k, {Buffer(t, x)}, params);
  ASSERT_EQ(res.size(), 2u);
  for (int64_t row = 0; row < rows; ++row) {
    const std::vector<double> values(x.begin() + row * cols, x.begin() + (row + 1) * cols);
    const double want = fold_rule(op, values);
    const double got = res[1].get(static_cast<size_t>(row));
    EXPECT_TRUE(same(got, want)) << "row " << row << ": fill " << show(cases[row].fill) << ", "
                                 << show(cases[row].special) << " at " << cases[row].at << ": got "
                                 << show(got) << " want " << show(want);
  }
}

TEST(CpuNanRule, ReductionsAndArgReductionsAtEveryVectorWidth) {
  for (DType t : kFloats)
    for (int width : kVectorWidths)
      for (ReduceOp op : {ReduceOp::Max, ReduceOp::Min, ReduceOp::ArgMax, ReduceOp::ArgMin})
        for (int64_t cols : {int64_t{37}, int64_t{64}}) check_reduce(op, t, width, cols);
}

}  // namespace
}  // namespace kiln::codegen::testing
