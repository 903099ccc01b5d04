// The tuning levels' settings.
#include "autotune/tune_level.h"

namespace kiln::autotune {

std::string_view level_name(Level l) {
  switch (l) {
    case Level::minimal:
      return "minimal";
    case Level::balanced:
      return "balanced";
    case Level::extensive:
      return "extensive";
    case Level::full:
      return "full";
  }
  return "?";
}

std::optional<Level> parse_level(std::string_view name) {
  for (Level l : kAllLevels)
    if (level_name(l) == name) return l;
  return std::nullopt;
}

// Each level roughly doubles the time of the one before: more candidates, more samples, longer
// samples, a stricter convergence test and an early stop only closer to the roofline. `full`
// searches the whole space and only stops early at 95% of the roofline.
LevelSettings settings(Level l) {
  LevelSettings s;
  SamplerSettings& p = s.sampler;
  switch (l) {
    case Level::minimal:
      s.max_candidates = 3, s.min_sample_ms = 0.1, s.min_gain = 0.08;
      p.warmup_runs = 1, p.min_samples = 2, p.max_samples = 5, p.sample_budget = 12;
      p.drop_ratio = 1.3, p.converge_rel = 0.05, p.stable_rounds = 1, p.roofline_fraction = 0.5;
      break;
    case Level::balanced:
      s.max_candidates = 6, s.min_sample_ms = 0.25, s.min_gain = 0.05;
      p.warmup_runs = 1, p.min_samples = 3, p.max_samples = 10, p.sample_budget = 40;
      p.drop_ratio = 1.5, p.converge_rel = 0.03, p.stable_rounds = 2, p.roofline_fraction = 0.7;
      break;
    case Level::extensive:
      s.max_candidates = 12, s.min_sample_ms = 0.5, s.min_gain = 0.04;
      p.warmup_runs = 2, p.min_samples = 4, p.max_samples = 20, p.sample_budget = 150;
      p.drop_ratio = 1.5, p.converge_rel = 0.02, p.stable_rounds = 3, p.roofline_fraction = 0.85;
      break;
    case Level::full:
      s.max_candidates = 0, s.min_sample_ms = 1.0, s.min_gain = 0.03;
      p.warmup_runs = 2, p.min_samples = 5, p.max_samples = 40, p.sample_budget = 1000;
      p.drop_ratio = 2.0, p.converge_rel = 0.01, p.stable_rounds = 4, p.roofline_fraction = 0.95;
      break;
  }
  return s;
}

}  // namespace kiln::autotune
