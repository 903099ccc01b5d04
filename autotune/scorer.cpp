// The autotuner's score: (0.8·min + 0.2·median)·(1 + stddev/mean).
#include "autotune/scorer.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace kiln::autotune {

double min_of(const std::vector<double>& samples) {
  if (samples.empty()) return std::numeric_limits<double>::infinity();
  return *std::ranges::min_element(samples);
}

double median_of(const std::vector<double>& samples) {
  if (samples.empty()) return std::numeric_limits<double>::infinity();
  std::vector<double> s = samples;
  std::ranges::sort(s);
  const size_t n = s.size();
  return n % 2 == 1 ? s[n / 2] : (s[n / 2 - 1] + s[n / 2]) / 2;
}

double score(const std::vector<double>& samples) {
  if (samples.empty()) return std::numeric_limits<double>::infinity();
  double mean = 0;
  for (double x : samples) mean += x;
  mean /= static_cast<double>(samples.size());
  double var = 0;
  for (double x : samples) var += (x - mean) * (x - mean);
  var /= static_cast<double>(samples.size());
  const double cv = mean > 0 ? std::sqrt(var) / mean : 0;
  return (0.8 * min_of(samples) + 0.2 * median_of(samples)) * (1 + cv);
}

}  // namespace kiln::autotune
