// Warm-up runs before timing: enough of them, and for long enough, that the timed runs see a
// steady state (caches, pages, a core out of idle, memory a VM serves slowly on its first passes).
#pragma once

#include <chrono>

namespace kiln::support {

// Runs `once` at least `min_runs` times and until `min_ms` have passed, at most `max_runs` times;
// stops at once, returning false, when `once` returns false.
template <typename Once>
bool warm_up(Once&& once, int min_runs, double min_ms, int max_runs) {
  const auto from = std::chrono::steady_clock::now();
  for (int r = 0; r < max_runs; ++r) {
    const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - from).count();
    if (r >= min_runs && ms >= min_ms) break;
    if (!once()) return false;
  }
  return true;
}

}  // namespace kiln::support
