// Tunes one kernel on the cpu backend: the cpu's CandidateBench for the shared tuning loop
// (autotune/tune_loop.h) over cpu_tune_space(kernel, level).
#pragma once

#include "autotune/tune_loop.h"
#include "codegen/cpu/cpu_backend.h"

namespace kiln::autotune {

// Candidates compile at once over `parallel_for` (CpuBackend::compile is thread-safe) and run
// over it too, like the cpu device runs kernels.
Expected<TuneDecision> tune_cpu_kernel(codegen::CpuBackend& backend,
                                       const ParallelFor& parallel_for, const kir::Kernel& kernel,
                                       Level level, double roofline_ms,
                                       const TuneOptions& options = {});

}  // namespace kiln::autotune
