// The autotuner's score of one candidate's timing samples (DESIGN.md §9): lower is better.
#pragma once

#include <vector>

namespace kiln::autotune {

// (0.8·min + 0.2·median)·(1 + stddev/mean): mostly the best time (the least disturbed run),
// some of the typical one, penalized by noise. stddev is the population one (0 for one sample),
// the median of an even count is the mean of the middle two. +inf for no samples.
double score(const std::vector<double>& samples);

// The pieces, for reports.
double min_of(const std::vector<double>& samples);     // +inf for no samples
double median_of(const std::vector<double>& samples);  // +inf for no samples

}  // namespace kiln::autotune
