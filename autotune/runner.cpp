// The cpu tuning runner: compile, check against the default, time with the sampler, score.
#include "autotune/runner.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <exception>
#include <memory>

#include "autotune/sampler.h"
#include "autotune/scorer.h"
#include "autotune/tune_space.h"

namespace kiln::autotune {

namespace {

using Artifact = std::shared_ptr<const codegen::CpuArtifact>;
using Clock = std::chrono::steady_clock;

double ms_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

// Whether a kernel loads from one of its outputs: then every timed run starts from the inputs.
bool reads_an_output(const kir::Kernel& k) {
  for (const kir::Expr* e : kir::kernel_exprs(k))
    if (e->kind == kir::ExprKind::Load && k.params[static_cast<size_t>(e->buf)].output) return true;
  return false;
}

class CpuTuner {
 public:
  CpuTuner(codegen::CpuBackend& backend, const ParallelFor& pf, const kir::Kernel& k, Level level,
           double roofline_ms, const TuneOptions& opt)
      : backend_(backend), pf_(pf), k_(k), settings_(settings(level)), opt_(opt) {
    d_.level = level;
    d_.roofline_ms = roofline_ms;
    for (TuneCandidate& c : cpu_tune_space(k, level)) {
      CandidateResult r;
      r.params = c.params;
      r.group = std::move(c.group);
      r.priority = c.priority;
      d_.candidates.push_back(std::move(r));
    }
    artifacts_.resize(d_.candidates.size());
    inputs_ = random_buffers(k, opt.seed);
  }

  Expected<TuneDecision> run() {
    compile_all();
    if (!artifacts_[0])
      return make_error(
          fmt::format("autotune: the default candidate of kernel '{}' does not "
                      "compile: {}",
                      k_.name, d_.candidates[0].reason));
    if (Expected<void> ok = check_all(); !ok) return std::unexpected(ok.error());
    if (Expected<void> ok = calibrate(); !ok) return std::unexpected(ok.error());
    return time_all();
  }

 private:
  void disqualify(size_t i, std::string reason) {
    d_.candidates[i].status = CandidateStatus::disqualified;
    d_.candidates[i].reason = std::move(reason);
  }

  void compile_all() {
    for (size_t i = 0; i < d_.candidates.size(); ++i) {
      if (opt_.hooks.fail_compile)
        if (std::optional<std::string> bad = opt_.hooks.fail_compile(i)) {
          disqualify(i, "compile failed: " + *bad);
          continue;
        }
      auto art = backend_.compile(k_, d_.candidates[i].params);
      if (!art) {
        disqualify(i, "compile failed: " + art.error().message);
        continue;
      }
      d_.candidates[i].compile_ms = (*art)->compile_ms;
      artifacts_[i] = std::move(*art);
    }
  }

  // One run of candidate i over the whole domain on `bufs`.
  Expected<void> run_once(size_t i, KernelBuffers& bufs) {
    std::vector<void*> ptrs;
    for (ir::HostTensor& b : bufs) ptrs.push_back(b.data());
    const codegen::CpuKernelFn fn = artifacts_[i]->fn;
    void* const* args = ptrs.data();
    try {
      const auto chunk = [&](int64_t begin, int64_t end) { fn(args, begin, end); };
      if (pf_)
        pf_(artifacts_[i]->outer_extent, chunk);
      else
        chunk(0, artifacts_[i]->outer_extent);
    } catch (const std::exception& e) {
      return make_error(fmt::format("threw: {}", e.what()));
    }
    return {};
  }

  // Runs candidate i on a copy of the inputs; its buffers after the run.
  Expected<KernelBuffers> checked_run(size_t i) {
    KernelBuffers bufs = inputs_;
    if (Expected<void> ok = run_once(i, bufs); !ok) return std::unexpected(ok.error());
    if (opt_.hooks.after_check_run) opt_.hooks.after_check_run(i, bufs);
    return bufs;
  }

