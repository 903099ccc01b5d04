// The NaN and signed-zero rule on vulkan:0 against the cpu backend, bit for bit, for every float
// dtype: max/min (IEEE 754-2019 maximum/minimum: NaN wins, -0 < +0) and relu elementwise, on
// every pair of NaN, +-0, +-inf and finite operands; comparisons (IEEE); and the max/min/argmax/
// argmin reductions (first NaN's index, else the first extreme) with specials first, in the
// middle, last, alone, tied and everywhere, in every strategy: loops in the thread, a workgroup
// per row with its shared-memory tree, rows split over workgroups, whole-input reductions and
// four lanes per thread. The same kernels compile through NVRTC and ptxas. Lines long enough to
// outrun lavapipe's loop budget with a thread per line are refused there, never wrong.
#include <gtest/gtest.h>

#include "runtime/gpu_tuner.h"
#include "tests/codegen/gpu_test_kernels.h"
#include "tests/codegen/gpu_test_util.h"
#include "tests/codegen/gpu_vulkan_runner.h"

namespace kiln::codegen::gpu {
namespace {

constexpr double kSpecials[] = {NAN, 0.0, -0.0, INFINITY, -INFINITY, 1.5, -1.5, 2.0};
constexpr int64_t kS = std::size(kSpecials);
constexpr int64_t kPairs = kS * kS;

// out = max(x, y), min(x, y), relu(x), max(min(y, x), x), sign(x) and the six comparisons, one
// point per operand pair.
std::vector<kir::Kernel> binary_kernels(DType t) {
  auto arena = std::make_shared<kir::ExprArena>();
  kir::ExprArena& a = *arena;
  const kir::Expr* i = a.var(0);
  const kir::Expr* x = a.load(0, t, i);
  const kir::Expr* y = a.load(1, t, i);
  auto kernel = [&](const std::string& name,
                    const std::vector<std::pair<DType, const kir::Expr*>>& outs) {
    kir::Kernel k;
    k.name = fmt::format("nan_{}_{}", name, ir::dtype_name(t));
    k.arena = arena;
    k.domain = {kPairs};
    k.params = {{t, {kPairs}, false, "x"}, {t, {kPairs}, false, "y"}};
    for (const auto& [dt, v] : outs) {
      k.params.push_back({dt, {kPairs}, true, "o"});
      k.stores.push_back({static_cast<int32_t>(k.params.size() - 1), i, v});
    }
    return k;
  };
  const DType b = DType::boolean;
  return {kernel("maxmin", {{t, a.alu(Alu::Max, t, {x, y})},
                            {t, a.alu(Alu::Min, t, {x, y})},
                            {t, a.alu(Alu::Relu, t, {x})},
                            {t, a.alu(Alu::Max, t, {a.alu(Alu::Min, t, {y, x}), x})},
                            {t, a.alu(Alu::Sign, t, {x})}}),
          kernel("compare", {{b, a.alu(Alu::Eq, b, {x, y})},
                             {b, a.alu(Alu::Ne, b, {x, y})},
                             {b, a.alu(Alu::Lt, b, {x, y})},
                             {b, a.alu(Alu::Le, b, {x, y})},
                             {b, a.alu(Alu::Gt, b, {x, y})},
                             {b, a.alu(Alu::Ge, b, {x, y})}})};
}

// Every ordered pair of specials: x = kSpecials[i % kS], y = kSpecials[i / kS].
std::vector<ir::HostTensor> pair_inputs(DType t) {
  ir::HostTensor x = ir::HostTensor::zeros(t, {kPairs}), y = x;
  for (int64_t i = 0; i < kPairs; ++i) {
    x.set(i, kSpecials[i % kS]);
    y.set(i, kSpecials[i / kS]);
  }
  return {x, y};
}

// Line `c` of length n for case c: a special at the first, middle or last place of +-1 / +-2
// values, then lines of one value everywhere, two NaNs, NaN and an infinity, and zeros of both
// signs as the maximum and the minimum in both orders.
std::vector<double> special_line(int64_t c, int64_t n) {
  std::vector<double> v(n);
  for (int64_t i = 0; i < n; ++i) v[i] = (i % 3 == 0 ? 2.0 : 1.0) * (i % 2 ? -1 : 1);
  const int64_t places[] = {0, n / 2, n - 1};
  if (c < kS * 3) {
    v[places[c / kS]] = kSpecials[c % kS];
    return v;
  }
  switch (c - kS * 3) {
    case 0:
      std::ranges::fill(v, NAN);
      break;
    case 1:
      std::ranges::fill(v, -INFINITY);
      break;
    case 2:
      std::ranges::fill(v, INFINITY);
      break;
    case 3:
      std::ranges::fill(v, -0.0);
      break;
    case 4:
      v[1] = NAN;
      v[n - 1] = NAN;
      break;
    case 5:
      v[0] = INFINITY;
      v[n - 1] = NAN;
      break;
    case 6:
      std::ranges::fill(v, -1.0);
      v[1] = -0.0;
      v[n - 1] = 0.0;
      break;  // max: a zero tie
    case 7:
      std::ranges::fill(v, -1.0);
      v[1] = 0.0;
      v[n - 1] = -0.0;
      break;
    case 8:
      std::ranges::fill(v, 1.0);
      v[1] = -0.0;
      v[n - 1] = 0.0;
      break;  // min: a zero tie
    case 9:
      std::ranges::fill(v, 1.0);
      v[1] = 0.0;
      v[n - 1] = -0.0;
      break;
    default:
      std::ranges::fill(v, 0.0);
      v[n / 2] = -0.0;
      break;
  }
  return v;
}
constexpr int64_t kLines = kS * 3 + 11;

// `lines` special lines of length n, laid out as rows (x[line * n + i]) or columns (x[i * lines +
// line]).
ir::HostTensor line_input(DType t, int64_t lines, int64_t n, bool columns, int64_t first_case = 0) {
  ir::HostTensor h = ir::HostTensor::zeros(t, {lines * n});
  for (int64_t l = 0; l < lines; ++l) {
    const std::vector<double> v = special_line((first_case + l) % kLines, n);
    for (int64_t i = 0; i < n; ++i) h.set(columns ? i * lines + l : l * n + i, v[i]);
  }
  return h;
}

// out[l] = R over the l-th of `lines` lines of length n for max min argmax argmin (sums and
// products would depend on the order of NaN, zero and overflow). Lines are rows (x[l * n + i];
// lines = 0: the whole input, a scalar per output) or columns (x[i * lines + l]: with f32 the
// loads of four lanes move as vectors).
kir::Kernel extremes_kernel(DType t, int64_t lines, int64_t n, bool columns) {
  kir::Kernel k;
  k.name =
      fmt::format("nan_{}_{}x{}_{}", columns ? "columns" : "rows", lines, n, ir::dtype_name(t));
  k.arena = std::make_shared<kir::ExprArena>();
  kir::ExprArena& a = *k.arena;
  const int64_t l = std::max<int64_t>(lines, 1);
  if (lines > 0) k.domain = {lines};
  k.params = {{t, {l * n}, false, "x"}};
  const kir::Expr* line = lines > 0 ? a.var(0) : a.index(0);
  const kir::Expr* i = a.var(1);
  const DType L = DType::i64;
  const kir::Expr* at = columns ? a.alu(Alu::Add, L, {a.alu(Alu::Mul, L, {i, a.index(l)}), line})
                                : a.alu(Alu::Add, L, {a.alu(Alu::Mul, L, {line, a.index(n)}), i});
  const kir::Expr* x = a.load(0, t, at);
  for (ReduceOp op : {ReduceOp::Max, ReduceOp::Min, ReduceOp::ArgMax, ReduceOp::ArgMin}) {
    const DType rt = is_arg(op) ? DType::i32 : t;
    k.params.push_back({rt, {l}, true, "o"});
    k.stores.push_back(
        {static_cast<int32_t>(k.params.size() - 1), line, a.reduce(op, rt, x, {1}, {n})});
  }
  return k;
}

constexpr DType kFloats[] = {DType::f32, DType::f64, DType::f16, DType::bf16};

class GpuNanRulesTest : public testing::TestWithParam<DType> {
 protected:
  void SetUp() override {
    if (!runner().gpu) GTEST_SKIP() << "vulkan:0 is not available";
    ASSERT_TRUE(runner().cpu);
  }
};

// The rule itself, so that a disagreement shared by both backends fails too.
double rule_max(double a, double b) {
  if (std::isnan(a) || std::isnan(b)) return NAN;
  if (a == b) return std::signbit(a) && std::signbit(b) ? a : std::fabs(a);
  return a > b ? a : b;
}
double rule_min(double a, double b) {
  return -rule_max(-a, -b);
}

bool same_bits(double a, double b) {
  return std::isnan(a) ? std::isnan(b) : a == b && std::signbit(a) == std::signbit(b);
}

TEST_P(GpuNanRulesTest, MaxMinReluAndComparisonsOnEveryPair) {
  const std::vector<ir::HostTensor> in = pair_inputs(GetParam());
  for (const kir::Kernel& k : binary_kernels(GetParam())) {
    std::vector<ir::HostTensor> out;
    run_both_on(k, in, CheckMode::none, {}, /*bits=*/true, &out);
    if (GetParam() == DType::f32)
      run_both_on(k, in, CheckMode::none, {.vector_loads = kLanes}, true);
    if (!k.name.starts_with("nan_maxmin")) continue;
    ASSERT_EQ(out.size(), 7u);
    for (int64_t i = 0; i < kPairs; ++i) {
      const double x = in[0].get(i), y = in[1].get(i);
      EXPECT_TRUE(same_bits(out[2].get(i), rule_max(x, y)))
          << "max(" << x << ", " << y << ") = " << out[2].get(i);
      EXPECT_TRUE(same_bits(out[3].get(i), rule_min(x, y)))
          << "min(" << x << ", " << y << ") = " << out[3].get(i);
      EXPECT_TRUE(same_bits(out[4].get(i), rule_max(x, 0.0)))
          << "relu(" << x << ") = " << out[4].get(i);
      // sign: NaN stays NaN, both zeros give +0 (numpy.sign).
      const double sign = std::isnan(x) ? x : x > 0 ? 1.0 : x < 0 ? -1.0 : 0.0;
      EXPECT_TRUE(same_bits(out[6].get(i), sign)) << "sign(" << x << ") = " << out[6].get(i);
    }
  }
}

// Each row's max min argmax argmin by the rule: the first NaN, else the first extreme by > / <.
void expect_rule(const ir::HostTensor& x, int64_t n, const std::vector<ir::HostTensor>& out) {
  for (int64_t r = 0; r < x.numel() / n; ++r) {
    double mx = -INFINITY, mn = INFINITY;
    int64_t amax = 0, amin = 0, first_nan = -1;
    for (int64_t i = 0; i < n; ++i) {
      const double v = x.get(r * n + i);
      if (std::isnan(v) && first_nan < 0) first_nan = i;
      if (v > x.get(r * n + amax)) amax = i;
      if (v < x.get(r * n + amin)) amin = i;
      mx = rule_max(mx, v);
      mn = rule_min(mn, v);
    }
    if (first_nan >= 0) amax = amin = first_nan;
    EXPECT_TRUE(same_bits(out[1].get(r), mx)) << "row " << r << " max " << out[1].get(r);
    EXPECT_TRUE(same_bits(out[2].get(r), mn)) << "row " << r << " min " << out[2].get(r);
    EXPECT_EQ(out[3].get(r), amax) << "row " << r << " argmax";
    EXPECT_EQ(out[4].get(r), amin) << "row " << r << " argmin";
  }
}

TEST_P(GpuNanRulesTest, ReductionsInEveryStrategy) {
  const DType t = GetParam();
  // a workgroup per row (tree), split rows, and loops in the thread
  const kir::Kernel rows = extremes_kernel(t, kLines, 100, false);
  const ir::HostTensor x = line_input(t, kLines, 100, false);
  for (const TuneParams& p :
       {TuneParams{}, TuneParams{.splits = 4}, TuneParams{.reduce = GpuReduce::thread}}) {
    std::vector<ir::HostTensor> out;
    run_both_on(rows, {x}, CheckMode::none, p, true, &out);
    if (out.size() == 5) expect_rule(x, 100, out);
  }
  run_both_on(extremes_kernel(t, kLines, 7, false), {line_input(t, kLines, 7, false)},
              CheckMode::none, {}, true);
  // the whole input, each case once, in one workgroup and split over several
  const kir::Kernel whole = extremes_kernel(t, 0, 3000, false);
  for (int64_t c = 0; c < kLines; c += 3)
    for (const TuneParams& p : {TuneParams{}, TuneParams{.splits = 8}})
      run_both_on(whole, {line_input(t, 1, 3000, false, c)}, CheckMode::none, p, true);
  // columns: a workgroup per column, per-thread loops, and four lanes with vector loads where the
  // dtype has them
  const kir::Kernel cols = extremes_kernel(t, 4 * kLines, 50, true);
  for (const TuneParams& p : {TuneParams{}, TuneParams{.reduce = GpuReduce::thread}})
    run_both_on(cols, {line_input(t, 4 * kLines, 50, true)}, CheckMode::none, p, true);
  if (t == DType::f32)
    run_both_on(cols, {line_input(t, 4 * kLines, 50, true)}, CheckMode::none,
                {.reduce = GpuReduce::thread, .vector_loads = kLanes}, true);
}

INSTANTIATE_TEST_SUITE_P(Floats, GpuNanRulesTest, testing::ValuesIn(kFloats),
                         [](const auto& info) { return std::string(ir::dtype_name(info.param)); });

// Lavapipe gives each invocation one budget of 65535 loop iterations, all its loops together, and
// past it ends them early without an error. With a thread per line, the four loops over a line
// of 16384 (max min argmax argmin) went past it: argmin missed the end of the line, where some
// lines hold their special value. Within the budget a thread per line is right up to its edge;
// over it the schedule is refused by name, never run, and the default schedule is right.
class GpuLoopLimitTest : public testing::Test {
 protected:
  void SetUp() override {
    if (!runner().gpu) GTEST_SKIP() << "vulkan:0 is not available";
    ASSERT_TRUE(runner().cpu);
    limit_ = runner().gpu->loop_iteration_limit();
    if (!limit_) GTEST_SKIP() << "vulkan:0 has no loop budget (not lavapipe)";
  }
  std::optional<int64_t> limit_;
};

TEST_F(GpuLoopLimitTest, AThreadPerLineIsRightWithinTheBudgetAndRefusedOverIt) {
  const TuneParams thread{.reduce = GpuReduce::thread};
  for (int64_t n : {16382, 16384, 49157}) {
    const kir::Kernel k = extremes_kernel(DType::f32, kLines, n, false);
    const ir::HostTensor x = line_input(DType::f32, kLines, n, false);
    // One trip of the loop over lines (a thread per line: one group of 64), then four loops
    // over the line: each loop's trips and one failed test.
    auto src = emit_source(k, thread, Dialect::glsl);
    ASSERT_TRUE(src.has_value()) << src.error().message;
    EXPECT_EQ(src->loop_iterations, 2 + 4 * (n + 1)) << n;
    EXPECT_EQ(over_loop_limit(k, thread), n != 16382) << n;  // 65534 <= 65535 < 65538
    std::vector<ir::HostTensor> out;
    if (over_loop_limit(k, thread)) {
      expect_loop_limit_refusal(k, thread);
      run_both_on(k, {x}, CheckMode::none, {}, true, &out);
    } else {
      run_both_on(k, {x}, CheckMode::none, thread, true, &out);
    }
    if (out.size() == 5) expect_rule(x, n, out);
  }
}

// The tuner over the same kernel at 16384: its thread-per-line candidates are disqualified for
// the budget, not the tuning; the others are checked, and the winner is right.
TEST_F(GpuLoopLimitTest, TheTunerDisqualifiesCandidatesOverTheBudget) {
  const int64_t n = 16384;
  const kir::Kernel k = extremes_kernel(DType::f32, kLines, n, false);
  Expected<autotune::TuneDecision> d =
      runtime::tune_gpu_kernel(*runner().gpu, k, autotune::Level::extensive, 0, 2);
  ASSERT_TRUE(d.has_value()) << d.error().message;
  int over = 0;
  for (const autotune::CandidateResult& c : d->candidates) {
    auto src = emit_source(k, c.params, Dialect::glsl);
    ASSERT_TRUE(src.has_value()) << c.params.str() << ": " << src.error().message;
    if (src->loop_iterations > *limit_) {
      ++over;
      EXPECT_EQ(c.status, autotune::CandidateStatus::disqualified) << c.params.str();
      EXPECT_NE(c.reason.find("loop iterations per invocation"), std::string::npos) << c.reason;
    } else {
      EXPECT_TRUE(c.output_checked) << c.params.str() << ": " << c.reason;
    }
    if (c.params.reduce == GpuReduce::thread) {
      EXPECT_GT(src->loop_iterations, *limit_) << c.params.str();
    }
  }
  EXPECT_GE(over, 1) << "no candidate over the budget: the space has no thread per line";
  auto won = emit_source(k, d->winner, Dialect::glsl);
  ASSERT_TRUE(won.has_value());
  EXPECT_LE(won->loop_iterations, *limit_) << d->winner.str();
  const ir::HostTensor x = line_input(DType::f32, kLines, n, false);
  std::vector<ir::HostTensor> out;
  run_both_on(k, {x}, CheckMode::none, d->winner, true, &out);
  if (out.size() == 5) expect_rule(x, n, out);
}

TEST(GpuNanRulesSourceTest, KernelsCompileAsCuda) {
  if (!test_nvrtc()) GTEST_SKIP() << nvrtc_unavailable();
  std::vector<std::pair<std::string, std::string>> sources;
  auto add = [&](kir::Kernel k, const TuneParams& p) {
    k.name = fmt::format("{}_{}", k.name, sources.size());
    auto src = emit_source(k, p, Dialect::cuda);
    ASSERT_TRUE(src.has_value()) << k.name << ": " << src.error().message;
    sources.emplace_back(k.name, src->text);
  };
  for (DType t : kFloats) {
    for (const kir::Kernel& k : binary_kernels(t)) add(k, {});
    for (const TuneParams& p :
         {TuneParams{}, TuneParams{.splits = 4}, TuneParams{.reduce = GpuReduce::thread}})
      add(extremes_kernel(t, kLines, 100, false), p);
    add(extremes_kernel(t, 0, 3000, false), {.splits = 8});
    add(extremes_kernel(t, 4 * kLines, 50, true), {});
  }
  add(extremes_kernel(DType::f32, 4 * kLines, 50, true),
      {.reduce = GpuReduce::thread, .vector_loads = kLanes});
  expect_cuda_batch_compiles(sources, "nan_rules");
}

}  // namespace
}  // namespace kiln::codegen::gpu
