// An autotuning decision: the winning TuneParams and every candidate's samples, score and
// status, as stored in the cache's autotune table (JSON) and shown by `kiln cache show`.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "autotune/sampler.h"
#include "autotune/tune_level.h"
#include "codegen/tune_params.h"
#include "kiln/error.h"

namespace kiln::autotune {

struct CandidateResult {
  codegen::TuneParams params;
  std::string group;
  int priority = 0;
  std::vector<double> samples;  // ms per run of the whole kernel, in the order taken
  double score = 0;             // scorer.h; +inf without samples
  CandidateStatus status = CandidateStatus::ok;
  std::string reason;           // why dropped or disqualified
  bool output_checked = false;  // its outputs were compared with the default's and matched
  double compile_ms = 0;
};

struct TuneDecision {
  codegen::TuneParams winner;  // the default's TuneParams{} when nothing beat it
  int winner_index = 0;        // into candidates
  Level level = Level::balanced;
  double roofline_ms = 0;   // the bound the search was given (0: none)
  std::string stop_reason;  // sampler.h stop_reason_name
  int runs_per_sample = 1;  // kernel runs timed together per sample
  std::vector<CandidateResult> candidates;

  nlohmann::json to_json() const;
  // A decision written by to_json(); an error saying which field is missing or wrong.
  static Expected<TuneDecision> from_json(const nlohmann::json& j);
  // A table for people: one line per candidate (params, status, samples, min, median, score).
  std::string describe() const;
};

}  // namespace kiln::autotune
