// Tuning levels (`[autotune] level`, DESIGN.md §9/§10): how many candidates, how many samples and
// which roofline fraction ends the search early.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

#include "autotune/sampler.h"

namespace kiln::autotune {

enum class Level : uint8_t { minimal, balanced, extensive, full };
inline constexpr Level kAllLevels[] = {Level::minimal, Level::balanced, Level::extensive,
                                       Level::full};

std::string_view level_name(Level l);  // "minimal", "balanced", "extensive", "full"
std::optional<Level> parse_level(std::string_view name);

struct LevelSettings {
  int max_candidates = 0;    // the default plus the best-priority others; 0 = the whole space
  double min_sample_ms = 0;  // one sample repeats the kernel until it takes about this long
  // The default (the backend's heuristics) stays unless the winner's score beats it by more than
  // this fraction: a smaller gain is within what a microbenchmark can tell from a real run.
  double min_gain = 0.05;
  SamplerSettings sampler;
};

LevelSettings settings(Level l);

}  // namespace kiln::autotune
