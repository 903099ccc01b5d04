// Every kernel IR ALU op in every dtype it allows, compiled by the cpu backend and compared with
// a scalar C++ expectation computed here; casts between every pair of dtypes.
#include <gtest/gtest.h>

#include <fmt/format.h>
#include <cmath>
#include <limits>

#include "tests/codegen/cpu_test_support.h"

namespace kiln::codegen::testing {
namespace {

using kir::Alu;
constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

std::vector<double> raw_samples(DType t) {
  switch (t) {
    case DType::boolean:
      return {0, 1};
    case DType::u8:
      return {0, 1, 2, 3, 7, 100, 128, 200, 255};
    case DType::i8:
      return {0, 1, -1, 2, -3, 7, -7, 100, 127, -128};
    case DType::i32:
      return {0, 1, -1, 3, -3, 7, -13, 1000, 2147483647, -2147483648.0};
    case DType::i64:
      return {0, 1, -1, 3, -3, 7, -13, 1e15, 4611686018427387904.0, -9223372036854775808.0};
    case DType::f32:
    case DType::f64:
    case DType::f16:
    case DType::bf16:
      break;
  }
  return {0, -0.0, 1, -1, 0.5, -0.75, 2.5, -3.25, 0.1, 7, -20, 100, -100, kInf, -kInf, kNaN};
}

// The samples as a `t` buffer holds them (0.1 in bf16 is 0.10009765625).
std::vector<double> samples(DType t) {
  std::vector<double> s = raw_samples(t);
  for (double& v : s) v = to_dtype(t, v);
  return s;
}

// The ops with looser float tolerances: the transcendental functions (cost 20 or more in
// kiln/ops.def) and rsqrt.
bool transcendental(Alu op) {
  return kir::alu_cost(op) >= 20 || op == Alu::Rsqrt;
}

// Integer semantics: 64-bit wrap-around arithmetic, then wrapped to the dtype by to_dtype.
int64_t wrap_add(int64_t a, int64_t b) {
  return static_cast<int64_t>(static_cast<uint64_t>(a) + static_cast<uint64_t>(b));
}
int64_t wrap_mul(int64_t a, int64_t b) {
  return static_cast<int64_t>(static_cast<uint64_t>(a) * static_cast<uint64_t>(b));
}
int64_t floor_div(int64_t a, int64_t b) {
  if (b == 0) return 0;
  if (b == -1) return wrap_mul(a, -1);
  int64_t q = a / b;
  if (a % b != 0 && ((a < 0) != (b < 0))) --q;
  return q;
}

int64_t expect_int(Alu op, double da, double db) {
  const int64_t a = static_cast<int64_t>(da), b = static_cast<int64_t>(db);
  switch (op) {
    case Alu::Neg:
      return wrap_mul(a, -1);
    case Alu::Abs:
      return a < 0 ? wrap_mul(a, -1) : a;
    case Alu::Sign:
      return (a > 0) - (a < 0);
    case Alu::Relu:
      return a > 0 ? a : 0;
    case Alu::Add:
      return wrap_add(a, b);
    case Alu::Sub:
      return wrap_add(a, wrap_mul(b, -1));
    case Alu::Mul:
      return wrap_mul(a, b);
    case Alu::Div:
      return floor_div(a, b);
    case Alu::Max:
      return std::max(a, b);
    case Alu::Min:
      return std::min(a, b);
    case Alu::Exp:  // float only
    case Alu::Log:
    case Alu::Sqrt:
    case Alu::Rsqrt:
    case Alu::Recip:
    case Alu::Sin:
    case Alu::Cos:
    case Alu::Tanh:
    case Alu::Sigmoid:
    case Alu::Gelu:
    case Alu::Erf:
    case Alu::Floor:
    case Alu::Ceil:
    case Alu::Pow:
    case Alu::Not:  // bool only: BoolLogic
    case Alu::And:
    case Alu::Or:
    case Alu::Eq:  // check_op compares itself
    case Alu::Ne:
    case Alu::Lt:
    case Alu::Le:
    case Alu::Gt:
    case Alu::Ge:
    case Alu::Cast:  // tests of their own
    case Alu::Where:
    case Alu::Clip:
    case Alu::IDiv:
    case Alu::Mod:
      break;
  }
  ADD_FAILURE() << "no integer expectation for " << kir::alu_name(op);
  return 0;
}

// 0.5*x*(1 + tanh(u)) == x / (1 + exp(-2u)); the second form in long double has no cancellation.
double gelu(double x) {
  if (x == -kInf) return 0;
  const long double lx = x;
  const long double u =
      std::sqrt(2 / static_cast<long double>(M_PI)) * (lx + 0.044715L * lx * lx * lx);
  return static_cast<double>(lx / (1 + std::exp(-2 * u)));
}

// Relative error below the smallest normal number is measured against it (subnormals carry
// fewer significant bits).
double smallest_normal(DType t) {
  switch (t) {
    case DType::f64:
      return std::numeric_limits<double>::min();
    case DType::f16:
      return 6.103515625e-05;
    case DType::f32:
    case DType::bf16:  // the exponent range of f32
      return std::numeric_limits<float>::min();
    case DType::i32:  // exact (comparisons): any floor serves
    case DType::i64:
    case DType::i8:
    case DType::u8:
    case DType::boolean:
      break;
  }
  return std::numeric_limits<float>::min();
}

double expect_float(Alu op, double a, double b) {
  switch (op) {
    case Alu::Neg:
      return -a;
    case Alu::Abs:
      return std::abs(a);
    case Alu::Exp:
      return std::exp(a);
    case Alu::Log:
      return std::log(a);
    case Alu::Sqrt:
      return std::sqrt(a);
    case Alu::Rsqrt:
      return 1 / std::sqrt(a);
    case Alu::Recip:
      return 1 / a;
    case Alu::Sin:
      return std::sin(a);
    case Alu::Cos:
      return std::cos(a);
    case Alu::Tanh:
      return std::tanh(a);
    case Alu::Sigmoid:
      return 1 / (1 + std::exp(-a));
    case Alu::Gelu:
      return gelu(a);
    case Alu::Erf:
      return std::erf(a);
    case Alu::Floor:
      return std::floor(a);
    case Alu::Ceil:
      return std::ceil(a);
    case Alu::Sign:
      return std::isnan(a) ? a : a > 0 ? 1 : a < 0 ? -1 : 0.0;
    case Alu::Relu:
      return std::isnan(a) ? a : std::max(a, 0.0);
    case Alu::Add:
      return a + b;
    case Alu::Sub:
      return a - b;
    case Alu::Mul:
      return a * b;
    case Alu::Div:
      return a / b;
    case Alu::Pow:
      return std::pow(a, b);
    case Alu::Max:
      return std::isnan(a) || std::isnan(b) ? kNaN : std::max(a, b);
    case Alu::Min:
      return std::isnan(a) || std::isnan(b) ? kNaN : std::min(a, b);
    case Alu::Not:  // bool only: BoolLogic
    case Alu::And:
    case Alu::Or:
    case Alu::Eq:  // check_op compares itself
    case Alu::Ne:
    case Alu::Lt:
    case Alu::Le:
    case Alu::Gt:
    case Alu::Ge:
    case Alu::Cast:  // tests of their own
    case Alu::Where:
    case Alu::Clip:
    case Alu::IDiv:
    case Alu::Mod:
      break;
  }
  ADD_FAILURE() << "no float expectation for " << kir::alu_name(op);
  return 0;
}

double tolerance(DType t, Alu op) {
  // gelu(-20) in f64: exp(600) amplifies.
  return ir::compare_tolerance(t, transcendental(op) ? 2e-6 : 2.4e-7,
                               transcendental(op) ? 1e-13 : 2.3e-16);
}

// out[i] = op(a[i], b[i]) over every pair of samples (b ignored for unary ops).
void check_op(Alu op, DType t) {
  SCOPED_TRACE(fmt::format("{} on {}", kir::alu_name(op), ir::dtype_name(t)));
  const std::vector<double> s = samples(t);
  const int arity = kir::alu_arity(op);
  std::vector<double> av, bv;
  for (double x : s)
    for (double y : s) {
      av.push_back(x);
      bv.push_back(y);
    }
  const int64_t n = static_cast<int64_t>(av.size());
  const bool cmp = kir::is_comparison(op);
  const DType out = cmp ? DType::boolean : t;
  auto arena = std::make_shared<kir::ExprArena>();
  const kir::Expr* i = arena->var(0);
  std::vector<const kir::Expr*> args{arena->load(0, t, i)};
  if (arity == 2) args.push_back(arena->load(1, t, i));
  kir::Kernel k = make_kernel("alu", {in_param(t, {n}), in_param(t, {n}), out_param(out, {n})}, {n},
                              arena, {{2, i, arena->alu(op, out, args)}});
  std::vector<Buffer> res = run_kernel(k, {Buffer(t, av), Buffer(t, bv)});
  ASSERT_EQ(res.size(), 3u);
  for (int64_t j = 0; j < n; ++j) {
    const double a = av[j], b = bv[j];
    double want;
    if (cmp) {
      static constexpr bool (*kCmp[])(double, double) = {
          [](double x, double y) { return x == y; }, [](double x, double y) { return x != y; },
          [](double x, double y) { return x < y; },  [](double x, double y) { return x <= y; },
          [](double x, double y) { return x > y; },  [](double x, double y) { return x >= y; }};
      want = kCmp[static_cast<int>(op) - static_cast<int>(Alu::Eq)](a, b);
    } else if (!ir::is_float(t)) {
      const int64_t want_int = wrap_int(t, expect_int(op, a, b));
      EXPECT_EQ(res[2].get_int(j), want_int) << "a=" << a << " b=" << b << "\n"
                                             << kir::print_kernel(k);
      continue;
    } else {
      want = expect_float(op, a, b);
    }
    want = to_dtype(out, want);
    const double got = res[2].get(j);
    const double floor = (op == Alu::Sin || op == Alu::Cos) ? 1.0 : smallest_normal(t);
    EXPECT_LE(rel_error(got, want, floor), tolerance(out, op))
        << "a=" << a << " b=" << b << " got " << got << " want " << want << "\n"
        << kir::print_kernel(k);
  }
}

// Every elementwise row of kiln/ops.def: the kernel ALU op and the graph op.
struct ElementwiseOp {
  Alu alu;
  ir::Op op;
};
constexpr ElementwiseOp kAllOps[] = {
#define KILN_ELEMENTWISE(Enum, ...) {Alu::Enum, ir::Op::Enum},
#include "kiln/ops.def"
};

// The operand dtypes kiln/ops.def gives the op (ir::op_dtypes, the builder's rule).
bool allowed(ir::Op op, DType t) {
  switch (ir::op_dtypes(op)) {
    case ir::OpDtypes::Numeric:
      return t != DType::boolean;
    case ir::OpDtypes::Float:
      return ir::is_float(t);
    case ir::OpDtypes::Bool:
      return t == DType::boolean;
    case ir::OpDtypes::Compare:
      return true;
    case ir::OpDtypes::Any:     // cast: tested on its own
    case ir::OpDtypes::Select:  // where: tested on its own
    case ir::OpDtypes::None:    // no operands: not an elementwise op
      break;
  }
  return false;
}

TEST(CpuAlu, EveryOpInEveryAllowedDtype) {
  int checked = 0;
  for (const auto& [op, graph_op] : kAllOps)
    for (DType t : ir::kAllDTypes) {
      if (!allowed(graph_op, t)) continue;
      if (op == Alu::Not || op == Alu::And || op == Alu::Or) continue;  // BoolLogic below
      if (op == Alu::Clip) continue;  // ClipInEveryNumericDtype below
      check_op(op, t);
      ++checked;
    }
  EXPECT_GT(checked, 150);
}

TEST(CpuAlu, BoolLogic) {
  auto arena = std::make_shared<kir::ExprArena>();
  const kir::Expr* i = arena->var(0);
  const kir::Expr* a = arena->load(0, DType::boolean, i);
  const kir::Expr* b = arena->load(1, DType::boolean, i);
  kir::Kernel k = make_kernel(
      "logic",
      {in_param(DType::boolean, {4}), in_param(DType::boolean, {4}), out_param(DType::boolean, {4}),
       out_param(DType::boolean, {4}), out_param(DType::boolean, {4})},
      {4}, arena,
      {{2, i, arena->alu(Alu::And, DType::boolean, {a, b})},
       {3, i, arena->alu(Alu::Or, DType::boolean, {a, b})},
       {4, i, arena->alu(Alu::Not, DType::boolean, {a})}});
  auto res =
      run_kernel(k, {Buffer(DType::boolean, {0, 0, 1, 1}), Buffer(DType::boolean, {0, 1, 0, 1})});
  ASSERT_EQ(res.size(), 5u);
  for (int j = 0; j < 4; ++j) {
    const bool x = j >= 2, y = j % 2;
    EXPECT_EQ(res[2].raw<uint8_t>(j), x && y);
    EXPECT_EQ(res[3].raw<uint8_t>(j), x || y);
    EXPECT_EQ(res[4].raw<uint8_t>(j), !x);
  }
}

TEST(CpuAlu, WhereInEveryDtype) {
  for (DType t : ir::kAllDTypes) {
    const std::vector<double> s = samples(t);
    const int64_t n = static_cast<int64_t>(s.size());
    std::vector<double> cond, other;
    for (int64_t j = 0; j < n; ++j) {
      cond.push_back(j % 3 == 0);
      other.push_back(s[(j + 1) % n]);
    }
    auto arena = std::make_shared<kir::ExprArena>();
    const kir::Expr* i = arena->var(0);
    const kir::Expr* w =
        arena->alu(Alu::Where, t,
                   {arena->load(0, DType::boolean, i), arena->load(1, t, i), arena->load(2, t, i)});
    kir::Kernel k = make_kernel(
        "where",
        {in_param(DType::boolean, {n}), in_param(t, {n}), in_param(t, {n}), out_param(t, {n})}, {n},
        arena, {{3, i, w}});
    auto res = run_kernel(k, {Buffer(DType::boolean, cond), Buffer(t, s), Buffer(t, other)});
    ASSERT_EQ(res.size(), 4u);
    for (int64_t j = 0; j < n; ++j)
      EXPECT_EQ(rel_error(res[3].get(j), to_dtype(t, cond[j] ? s[j] : other[j])), 0)
          << ir::dtype_name(t) << " element " << j;
  }
}

// clip(x, lo, hi) over every triple of samples: min(max(x, lo), hi), NaN if any operand is NaN
// (max's and min's rule), exact in every integer dtype (i64 too: compared as integers).
TEST(CpuAlu, ClipInEveryNumericDtype) {
  for (DType t : ir::kAllDTypes) {
    if (t == DType::boolean) continue;
    const std::vector<double> s = samples(t);
    std::vector<double> xs, los, his;
    for (double x : s)
      for (double lo : s)
        for (double hi : s) xs.push_back(x), los.push_back(lo), his.push_back(hi);
    const int64_t n = static_cast<int64_t>(xs.size());
    auto arena = std::make_shared<kir::ExprArena>();
    const kir::Expr* i = arena->var(0);
    const kir::Expr* c = arena->alu(
        Alu::Clip, t, {arena->load(0, t, i), arena->load(1, t, i), arena->load(2, t, i)});
    kir::Kernel k = make_kernel(
        "clip", {in_param(t, {n}), in_param(t, {n}), in_param(t, {n}), out_param(t, {n})}, {n},
        arena, {{3, i, c}});
    auto res = run_kernel(k, {Buffer(t, xs), Buffer(t, los), Buffer(t, his)});
    ASSERT_EQ(res.size(), 4u);
    const Buffer x(t, xs), lo(t, los), hi(t, his);
    for (int64_t j = 0; j < n; ++j) {
      if (ir::is_float(t)) {
        const double a = x.get(j), l = lo.get(j), h = hi.get(j);
        const double want = std::isnan(a) || std::isnan(l) || std::isnan(h)
                                ? kNaN
                                : std::min(std::max(a, l), h);
        EXPECT_EQ(rel_error(res[3].get(j), want), 0)
            << ir::dtype_name(t) << ": clip(" << a << ", " << l << ", " << h << ") gave "
            << res[3].get(j);
      } else {
        const int64_t want = std::min(std::max(x.get_int(j), lo.get_int(j)), hi.get_int(j));
        EXPECT_EQ(res[3].get_int(j), want)
            << ir::dtype_name(t) << ": clip(" << x.get_int(j) << ", " << lo.get_int(j) << ", "
            << hi.get_int(j) << ")";
      }
    }
  }
}

double expect_cast(DType from, DType to, double v) {
  if (to == DType::boolean) return v != 0;
  if (ir::is_float(from) && !ir::is_float(to)) return to_dtype(to, std::trunc(v));
  return to_dtype(to, v);
}

bool in_range(DType to, double v) {
  if (std::isnan(v) || std::isinf(v)) return false;
  switch (to) {
    case DType::i8:
      return v > -129 && v < 128;
    case DType::u8:
      return v > -1 && v < 256;
    case DType::i32:
      return v > -2147483649.0 && v < 2147483648.0;
    case DType::i64:
      return v >= -9223372036854775808.0 && v < 9223372036854775808.0;
    case DType::f32:  // every finite value converts
    case DType::f64:
    case DType::f16:
    case DType::bf16:
    case DType::boolean:
      break;
  }
  return true;
}

TEST(CpuAlu, CastBetweenEveryPairOfDtypes) {
  for (DType from : ir::kAllDTypes)
    for (DType to : ir::kAllDTypes) {
      std::vector<double> s;
      for (double v : samples(from))  // float -> int is specified only inside the target's range
        if (!ir::is_float(from) || is_float(to) || to == DType::boolean || in_range(to, v))
          s.push_back(v);
      for (double extra : {1.5, -2.75, 254.9, 65504.0, 1e-8})
        if (ir::is_float(from) && (is_float(to) || in_range(to, extra)))
          s.push_back(to_dtype(from, extra));
      const int64_t n = static_cast<int64_t>(s.size());
      auto arena = std::make_shared<kir::ExprArena>();
      const kir::Expr* i = arena->var(0);
      kir::Kernel k = make_kernel("cast", {in_param(from, {n}), out_param(to, {n})}, {n}, arena,
                                  {{1, i, arena->alu(Alu::Cast, to, {arena->load(0, from, i)})}});
      auto res = run_kernel(k, {Buffer(from, s)});
      ASSERT_EQ(res.size(), 2u);
      for (int64_t j = 0; j < n; ++j)
        EXPECT_EQ(rel_error(res[1].get(j), expect_cast(from, to, s[j])), 0)
            << ir::dtype_name(from) << " -> " << ir::dtype_name(to) << ": " << s[j] << " gave "
            << res[1].get(j);
    }
}

TEST(CpuAlu, FloatToIntOutOfRangeSaturates) {
  const std::vector<double> v{1e10, -1e10, kNaN, kInf, -kInf};
  auto arena = std::make_shared<kir::ExprArena>();
  const kir::Expr* i = arena->var(0);
  kir::Kernel k = make_kernel(
      "sat", {in_param(DType::f32, {5}), out_param(DType::i32, {5}), out_param(DType::i64, {5})},
      {5}, arena,
      {{1, i, arena->alu(Alu::Cast, DType::i32, {arena->load(0, DType::f32, i)})},
       {2, i, arena->alu(Alu::Cast, DType::i64, {arena->load(0, DType::f32, i)})}});
  auto res = run_kernel(k, {Buffer(DType::f32, v)});
  ASSERT_EQ(res.size(), 3u);
  const int32_t i32max = std::numeric_limits<int32_t>::max(),
                i32min = std::numeric_limits<int32_t>::min();
  EXPECT_EQ(res[1].raw<int32_t>(0), i32max);
  EXPECT_EQ(res[1].raw<int32_t>(1), i32min);
  EXPECT_EQ(res[1].raw<int32_t>(2), 0);
  EXPECT_EQ(res[1].raw<int32_t>(3), i32max);
  EXPECT_EQ(res[1].raw<int32_t>(4), i32min);
  EXPECT_EQ(res[2].raw<int64_t>(0), 10000000000LL);
  EXPECT_EQ(res[2].raw<int64_t>(2), 0);
}

// The narrow types saturate to i32 and wrap (docs/graph-format.md; the reference computes the
// same, ReferenceElementwise.FloatToIntCastSaturatesAsTheTargets).
TEST(CpuAlu, FloatToNarrowIntSaturatesToI32ThenWraps) {
  const std::vector<double> v{kNaN, kInf, -kInf, 1e10, 300, -2.7};
  auto arena = std::make_shared<kir::ExprArena>();
  const kir::Expr* i = arena->var(0);
  kir::Kernel k = make_kernel(
      "narrow", {in_param(DType::f32, {6}), out_param(DType::i8, {6}), out_param(DType::u8, {6})},
      {6}, arena,
      {{1, i, arena->alu(Alu::Cast, DType::i8, {arena->load(0, DType::f32, i)})},
       {2, i, arena->alu(Alu::Cast, DType::u8, {arena->load(0, DType::f32, i)})}});
  auto res = run_kernel(k, {Buffer(DType::f32, v)});
  ASSERT_EQ(res.size(), 3u);
  const std::vector<double> i8_want{0, -1, 0, -1, 44, -2}, u8_want{0, 255, 0, 255, 44, 254};
  for (size_t j = 0; j < v.size(); ++j) {
    EXPECT_EQ(res[1].get(j), i8_want[j]) << v[j];
    EXPECT_EQ(res[2].get(j), u8_want[j]) << v[j];
  }
}

TEST(CpuAlu, IntegerFloorDivisionAndDivisionByZero) {
  for (DType t : {DType::i8, DType::i32, DType::i64}) {
    const std::vector<double> a{7, -7, 7, -7, 6, -6, 0, 5, -5, -128, 1};
    const std::vector<double> b{2, 2, -2, -2, 3, 3, 4, 0, 0, -1, -1};
    const std::vector<double> want{3, -4, -4, 3, 2, -2, 0, 0, 0, to_dtype(t, 128), -1};
    const int64_t n = static_cast<int64_t>(a.size());
    auto arena = std::make_shared<kir::ExprArena>();
    const kir::Expr* i = arena->var(0);
    kir::Kernel k = make_kernel(
        "floordiv", {in_param(t, {n}), in_param(t, {n}), out_param(t, {n})}, {n}, arena,
        {{2, i, arena->alu(Alu::Div, t, {arena->load(0, t, i), arena->load(1, t, i)})}});
    auto res = run_kernel(k, {Buffer(t, a), Buffer(t, b)});
    ASSERT_EQ(res.size(), 3u);
    for (int64_t j = 0; j < n; ++j)
      EXPECT_EQ(res[2].get(j), want[j]) << ir::dtype_name(t) << ": " << a[j] << " // " << b[j];
  }
}

// x / sqrt(y) is the correctly rounded quotient of the correctly rounded root, whatever the
// vector width: no rsqrt estimate and Newton step (12 bits on AVX2, 14 on AVX-512, so they
// differed; and NaN at y = 0, where the quotient is infinite).
TEST(CpuAlu, QuotientByASquareRootIsCorrectlyRounded) {
  const int64_t n = 1003;  // vector body and tail
  std::vector<double> a, y;
  for (int64_t j = 0; j < n; ++j) {
    a.push_back(j % 3 == 0 ? -1.0 - j * 0.37 : 0.5 + j * 1.7);
    y.push_back(j % 10 == 0 ? 0.0 : std::ldexp(1.0 + j * 0.0123, static_cast<int>(j % 40) - 20));
  }
  auto arena = std::make_shared<kir::ExprArena>();
  const kir::Expr* i = arena->var(0);
  const kir::Expr* root = arena->alu(Alu::Sqrt, DType::f32, {arena->load(1, DType::f32, i)});
  kir::Kernel k = make_kernel(
      "div_sqrt",
      {in_param(DType::f32, {n}), in_param(DType::f32, {n}), out_param(DType::f32, {n})}, {n},
      arena, {{2, i, arena->alu(Alu::Div, DType::f32, {arena->load(0, DType::f32, i), root})}});
  auto res = run_kernel(k, {Buffer(DType::f32, a), Buffer(DType::f32, y)});
  ASSERT_EQ(res.size(), 3u);
  for (int64_t j = 0; j < n; ++j) {
    const float want = static_cast<float>(a[j]) / std::sqrt(static_cast<float>(y[j]));
    EXPECT_EQ(res[2].get(j), want) << a[j] << " / sqrt(" << y[j] << ")";
  }
}

// A quotient by a divisor that is the same at every point (softmax's sum along a row) is the
// correctly rounded quotient, as one by a divisor that changes: with arcp LLVM made it a multiply
// by the divisor's reciprocal hoisted out of the loop, 1 ulp off for some elements, while a
// kernel that read the divisor per point divided (RandomGraphFuzz.
// AValueIsTheSameWhicheverPlanComputesIt, seed 461).
TEST(CpuAlu, QuotientByAnInvariantDivisorIsCorrectlyRounded) {
  const int64_t n = 1003;  // vector body and tail
  std::vector<double> a;
  for (int64_t j = 0; j < n; ++j) a.push_back(static_cast<float>(std::sin(j * 0.731) * 7.0));
  for (double divisor : {3.0, 0.3, 7.77, -1.1}) {
    auto arena = std::make_shared<kir::ExprArena>();
    const kir::Expr* i = arena->var(0);
    const kir::Expr* y = arena->load(1, DType::f32, arena->index(0));
    kir::Kernel k = make_kernel(
        "div_invariant",
        {in_param(DType::f32, {n}), in_param(DType::f32, {1}), out_param(DType::f32, {n})}, {n},
        arena, {{2, i, arena->alu(Alu::Div, DType::f32, {arena->load(0, DType::f32, i), y})}});
    auto res =
        run_kernel(k, {Buffer(DType::f32, a), Buffer(DType::f32, std::vector<double>{divisor})});
    ASSERT_EQ(res.size(), 3u);
    int wrong = 0;
    for (int64_t j = 0; j < n; ++j)
      wrong += res[2].get(j) != static_cast<float>(a[j]) / static_cast<float>(divisor) ? 1 : 0;
    EXPECT_EQ(wrong, 0) << "of " << n << " quotients by " << divisor;
  }
}

TEST(CpuAlu, IndexDivAndModOnNonNegativeOperands) {
  const int64_t n = 300;
  std::vector<double> a, b;
  for (int64_t j = 0; j < n; ++j) {
    a.push_back(j * 37 % 1001);
    b.push_back(1 + j % 13);
  }
  auto arena = std::make_shared<kir::ExprArena>();
  const kir::Expr* i = arena->var(0);
  const kir::Expr* x = arena->load(0, DType::i64, i);
  const kir::Expr* y = arena->load(1, DType::i64, i);
  kir::Kernel k = make_kernel("idiv",
                              {in_param(DType::i64, {n}), in_param(DType::i64, {n}),
                               out_param(DType::i64, {n}), out_param(DType::i64, {n})},
                              {n}, arena,
                              {{2, i, arena->alu(Alu::IDiv, DType::i64, {x, y})},
                               {3, i, arena->alu(Alu::Mod, DType::i64, {x, y})}});
  auto res = run_kernel(k, {Buffer(DType::i64, a), Buffer(DType::i64, b)});
  ASSERT_EQ(res.size(), 4u);
  for (int64_t j = 0; j < n; ++j) {
    EXPECT_EQ(res[2].raw<int64_t>(j), static_cast<int64_t>(a[j]) / static_cast<int64_t>(b[j]));
    EXPECT_EQ(res[3].raw<int64_t>(j), static_cast<int64_t>(a[j]) % static_cast<int64_t>(b[j]));
  }
}

}  // namespace
}  // namespace kiln::codegen::testing
