// The cpu tuning runner on real kernels: every candidate's output is checked, the winner is a
// valid candidate, and wrong, failing or uncompilable candidates are disqualified with a reason.
#include <gtest/gtest.h>

#include <cstddef>
#include <memory>
#include <thread>

#include "autotune/runner.h"
#include "autotune/tune_space.h"
#include "tests/autotune/tune_test_kernels.h"

namespace kiln::autotune {
namespace {

codegen::CpuBackend& backend() {
  static std::unique_ptr<codegen::CpuBackend> b = [] {
    auto created = codegen::CpuBackend::create();
    KILN_CHECK(created.has_value()) << created.error().message;
    return std::move(*created);
  }();
  return *b;
}

// Two threads per run, like a small ThreadPool; counts the runs.
struct TwoThreads {
  int runs = 0;
  ParallelFor fn() {
    return [this](int64_t n, const std::function<void(int64_t, int64_t)>& chunk) {
      ++runs;
      std::thread other([&] { chunk(n / 2, n); });
      chunk(0, n / 2);
      other.join();
    };
  }
};

// The invariants of every decision: a valid winner, every timed candidate checked first.
void expect_valid(const TuneDecision& d, const kir::Kernel& k, Level level) {
  const std::vector<TuneCandidate> space = cpu_tune_space(k, level);
  ASSERT_EQ(d.candidates.size(), space.size());
  EXPECT_EQ(d.level, level);
  ASSERT_GE(d.winner_index, 0);
  ASSERT_LT(d.winner_index, static_cast<int>(d.candidates.size()));
  const CandidateResult& w = d.candidates[static_cast<size_t>(d.winner_index)];
  EXPECT_EQ(w.params, d.winner);
  EXPECT_EQ(w.status, CandidateStatus::ok);
  EXPECT_GE(d.runs_per_sample, 1);
  for (size_t i = 0; i < space.size(); ++i) {
    const CandidateResult& c = d.candidates[i];
    EXPECT_EQ(c.params, space[i].params);
    EXPECT_EQ(c.group, space[i].group);
    if (c.status == CandidateStatus::disqualified) continue;
    EXPECT_TRUE(c.output_checked) << i;
    // A candidate dropped as hopeless in warm-up (a load burst on a shared machine can do that
    // to any of them, the default too) has no samples; every other one has.
    if (c.status == CandidateStatus::dropped && c.reason.starts_with("warm-up ")) continue;
    EXPECT_FALSE(c.samples.empty()) << i << ": " << status_name(c.status) << " " << c.reason;
    // The winner has the best score, or is the default kept against a gain under min_gain.
    if (d.stop_reason.find("kept the default") == std::string::npos) {
      EXPECT_LE(w.score, c.score) << i;
    } else {
      EXPECT_EQ(d.winner_index, 0);
      EXPECT_LE(w.score * (1 - settings(level).min_gain), c.score) << i;
    }
  }
}

TEST(Runner, TunesAnElementwiseKernel) {
  const kir::Kernel k = testing::elementwise_kernel(64, 256);
  TwoThreads threads;
  Expected<TuneDecision> d = tune_cpu_kernel(backend(), threads.fn(), k, Level::balanced, 0);
  ASSERT_TRUE(d.has_value()) << d.error().message;
  expect_valid(*d, k, Level::balanced);
  ASSERT_EQ(d->candidates.size(), 6u);
  for (const CandidateResult& c : d->candidates) {
    EXPECT_NE(c.status, CandidateStatus::disqualified) << c.params.str() << ": " << c.reason;
    EXPECT_GT(c.compile_ms, 0);
  }
  EXPECT_GT(threads.runs, 6);  // the checked runs and the timed ones went through it
  EXPECT_FALSE(d->stop_reason.empty());
}

TEST(Runner, TunesAMatmulAndARowReduction) {
  const kir::Kernel mm = testing::matmul_kernel(48, 40, 32);
  Expected<TuneDecision> d = tune_cpu_kernel(backend(), nullptr, mm, Level::full, 0);
  ASSERT_TRUE(d.has_value()) << d.error().message;
  expect_valid(*d, mm, Level::full);
  ASSERT_EQ(d->candidates.size(), 4u);
  for (const CandidateResult& c : d->candidates) EXPECT_TRUE(c.output_checked) << c.reason;

  const kir::Kernel rows = testing::row_reduce_kernel(32, 300);
  Expected<TuneDecision> r = tune_cpu_kernel(backend(), nullptr, rows, Level::minimal, 0);
  ASSERT_TRUE(r.has_value()) << r.error().message;
  expect_valid(*r, rows, Level::minimal);
  for (const CandidateResult& c : r->candidates) EXPECT_TRUE(c.output_checked) << c.reason;
}

TEST(Runner, AWrongCandidateIsDisqualified) {
  const kir::Kernel k = testing::elementwise_kernel(16, 64);
  TuneOptions opt;
  opt.hooks.after_check_run = [](size_t candidate, KernelBuffers& bufs) {
    // out[5] is bytes 20..23 (little endian): a low mantissa bit is within tolerance, an
    // exponent bit is not.
    if (candidate == 1) bufs[2].bytes[5 * 4] ^= std::byte{0x01};
    if (candidate == 2) bufs[2].bytes[5 * 4 + 3] ^= std::byte{0x20};
  };
  Expected<TuneDecision> d = tune_cpu_kernel(backend(), nullptr, k, Level::minimal, 0, opt);
  ASSERT_TRUE(d.has_value()) << d.error().message;
  expect_valid(*d, k, Level::minimal);
  const CandidateResult& bad = d->candidates[2];
  EXPECT_EQ(bad.status, CandidateStatus::disqualified);
  EXPECT_EQ(bad.reason.rfind("wrong output: output %2 (out) element 5: got ", 0), 0u) << bad.reason;
  EXPECT_FALSE(bad.output_checked);
  EXPECT_TRUE(bad.samples.empty());
  EXPECT_NE(d->winner_index, 2);
  EXPECT_NE(d->describe().find("wrong output"), std::string::npos);
  EXPECT_TRUE(d->candidates[1].output_checked) << d->candidates[1].reason;
}

TEST(Runner, AnIntegerOutputOffByOneIsDisqualified) {
  const kir::Kernel k = testing::int_kernel(1000);
  TuneOptions opt;
  opt.hooks.after_check_run = [](size_t candidate, KernelBuffers& bufs) {
    if (candidate == 1) bufs[3].bytes[999] ^= std::byte{1};  // the bool output's last element
  };
  Expected<TuneDecision> d = tune_cpu_kernel(backend(), nullptr, k, Level::minimal, 0, opt);
  ASSERT_TRUE(d.has_value()) << d.error().message;
  expect_valid(*d, k, Level::minimal);
  EXPECT_EQ(d->candidates[1].status, CandidateStatus::disqualified);
  EXPECT_EQ(d->candidates[1].reason.rfind("wrong output: output %3 (lt) element 999", 0), 0u)
      << d->candidates[1].reason;
  EXPECT_TRUE(d->candidates[2].output_checked);
}

// out[i] = out[i] * 0.5 + x[i]: a kernel that reads its output. Every checked run starts from
// the same outputs (the candidates share one set of buffers): run twice from what the first run
// left, the default would differ from itself and tuning would fail.
TEST(Runner, EachCheckedRunStartsFromTheInitialOutputs) {
  using testing::make_kernel;
  using testing::param;
  auto a = std::make_shared<kir::ExprArena>();
  const kir::Expr* i = a->var(0);
  const kir::Expr* out = a->load(1, ir::DType::f32, i);
  const kir::Expr* v =
      a->alu(kir::Alu::Add, ir::DType::f32,
             {a->alu(kir::Alu::Mul, ir::DType::f32, {out, a->constant(ir::DType::f32, 0.5)}),
              a->load(0, ir::DType::f32, i)});
  const kir::Kernel k = make_kernel(
      "acc",
      {param(ir::DType::f32, {4096}, false, "x"), param(ir::DType::f32, {4096}, true, "out")},
      {4096}, a, {{1, i, v}});
  Expected<TuneDecision> d = tune_cpu_kernel(backend(), nullptr, k, Level::minimal, 0, {});
  ASSERT_TRUE(d.has_value()) << d.error().message;
  ASSERT_GE(d->candidates.size(), 2u);
  for (const CandidateResult& c : d->candidates) EXPECT_TRUE(c.output_checked) << c.reason;
}

TEST(Runner, ACompileFailureIsDisqualifiedNotFatal) {
  const kir::Kernel k = testing::elementwise_kernel(16, 64);
  TuneOptions opt;
  opt.hooks.fail_compile = [](size_t candidate) -> std::optional<std::string> {
    if (candidate == 1) return "LLVM ran out of registers";
    return std::nullopt;
  };
  Expected<TuneDecision> d = tune_cpu_kernel(backend(), nullptr, k, Level::minimal, 0, opt);
  ASSERT_TRUE(d.has_value()) << d.error().message;
  expect_valid(*d, k, Level::minimal);
  EXPECT_EQ(d->candidates[1].status, CandidateStatus::disqualified);
  EXPECT_EQ(d->candidates[1].reason, "compile failed: LLVM ran out of registers");
  EXPECT_NE(d->winner_index, 1);
}

TEST(Runner, TheDefaultFailingIsAnError) {
  const kir::Kernel k = testing::elementwise_kernel(4, 16);
  TuneOptions opt;
  opt.hooks.fail_compile = [](size_t candidate) -> std::optional<std::string> {
    if (candidate == 0) return "no";
    return std::nullopt;
  };
  Expected<TuneDecision> d = tune_cpu_kernel(backend(), nullptr, k, Level::minimal, 0, opt);
  ASSERT_FALSE(d.has_value());
  EXPECT_EQ(d.error().message,
            "autotune: the default candidate of kernel 'ew' does not compile: compile failed: no");
}

TEST(Runner, ARunThatThrowsIsDisqualified) {
  const kir::Kernel k = testing::elementwise_kernel(16, 64);
  int runs = 0;
  // The first call compiles every candidate; the checked runs are 0, 0, 1, 2: the fifth call
  // overall (candidate 2's run) throws.
  const ParallelFor pf = [&](int64_t n, const std::function<void(int64_t, int64_t)>& chunk) {
    if (++runs == 5) throw std::runtime_error("worker thread died");
    chunk(0, n);
  };
  Expected<TuneDecision> d = tune_cpu_kernel(backend(), pf, k, Level::minimal, 0);
  ASSERT_TRUE(d.has_value()) << d.error().message;
  EXPECT_EQ(d->candidates[2].status, CandidateStatus::disqualified);
  EXPECT_EQ(d->candidates[2].reason, "run failed: threw: worker thread died");
  // Candidate 1 ran fine: kept or, when timing says it is clearly slower, dropped; not
  // disqualified.
  EXPECT_NE(d->candidates[1].status, CandidateStatus::disqualified);
  EXPECT_EQ(d->candidates[1].reason.find("failed"), std::string::npos) << d->candidates[1].reason;
}

TEST(Runner, IgnoresABoundFarAboveRealTimes) {
  // A "bound" of 1000 s that every candidate beats is a wrong model, not a reason to stop after
  // one round: the candidates are sampled until they converge or the budget is spent.
  const kir::Kernel k = testing::elementwise_kernel(16, 64);
  Expected<TuneDecision> d = tune_cpu_kernel(backend(), nullptr, k, Level::balanced, 1e6);
  ASSERT_TRUE(d.has_value()) << d.error().message;
  EXPECT_NE(d->stop_reason, stop_reason_name(StopReason::roofline));
  EXPECT_GT(d->candidates[d->winner_index].samples.size(), 1u);
}

TEST(Runner, TheDecisionRoundTripsThroughJson) {
  const kir::Kernel k = testing::elementwise_kernel(8, 32);
  Expected<TuneDecision> d = tune_cpu_kernel(backend(), nullptr, k, Level::minimal, 0);
  ASSERT_TRUE(d.has_value()) << d.error().message;
  Expected<TuneDecision> back = TuneDecision::from_json(nlohmann::json::parse(d->to_json().dump()));
  ASSERT_TRUE(back.has_value()) << back.error().message;
  EXPECT_EQ(back->winner, d->winner);
  EXPECT_EQ(back->to_json(), d->to_json());
}

// out[r] = sum_c x[r, c] * x[r, c] + 0 * exp(x[r, c]): row_reduce_kernel's outputs (every input
// is finite), with an exponential per element more to compute.
kir::Kernel slower_row_reduce(int64_t rows, int64_t cols) {
  auto a = std::make_shared<kir::ExprArena>();
  using kir::Alu;
  const kir::Expr* x =
      a->load(0, ir::DType::f32,
              a->alu(Alu::Add, ir::DType::i64,
                     {a->alu(Alu::Mul, ir::DType::i64, {a->var(0), a->index(cols)}), a->var(1)}));
  // Zero times five transcendentals of x (finite for the test's inputs): the same sums, several
  // times the work, so that no neighbour on a loaded machine can reverse the two (one exp was
  // 1.13x the other way round under a parallel ctest).
  const kir::Expr* work = a->alu(Alu::Exp, ir::DType::f32, {x});
  for (Alu op : {Alu::Tanh, Alu::Sigmoid, Alu::Erf, Alu::Sin})
    work = a->alu(Alu::Add, ir::DType::f32, {work, a->alu(op, ir::DType::f32, {x})});
  const kir::Expr* zero_exp =
      a->alu(Alu::Mul, ir::DType::f32, {a->constant(ir::DType::f32, 0), work});
  const kir::Expr* v =
      a->alu(Alu::Add, ir::DType::f32, {a->alu(Alu::Mul, ir::DType::f32, {x, x}), zero_exp});
  const kir::Expr* r = a->reduce(kir::ReduceOp::Sum, ir::DType::f32, v, {1}, {cols});
  return kiln::testing::make_kernel("slower_rows",
                                    {testing::param(ir::DType::f32, {rows, cols}, false, "x"),
                                     testing::param(ir::DType::f32, {rows}, true, "out")},
                                    {rows}, a, {{1, a->var(0), r}});
}

TEST(TimeRatio, TheKernelWithMoreWorkTakesLongerEitherWayRound) {
  // The same outputs; the slower one computes five transcendentals per element more (many times
  // the work of a square and an add), so whichever is the candidate, the ratio says which is
  // slower. The chunks run one after the other on this thread: with a thread started per run (as
  // TwoThreads does), each run waited for a free core on a loaded machine, a wait of up to a time
  // slice that dwarfed both kernels and made their order a coin toss (CI, stop 78).
  const kir::Kernel fast = testing::row_reduce_kernel(128, 1024);
  const kir::Kernel slow = slower_row_reduce(128, 1024);
  int runs = 0;
  const ParallelFor in_two_chunks = [&](int64_t n,
                                        const std::function<void(int64_t, int64_t)>& chunk) {
    ++runs;
    chunk(0, n / 2);
    chunk(n / 2, n);
  };
  Expected<double> slow_over_fast = cpu_time_ratio(backend(), in_two_chunks, slow, fast);
  ASSERT_TRUE(slow_over_fast.has_value()) << slow_over_fast.error().message;
  Expected<double> fast_over_slow = cpu_time_ratio(backend(), in_two_chunks, fast, slow);
  ASSERT_TRUE(fast_over_slow.has_value()) << fast_over_slow.error().message;
  EXPECT_GT(*slow_over_fast, 1.0) << "fast over slow: " << *fast_over_slow;
  EXPECT_LT(*fast_over_slow, 1.0) << "slow over fast: " << *slow_over_fast;
  EXPECT_GT(runs, 2 * 2 * TimeRatioOptions{}.pairs) << "every sample runs through parallel_for";
}

TEST(TimeRatio, AKernelThatComputesSomethingElseIsAnError) {
  // sum(x * x) against the same over rows of another length, and against sum(x), a kernel of the
  // same parameters whose outputs differ.
  const kir::Kernel rows = testing::row_reduce_kernel(16, 64);
  Expected<double> other_shape =
      cpu_time_ratio(backend(), nullptr, testing::row_reduce_kernel(16, 32), rows);
  ASSERT_FALSE(other_shape.has_value());
  EXPECT_NE(other_shape.error().message.find("not the parameters of 'rows'"), std::string::npos)
      << other_shape.error().message;
  EXPECT_NE(other_shape.error().message.find("f32[16,32]"), std::string::npos)
      << other_shape.error().message;

  auto a = std::make_shared<kir::ExprArena>();
  const kir::Expr* x = a->load(
      0, ir::DType::f32,
      a->alu(kir::Alu::Add, ir::DType::i64,
             {a->alu(kir::Alu::Mul, ir::DType::i64, {a->var(0), a->index(64)}), a->var(1)}));
  const kir::Kernel sums = kiln::testing::make_kernel(
      "sums",
      {testing::param(ir::DType::f32, {16, 64}, false, "x"),
       testing::param(ir::DType::f32, {16}, true, "out")},
      {16}, a, {{1, a->var(0), a->reduce(kir::ReduceOp::Sum, ir::DType::f32, x, {1}, {64})}});
  Expected<double> wrong = cpu_time_ratio(backend(), nullptr, sums, rows);
  ASSERT_FALSE(wrong.has_value());
  EXPECT_NE(wrong.error().message.find("kernel 'sums' does not compute what 'rows' does"),
            std::string::npos)
      << wrong.error().message;
}

}  // namespace
}  // namespace kiln::autotune
