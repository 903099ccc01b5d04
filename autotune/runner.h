// Tunes one kernel on the cpu backend: the cpu's CandidateBench for the shared tuning loop
// (autotune/tune_loop.h) over cpu_tune_space(kernel, level).
#pragma once

#include "autotune/tune_loop.h"
#include "codegen/cpu/cpu_backend.h"

namespace kiln::autotune {

// How a bench compiles a candidate. Without one, CpuBackend::compile; the cpu target passes its
// own, which keeps the code it compiled so that the plan's compile of the schedule chosen links
// that code instead of compiling the kernel again (runtime/cpu_target.h, RecentCode).
using CpuCompile = std::function<Expected<std::shared_ptr<const codegen::CpuArtifact>>(
    const kir::Kernel&, const codegen::TuneParams&)>;

// Candidates compile at once over `parallel_for` (CpuBackend::compile is thread-safe) and run
// over it too, like the cpu device runs kernels.
Expected<TuneDecision> tune_cpu_kernel(codegen::CpuBackend& backend,
                                       const ParallelFor& parallel_for, const kir::Kernel& kernel,
                                       Level level, double roofline_ms,
                                       const TuneOptions& options = {},
                                       const CpuCompile& compile = nullptr);

struct TimeRatioOptions {
  uint64_t seed = 0x6b696c6e2d726174;  // the random inputs'
  int pairs = 9;                       // samples of each kernel, taken in pairs
  double sample_ms = 0.5;              // about how long one sample runs (1 to 1000 runs)
  CpuCompile compile;                  // how the two compile (CpuBackend::compile if empty)
};

// The time of `candidate` over the time of `reference`, two kernels of the same parameters that
// compute the same outputs (a kernel with run-time sizes at one size, and that size's own code):
// both compile with the default schedule, the candidate's outputs are checked against the
// reference's on seeded random inputs, and then the two run alternately, each first in every
// other pair. The median of the pairs' ratios. An error when the parameters differ, a kernel
// does not compile or run, or the outputs do not match.
Expected<double> cpu_time_ratio(codegen::CpuBackend& backend, const ParallelFor& parallel_for,
                                const kir::Kernel& candidate, const kir::Kernel& reference,
                                const TimeRatioOptions& options = {});

}  // namespace kiln::autotune
