// Tunes one kernel on the cpu backend: compiles the level's candidates, checks each one's outputs
// against the default candidate's on seeded random inputs, then times the valid ones with the
// sampler and scores them (DESIGN.md §9). A failing candidate is disqualified, never fatal.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "autotune/kernel_buffers.h"
#include "autotune/tune_decision.h"
#include "autotune/tune_level.h"
#include "codegen/cpu/cpu_backend.h"
#include "ir/error.h"
#include "ir/kernel_ir.h"

namespace kiln::autotune {

// Runs chunk(begin, end) over [0, n), possibly split over threads, and returns when all chunks
// are done: the runtime passes its ThreadPool here (this library does not link the runtime).
// An empty function runs everything on the calling thread.
using ParallelFor =
    std::function<void(int64_t n, const std::function<void(int64_t begin, int64_t end)>& chunk)>;

// For tests: ways to make a candidate wrong on purpose.
struct TuneHooks {
  // Called before compiling candidate i; a message fails that compile with it.
  std::function<std::optional<std::string>(size_t candidate)> fail_compile;
  // Called on candidate i's buffers after its checked run, before the comparison.
  std::function<void(size_t candidate, KernelBuffers& buffers)> after_check_run;
};

struct TuneOptions {
  uint64_t seed = 0x6b696c6e2d617574;  // the random inputs'
  TuneHooks hooks;
};

// The space is cpu_tune_space(kernel, level); the timings and stops come from settings(level).
// `roofline_ms` <= 0: no early stop at the roofline (roofline.h computes one). Errors only when
// the default candidate (TuneParams{}) itself cannot compile or run: there is nothing to check
// the others against, and the kernel would not run untuned either.
Expected<TuneDecision> tune_cpu_kernel(codegen::CpuBackend& backend,
                                       const ParallelFor& parallel_for, const kir::Kernel& kernel,
                                       Level level, double roofline_ms,
                                       const TuneOptions& options = {});

}  // namespace kiln::autotune
