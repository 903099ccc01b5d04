// The shared tuning loop with a synthetic bench (no compiler, no device): candidates compile on
// the given threads, a winner must beat the default by the level's min_gain, and a pool that
// fails while compiling leaves the compiles to the calling thread.
#include <gtest/gtest.h>

#include <atomic>
#include <stdexcept>
#include <thread>

#include "autotune/tune_loop.h"
#include "tests/autotune/tune_test_kernels.h"

namespace kiln::autotune {
namespace {

using codegen::TuneParams;

// Candidate i takes ms[i] per run; runs leave the buffers as they are (every output "matches").
class SyntheticBench final : public CandidateBench {
 public:
  explicit SyntheticBench(std::vector<double> ms) : ms_(std::move(ms)) {}
  Expected<double> compile(size_t, const TuneParams&) override {
    ++compiles;
    return 1.0;
  }
  bool concurrent_compile() const override { return true; }
  Expected<void> run(size_t, KernelBuffers&) override { return {}; }
  Expected<void> prepare_timing(const KernelBuffers&, bool) override { return {}; }
  Expected<double> time(size_t i, int) override { return ms_[i]; }
  std::atomic<int> compiles{0};

 private:
  std::vector<double> ms_;
};

std::vector<TuneCandidate> space(size_t n) {
  std::vector<TuneCandidate> s{{TuneParams{}, 0, "default"}};
  for (size_t i = 1; i < n; ++i) {
    TuneParams p;
    p.vector_width = 4 << i;
    s.push_back({p, static_cast<int>(i), "test"});
  }
  return s;
}

TEST(TuneLoop, AWinnerMustBeatTheDefaultByTheMinimumGain) {
  const kir::Kernel k = testing::elementwise_kernel(4, 16);
  {
    SyntheticBench bench({1.0, 0.97, 1.3});  // 3% faster: within balanced's 5%
    Expected<TuneDecision> d = tune_kernel(bench, k, space(3), Level::balanced, 0, nullptr);
    ASSERT_TRUE(d.has_value()) << d.error().message;
    EXPECT_EQ(d->winner_index, 0);
    EXPECT_EQ(d->winner, TuneParams{});
    EXPECT_NE(d->stop_reason.find("; kept the default: #1 was 3.0% faster (< 5%)"), std::string::npos)
        << d->stop_reason;
  }
  {
    SyntheticBench bench({1.0, 0.8, 1.3});  // 20% faster: it wins
    Expected<TuneDecision> d = tune_kernel(bench, k, space(3), Level::balanced, 0, nullptr);
    ASSERT_TRUE(d.has_value()) << d.error().message;
    EXPECT_EQ(d->winner_index, 1);
    EXPECT_EQ(d->stop_reason.find("kept the default"), std::string::npos) << d->stop_reason;
  }
}

TEST(TuneLoop, CandidatesCompileOverTheGivenThreads) {
  const kir::Kernel k = testing::elementwise_kernel(4, 16);
  SyntheticBench bench({1.0, 1.0, 1.0, 1.0});
  std::atomic<int> calls{0};
  const ParallelFor pf = [&](int64_t n, const std::function<void(int64_t, int64_t)>& chunk) {
    ++calls;
    std::thread other([&] { chunk(n / 2, n); });
    chunk(0, n / 2);
    other.join();
  };
  ASSERT_TRUE(tune_kernel(bench, k, space(4), Level::balanced, 0, pf).has_value());
  EXPECT_EQ(calls.load(), 1);  // one call compiled all four
  EXPECT_EQ(bench.compiles.load(), 4);
}

TEST(TuneLoop, APoolThatFailsWhileCompilingLeavesTheCompilesToTheCaller) {
  const kir::Kernel k = testing::elementwise_kernel(4, 16);
  SyntheticBench bench({1.0, 0.5, 1.0});
  const ParallelFor broken = [](int64_t, const std::function<void(int64_t, int64_t)>&) {
    throw std::runtime_error("no threads");
  };
  Expected<TuneDecision> d = tune_kernel(bench, k, space(3), Level::minimal, 0, broken);
  ASSERT_TRUE(d.has_value()) << d.error().message;
  EXPECT_EQ(bench.compiles.load(), 3);
  EXPECT_EQ(d->winner_index, 1);
}

TEST(TuneLoop, ASpaceThatDoesNotStartWithTheDefaultIsAnError) {
  const kir::Kernel k = testing::elementwise_kernel(4, 16);
  SyntheticBench bench({1.0, 1.0});
  std::vector<TuneCandidate> s = space(2);
  std::swap(s[0], s[1]);
  Expected<TuneDecision> d = tune_kernel(bench, k, s, Level::minimal, 0, nullptr);
  ASSERT_FALSE(d.has_value());
  EXPECT_EQ(d.error().message, "autotune: the tuning space of kernel 'ew' does not start with the default");
}

}  // namespace
}  // namespace kiln::autotune