  // The default runs twice (the reference must be reproducible), every other candidate once.
  Expected<void> check_all() {
    Expected<KernelBuffers> ref = checked_run(0), again = checked_run(0);
    if (!ref || !again)
      return make_error(fmt::format("autotune: the default candidate of kernel '{}' failed: {}",
                                    k_.name, (!ref ? ref : again).error().message));
    if (std::optional<std::string> bad = compare_outputs(k_, *ref, *again))
      return make_error(fmt::format(
          "autotune: the default candidate of kernel '{}' gives different outputs on the same "
          "inputs: {}",
          k_.name, *bad));
    d_.candidates[0].output_checked = true;
    for (size_t i = 1; i < d_.candidates.size(); ++i) {
      if (!artifacts_[i]) continue;
      Expected<KernelBuffers> got = checked_run(i);
      if (!got)
        disqualify(i, "run failed: " + got.error().message);
      else if (std::optional<std::string> bad = compare_outputs(k_, *ref, *got))
        disqualify(i, "wrong output: " + *bad);
      else
        d_.candidates[i].output_checked = true;
    }
    return {};
  }

  // Runs per sample: enough default runs to last about settings_.min_sample_ms, timed on the
  // second run (the first touches the fresh timing buffers' pages).
  Expected<void> calibrate() {
    timing_ = inputs_;
    auto start = Clock::now();
    for (int run = 0; run < 2; ++run) {
      start = Clock::now();
      if (Expected<void> ok = run_once(0, timing_); !ok)
        return make_error(fmt::format("autotune: the default candidate of kernel '{}' failed: {}",
                                      k_.name, ok.error().message));
    }
    const double one = std::max(ms_between(start, Clock::now()), 1e-6);
    d_.runs_per_sample =
        static_cast<int>(std::clamp(std::ceil(settings_.min_sample_ms / one), 1.0, 10000.0));
    return {};
  }

  Expected<double> measure(size_t i) {
    if (restore_) timing_ = inputs_;
    const auto start = Clock::now();
    for (int r = 0; r < d_.runs_per_sample; ++r)
      if (Expected<void> ok = run_once(i, timing_); !ok) return std::unexpected(ok.error());
    return ms_between(start, Clock::now()) / d_.runs_per_sample;
  }

  Expected<TuneDecision> time_all() {
    restore_ = reads_an_output(k_);
    std::vector<size_t> valid;
    for (size_t i = 0; i < d_.candidates.size(); ++i)
      if (d_.candidates[i].status == CandidateStatus::ok) valid.push_back(i);
    const SampleResult r = sample_candidates(
        static_cast<int>(valid.size()),
        [&](int v) { return measure(valid[static_cast<size_t>(v)]); }, settings_.sampler,
        d_.roofline_ms);
    for (size_t v = 0; v < valid.size(); ++v) {
      CandidateResult& c = d_.candidates[valid[v]];
      c.samples = r.candidates[v].samples;
      c.status = r.candidates[v].status;
      c.reason = r.candidates[v].reason.empty() ? c.reason : r.candidates[v].reason;
    }
    for (CandidateResult& c : d_.candidates) c.score = score(c.samples);
    d_.stop_reason = std::string(stop_reason_name(r.stop));
    if (r.winner < 0)
      return make_error(fmt::format("autotune: no candidate of kernel '{}' could be timed: {}",
                                    k_.name, d_.candidates[0].reason));
    d_.winner_index = static_cast<int>(valid[static_cast<size_t>(r.winner)]);
    d_.winner = d_.candidates[static_cast<size_t>(d_.winner_index)].params;
    return std::move(d_);
  }

  codegen::CpuBackend& backend_;
  const ParallelFor& pf_;
  const kir::Kernel& k_;
  const LevelSettings settings_;
  const TuneOptions& opt_;
  TuneDecision d_;
  std::vector<Artifact> artifacts_;
  KernelBuffers inputs_, timing_;
  bool restore_ = false;
};

}  // namespace

Expected<TuneDecision> tune_cpu_kernel(codegen::CpuBackend& backend,
                                       const ParallelFor& parallel_for, const kir::Kernel& kernel,
                                       Level level, double roofline_ms,
                                       const TuneOptions& options) {
  return CpuTuner(backend, parallel_for, kernel, level, roofline_ms, options).run();
}

}  // namespace kiln::autotune
