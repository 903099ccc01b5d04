// Adaptive sampling: warm-up, rounds, dropping, convergence, budget and roofline stops.
#include "autotune/sampler.h"

#include <fmt/format.h>

#include <cmath>
#include <limits>

#include "autotune/scorer.h"

namespace kiln::autotune {

std::string_view status_name(CandidateStatus s) {
  switch (s) {
    case CandidateStatus::ok:
      return "ok";
    case CandidateStatus::dropped:
      return "dropped";
    case CandidateStatus::disqualified:
      return "disqualified";
  }
  return "?";
}

std::string_view stop_reason_name(StopReason r) {
  switch (r) {
    case StopReason::converged:
      return "converged";
    case StopReason::budget:
      return "sample budget spent";
    case StopReason::max_samples:
      return "samples per candidate spent";
    case StopReason::roofline:
      return "reached the roofline fraction";
    case StopReason::one_survivor:
      return "one candidate left";
    case StopReason::none_valid:
      return "no valid candidate";
  }
  return "?";
}

namespace {

class Sampler {
 public:
  Sampler(int count, const MeasureFn& measure, const SamplerSettings& s, double roofline_ms)
      : measure_(measure), s_(s), roofline_ms_(roofline_ms) {
    r_.candidates.resize(static_cast<size_t>(count));
    best_.assign(static_cast<size_t>(count), std::numeric_limits<double>::infinity());
  }

  SampleResult run() {
    warm_up();
    r_.stop = loop();
    r_.winner = leader();
    return std::move(r_);
  }

 private:
  bool active(size_t i) const { return r_.candidates[i].status == CandidateStatus::ok; }
  int active_count() const {
    int n = 0;
    for (size_t i = 0; i < r_.candidates.size(); ++i) n += active(i);
    return n;
  }

  // One measurement; false (and the candidate disqualified) on an error or a nonsense time.
  bool take(size_t i, double* ms) {
    Expected<double> t = measure_(static_cast<int>(i));
    CandidateSamples& c = r_.candidates[i];
    if (!t) {
      c.status = CandidateStatus::disqualified;
      c.reason = t.error().message;
      return false;
    }
    if (!std::isfinite(*t) || *t < 0) {
      c.status = CandidateStatus::disqualified;
      c.reason = fmt::format("measured a time of {} ms", *t);
      return false;
    }
    *ms = *t;
    return true;
  }

  void warm_up() {
    std::vector<double> last(r_.candidates.size(), std::numeric_limits<double>::infinity());
    for (size_t i = 0; i < r_.candidates.size(); ++i)
      for (int w = 0; w < s_.warmup_runs && active(i); ++w) take(i, &last[i]);
    size_t fastest = 0;
    for (size_t i = 0; i < last.size(); ++i)
      if (active(i) && (!active(fastest) || last[i] < last[fastest])) fastest = i;
    if (s_.hopeless_ratio <= 0 || last.empty() || !active(fastest)) return;
    for (size_t i = 0; i < last.size(); ++i) {
      if (i == fastest || !active(i) || last[i] <= s_.hopeless_ratio * last[fastest]) continue;
      // Confirmed back to back with the fastest, so that a burst of load on the machine during
      // one warm-up drops nothing.
      double again = 0, reference = 0;
      if (!take(i, &again) || !take(fastest, &reference)) continue;
      if (again <= s_.hopeless_ratio * reference) continue;
      r_.candidates[i].status = CandidateStatus::dropped;
      r_.candidates[i].reason = fmt::format("warm-up {:.4g} ms > {} x the fastest's (#{}, {:.4g} ms)",
                                            again, s_.hopeless_ratio, fastest, reference);
    }
  }

  // The active candidate with the lowest score (ties: the lowest index); -1 if none.
  int leader() const {
    int best = -1;
    double best_score = std::numeric_limits<double>::infinity();
    for (size_t i = 0; i < r_.candidates.size(); ++i) {
      if (!active(i) || r_.candidates[i].samples.empty()) continue;
      const double sc = score(r_.candidates[i].samples);
      if (best < 0 || sc < best_score) best = static_cast<int>(i), best_score = sc;
    }
    return best;
  }

  // One sample of every active candidate; returns whether any best time improved by more than
  // converge_rel.
  bool round() {
    bool improved = false;
    for (size_t i = 0; i < r_.candidates.size(); ++i) {
      if (!active(i)) continue;
      double ms = 0;
      if (!take(i, &ms)) continue;
      r_.candidates[i].samples.push_back(ms);
      ++r_.total_samples;
      if (ms < best_[i] * (1 - s_.converge_rel)) improved = true;
      best_[i] = std::min(best_[i], ms);
    }
    ++r_.rounds;
    return improved;
  }

  void drop_slow(int lead) {
    const double limit =
        s_.drop_ratio * median_of(r_.candidates[static_cast<size_t>(lead)].samples);
    for (size_t i = 0; i < r_.candidates.size(); ++i) {
      if (!active(i) || static_cast<int>(i) == lead || best_[i] <= limit) continue;
      r_.candidates[i].status = CandidateStatus::dropped;
      r_.candidates[i].reason = fmt::format(
          "best {:.4g} ms > {:g} x the leader's (#{}) median {:.4g} ms after {} samples", best_[i],
          s_.drop_ratio, lead, limit / s_.drop_ratio, r_.candidates[i].samples.size());
    }
  }

  // Measurements this far under the bound are timer noise at most, not a broken bound.
  static constexpr double kBelowBound = 0.8;
  bool at_roofline() const {
    if (roofline_ms_ <= 0 || s_.roofline_fraction <= 0) return false;
    for (size_t i = 0; i < r_.candidates.size(); ++i)
      // A time well under the bound means the bound's model of the kernel is wrong (work it
      // counted that no backend does): then it says nothing, and sampling goes on.
      if (active(i) && best_[i] <= roofline_ms_ / s_.roofline_fraction &&
          best_[i] >= roofline_ms_ * kBelowBound)
        return true;
    return false;
  }

  StopReason loop() {
    int stable = 0, last_lead = -1;
    while (true) {
      const int n = active_count();
      if (n == 0) return StopReason::none_valid;
      if (r_.rounds > 0 && r_.total_samples + n > s_.sample_budget) return StopReason::budget;
      if (r_.rounds >= s_.max_samples) return StopReason::max_samples;
      const bool improved = round();
      const int lead = leader();
      if (lead < 0) return StopReason::none_valid;
      if (at_roofline()) return StopReason::roofline;
      if (r_.rounds < s_.min_samples) {
        last_lead = lead;
        continue;
      }
      drop_slow(lead);
      if (active_count() == 1) return StopReason::one_survivor;
      stable = (!improved && lead == last_lead) ? stable + 1 : 0;
      last_lead = lead;
      if (stable >= s_.stable_rounds) return StopReason::converged;
    }
  }

  const MeasureFn& measure_;
  const SamplerSettings& s_;
  const double roofline_ms_;
  SampleResult r_;
  std::vector<double> best_;  // per candidate: its fastest sample so far
};

}  // namespace

SampleResult sample_candidates(int count, const MeasureFn& measure, const SamplerSettings& settings,
                               double roofline_ms) {
  return Sampler(count, measure, settings, roofline_ms).run();
}

}  // namespace kiln::autotune
