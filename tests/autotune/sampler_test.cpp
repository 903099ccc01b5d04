// The adaptive sampler on synthetic timings: dropping, convergence, roofline stop, budget,
// determinism and disqualification.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "autotune/sampler.h"

namespace kiln::autotune {
namespace {

// Candidate i's n-th measurement is times[i][n % size]; every call is logged.
struct Synthetic {
  std::vector<std::vector<double>> times;
  std::vector<int> log;
  std::vector<size_t> next;

  explicit Synthetic(std::vector<std::vector<double>> t)
      : times(std::move(t)), next(times.size(), 0) {}
  MeasureFn fn() {
    return [this](int i) -> Expected<double> {
      log.push_back(i);
      const std::vector<double>& t = times[static_cast<size_t>(i)];
      return t[next[static_cast<size_t>(i)]++ % t.size()];
    };
  }
};

SamplerSettings base() {
  SamplerSettings s;
  s.warmup_runs = 1;
  s.min_samples = 3;
  s.max_samples = 10;
  s.sample_budget = 100;
  s.drop_ratio = 1.5;
  s.converge_rel = 0.03;
  s.stable_rounds = 2;
  s.roofline_fraction = 0.7;
  return s;
}

TEST(Sampler, DropsCandidatesClearlySlowerThanTheLeader) {
  Synthetic syn({{1.0, 1.01, 0.99}, {1.1, 1.12, 1.09}, {3.0, 3.1, 2.9}});
  const SampleResult r = sample_candidates(3, syn.fn(), base(), 0);
  EXPECT_EQ(r.winner, 0);
  EXPECT_EQ(r.candidates[1].status, CandidateStatus::ok);
  ASSERT_EQ(r.candidates[2].status, CandidateStatus::dropped);
  EXPECT_NE(r.candidates[2].reason.find("leader's (#0) median"), std::string::npos)
      << r.candidates[2].reason;
  // Dropped right after min_samples rounds; the others went on.
  EXPECT_EQ(r.candidates[2].samples.size(), 3u);
  EXPECT_GT(r.candidates[0].samples.size(), 3u);
  EXPECT_EQ(r.candidates[0].samples.size(), r.candidates[1].samples.size());
}

TEST(Sampler, CloseCandidatesConvergeAndBothStay) {
  Synthetic syn({{1.02, 1.03, 1.02}, {1.0, 1.01, 1.0}});
  const SampleResult r = sample_candidates(2, syn.fn(), base(), 0);
  EXPECT_EQ(r.stop, StopReason::converged);
  EXPECT_EQ(r.winner, 1);
  EXPECT_EQ(r.candidates[0].status, CandidateStatus::ok);
  EXPECT_EQ(r.candidates[1].status, CandidateStatus::ok);
  // Round 1 sets the best times, round 2 improves nothing, rounds 3 and 4 are the two stable
  // ones counted after min_samples (3).
  EXPECT_EQ(r.rounds, 4);
  EXPECT_EQ(r.total_samples, 8);
}

TEST(Sampler, StillImprovingCandidatesKeepSampling) {
  // Each round is 5% faster than the last: never converged, so max_samples ends it.
  std::vector<double> falling;
  for (int n = 0; n < 20; ++n) falling.push_back(std::pow(0.95, n));
  Synthetic syn({falling, falling});
  const SampleResult r = sample_candidates(2, syn.fn(), base(), 0);
  EXPECT_EQ(r.stop, StopReason::max_samples);
  EXPECT_EQ(r.candidates[0].samples.size(), 10u);
}

TEST(Sampler, StopsEarlyAtTheRooflineFraction) {
  // Bound 0.63 ms at fraction 0.7: anything at or under 0.9 ms is close enough.
  Synthetic syn({{2.0}, {0.85}, {1.5}});
  const SampleResult r = sample_candidates(3, syn.fn(), base(), 0.63);
  EXPECT_EQ(r.stop, StopReason::roofline);
  EXPECT_EQ(r.rounds, 1);
  EXPECT_EQ(r.winner, 1);
  // Without a roofline the same timings run to convergence.
  Synthetic again({{2.0}, {0.85}, {1.5}});
  const SampleResult full = sample_candidates(3, again.fn(), base(), 0);
  EXPECT_NE(full.stop, StopReason::roofline);
  EXPECT_GT(full.rounds, 1);
  // Just above the fraction: no early stop.
  Synthetic above({{2.0}, {0.91}, {1.5}});
  EXPECT_NE(sample_candidates(3, above.fn(), base(), 0.63).stop, StopReason::roofline);
}

TEST(Sampler, IgnoresABoundTheTimingsBeat) {
  // 0.85 ms is far under a 10 ms "bound": the bound's model is wrong, so it stops nothing.
  Synthetic syn({{2.0}, {0.85}, {1.5}});
  const SampleResult r = sample_candidates(3, syn.fn(), base(), 10.0);
  EXPECT_NE(r.stop, StopReason::roofline);
  EXPECT_GT(r.rounds, 1);
  EXPECT_EQ(r.winner, 1);
}

TEST(Sampler, IsDeterministicGivenTheTimings) {
  const std::vector<std::vector<double>> t = {
      {1.3, 1.2, 1.25, 1.1}, {1.0, 1.4, 0.98, 1.2}, {2.5, 2.0}, {1.05, 1.02, 1.2}};
  Synthetic a(t), b(t);
  const SampleResult ra = sample_candidates(4, a.fn(), base(), 0);
  const SampleResult rb = sample_candidates(4, b.fn(), base(), 0);
  EXPECT_EQ(a.log, b.log);
  EXPECT_EQ(ra.winner, rb.winner);
  EXPECT_EQ(ra.stop, rb.stop);
  for (size_t i = 0; i < t.size(); ++i) {
    EXPECT_EQ(ra.candidates[i].samples, rb.candidates[i].samples);
    EXPECT_EQ(ra.candidates[i].status, rb.candidates[i].status);
  }
  // Warm-up: one discarded call per candidate, in index order, before any sample.
  EXPECT_EQ(std::vector<int>(a.log.begin(), a.log.begin() + 4), (std::vector<int>{0, 1, 2, 3}));
  EXPECT_EQ(ra.candidates[0].samples.front(), 1.2);  // 1.3 was the warm-up
}

TEST(Sampler, AnErrorOrANonsenseTimeDisqualifies) {
  int calls = 0;
  const MeasureFn fn = [&](int i) -> Expected<double> {
    if (i == 1 && ++calls == 3) return make_error("kernel crashed in round 2");
    if (i == 2) return std::numeric_limits<double>::quiet_NaN();
    return 1.0 + 0.1 * i;
  };
  const SampleResult r = sample_candidates(3, fn, base(), 0);
  EXPECT_EQ(r.winner, 0);
  EXPECT_EQ(r.candidates[1].status, CandidateStatus::disqualified);
  EXPECT_EQ(r.candidates[1].reason, "kernel crashed in round 2");
  EXPECT_EQ(r.candidates[1].samples.size(), 1u);  // the round-1 sample stays
  EXPECT_EQ(r.candidates[2].status, CandidateStatus::disqualified);
  EXPECT_NE(r.candidates[2].reason.find("nan"), std::string::npos) << r.candidates[2].reason;
  EXPECT_TRUE(r.candidates[2].samples.empty());
}

TEST(Sampler, NoValidCandidateHasNoWinner) {
  const MeasureFn fn = [](int) -> Expected<double> { return make_error("no"); };
  const SampleResult r = sample_candidates(2, fn, base(), 0);
  EXPECT_EQ(r.winner, -1);
  EXPECT_EQ(r.stop, StopReason::none_valid);
  EXPECT_EQ(sample_candidates(0, fn, base(), 0).winner, -1);
}

TEST(Sampler, SampleBudgetIsRespected) {
  SamplerSettings s = base();
  s.sample_budget = 7;
  std::vector<double> falling;
  for (int n = 0; n < 20; ++n) falling.push_back(std::pow(0.9, n));
  Synthetic syn({falling, falling, falling});
  const SampleResult r = sample_candidates(3, syn.fn(), s, 0);
  EXPECT_EQ(r.stop, StopReason::budget);
  EXPECT_EQ(r.total_samples, 6);  // a third round would need 9
  // At least one round always runs, whatever the budget.
  s.sample_budget = 1;
  Synthetic one({{1.0}, {2.0}});
  const SampleResult r1 = sample_candidates(2, one.fn(), s, 0);
  EXPECT_EQ(r1.rounds, 1);
  EXPECT_EQ(r1.winner, 0);
}

TEST(Sampler, ASingleSurvivorEndsTheSearch) {
  Synthetic syn({{5.0}, {1.0}});
  const SampleResult r = sample_candidates(2, syn.fn(), base(), 0);
  EXPECT_EQ(r.stop, StopReason::one_survivor);
  EXPECT_EQ(r.winner, 1);
  EXPECT_EQ(r.candidates[0].status, CandidateStatus::dropped);
}

TEST(Sampler, AHopelessWarmUpIsDroppedBeforeSampling) {
  // Candidate 1 runs 50x slower than candidate 0: dropped after its warm-up and one run to
  // confirm it, not timed min_samples more times. Candidate 2 (3x slower) is only dropped by the
  // usual rule later.
  Synthetic syn({{1.0}, {50.0}, {3.0}});
  const SampleResult r = sample_candidates(3, syn.fn(), base(), 0);
  EXPECT_EQ(r.candidates[1].status, CandidateStatus::dropped);
  EXPECT_TRUE(r.candidates[1].samples.empty());
  EXPECT_EQ(r.candidates[1].reason, "warm-up 50 ms > 10 x the fastest's (#0, 1 ms)");
  EXPECT_EQ(std::count(syn.log.begin(), syn.log.end(), 1), 2);
  EXPECT_EQ((std::vector<int>(syn.log.begin(), syn.log.begin() + 5)), (std::vector<int>{0, 1, 2, 1, 0}));
  // A burst of load during one warm-up is not enough: the confirming run is fast again.
  Synthetic burst({{1.0}, {50.0, 1.1}, {3.0}});
  EXPECT_EQ(sample_candidates(3, burst.fn(), base(), 0).candidates[1].status, CandidateStatus::ok);
  EXPECT_EQ(r.candidates[2].status, CandidateStatus::dropped);
  EXPECT_EQ(r.candidates[2].samples.size(), 3u);
  EXPECT_EQ(r.winner, 0);
  SamplerSettings off = base();
  off.hopeless_ratio = 0;  // disabled: sampled min_samples times like the others
  Synthetic again({{1.0}, {50.0}, {3.0}});
  EXPECT_EQ(sample_candidates(3, again.fn(), off, 0).candidates[1].samples.size(), 3u);
}

}  // namespace
}  // namespace kiln::autotune
