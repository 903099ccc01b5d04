// Adaptive sampling over tuning candidates: warm-up, rounds of one sample per surviving
// candidate, dropping the clearly slow, stopping on convergence, budget or the roofline.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "kiln/error.h"

namespace kiln::autotune {

struct SamplerSettings {
  int warmup_runs = 1;         // measurements per candidate before sampling, discarded
  int min_samples = 3;         // rounds before anything is dropped or convergence is judged
  int max_samples = 10;        // samples per candidate at most
  int sample_budget = 40;      // samples over all candidates at most (at least one round runs)
  double drop_ratio = 1.5;     // drop a candidate whose min > drop_ratio x the leader's median
  double converge_rel = 0.03;  // "no survivor's best time improved by more than this" ...
  int stable_rounds = 2;       // ... for this many rounds in a row, with the same leader: stop
  // After the warm-up, drop a candidate whose last warm-up run took more than this many times the
  // fastest candidate's, and again when both are measured once more back to back: hopeless, and
  // not worth min_samples more runs. 0 disables it.
  double hopeless_ratio = 10.0;
  // Stop once a candidate's best time is within roofline_ms / roofline_fraction, i.e. it reaches
  // this fraction of the roofline's speed. 0 (or no roofline) disables the early stop.
  double roofline_fraction = 0.7;
};

enum class CandidateStatus : uint8_t { ok, dropped, disqualified };
std::string_view status_name(CandidateStatus s);  // "ok", "dropped", "disqualified"

enum class StopReason : uint8_t {
  converged,
  budget,
  max_samples,
  roofline,
  one_survivor,
  none_valid
};
std::string_view stop_reason_name(StopReason r);

struct CandidateSamples {
  std::vector<double> samples;  // ms, in the order taken (warm-up runs excluded)
  CandidateStatus status = CandidateStatus::ok;
  std::string reason;  // why it was dropped or disqualified
};

struct SampleResult {
  std::vector<CandidateSamples> candidates;  // one per candidate index
  int winner = -1;  // lowest score among the `ok` ones (ties: lowest index); -1 if none is ok
  StopReason stop = StopReason::none_valid;
  int rounds = 0;
  int total_samples = 0;
};

// One timing of candidate `index` in ms; an error (or a negative or non-finite time)
// disqualifies the candidate with the error's message.
using MeasureFn = std::function<Expected<double>(int index)>;

// Samples candidates 0..count-1. Calls `measure` in a fixed order that depends only on the values
// it returns, so the result is deterministic given them. `roofline_ms` <= 0: no roofline.
SampleResult sample_candidates(int count, const MeasureFn& measure, const SamplerSettings& settings,
                               double roofline_ms);

}  // namespace kiln::autotune
