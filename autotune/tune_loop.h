// The tuning loop every target shares (DESIGN.md §9): compile the candidates of a tuning space
// (in parallel where the target allows), check each one's outputs against the default
// candidate's on seeded random inputs, then time the valid ones with the sampler and score them.
// A failing candidate is disqualified with its reason, never fatal. A target plugs in as a
// CandidateBench: the cpu (autotune/runner.h) and the GPU devices (runtime/gpu_tuner.h).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "autotune/kernel_buffers.h"
#include "autotune/tune_decision.h"
#include "autotune/tune_level.h"
#include "autotune/tune_space.h"
#include "codegen/tune_params.h"
#include "ir/kernel_ir.h"
#include "kiln/error.h"

namespace kiln::autotune {

// Runs chunk(begin, end) over [0, n), possibly split over threads, and returns when all chunks
// are done: the runtime passes its ThreadPool here (this library does not link the runtime).
// An empty function runs everything on the calling thread.
using ParallelFor =
    std::function<void(int64_t n, const std::function<void(int64_t begin, int64_t end)>& chunk)>;

// For tests: ways to make a candidate wrong on purpose.
struct TuneHooks {
  // Called before compiling candidate i, possibly on several threads at once (so it must be
  // thread-safe); a message fails that compile with it.
  std::function<std::optional<std::string>(size_t candidate)> fail_compile;
  // Called on candidate i's buffers after its checked run, before the comparison.
  std::function<void(size_t candidate, KernelBuffers& buffers)> after_check_run;
};

struct TuneOptions {
  uint64_t seed = 0x6b696c6e2d617574;  // the random inputs'
  TuneHooks hooks;
};

// What a target gives the loop. Candidates are numbered as in the space; the default is 0.
class CandidateBench {
 public:
  virtual ~CandidateBench() = default;
  // Compiles candidate i; returns its compile time in ms. Called once per candidate before any
  // run, from several threads at once when concurrent_compile() says so.
  virtual Expected<double> compile(size_t i, const codegen::TuneParams& params) = 0;
  virtual bool concurrent_compile() const = 0;
  // One run of compiled candidate i with `buffers` as its parameters: inputs in, outputs out.
  virtual Expected<void> run(size_t i, KernelBuffers& buffers) = 0;
  // Before timing: every timed run starts from `inputs` (restored before each sample when
  // `restore` is set, because the kernel reads one of its outputs).
  virtual Expected<void> prepare_timing(const KernelBuffers& inputs, bool restore) = 0;
  // The mean ms per run of `runs` back-to-back runs of candidate i (one sample).
  virtual Expected<double> time(size_t i, int runs) = 0;
};

// Tunes `kernel` over `space` (its first candidate must be the default, TuneParams{}); timings and
// stops come from settings(level). `roofline_ms` <= 0: no early stop at the roofline (roofline.h
// computes one). Errors only when the default candidate itself cannot compile or run: there is
// nothing to check the others against, and the kernel would not run untuned either.
Expected<TuneDecision> tune_kernel(CandidateBench& bench, const kir::Kernel& kernel,
                                   const std::vector<TuneCandidate>& space, Level level,
                                   double roofline_ms, const ParallelFor& parallel_for,
                                   const TuneOptions& options = {});

// Whether a kernel loads from one of its outputs: then every timed run starts from the inputs.
bool reads_an_output(const kir::Kernel& kernel);

}  // namespace kiln::autotune
