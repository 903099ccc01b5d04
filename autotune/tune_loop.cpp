// The tuning loop: compile, check against the default, calibrate, time with the sampler, score.
#include "autotune/tune_loop.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <exception>
#include <new>

#include "autotune/kernel_buffers.h"
#include "autotune/sampler.h"
#include "autotune/scorer.h"

namespace kiln::autotune {

namespace {

class TuneLoop {
 public:
  TuneLoop(CandidateBench& bench, const kir::Kernel& k, const std::vector<TuneCandidate>& space,
           Level level, double roofline_ms, const ParallelFor& pf, const TuneOptions& opt)
      : bench_(bench), k_(k), settings_(settings(level)), pf_(pf), opt_(opt) {
    d_.level = level;
    d_.roofline_ms = roofline_ms;
    for (const TuneCandidate& c : space) {
      CandidateResult r;
      r.params = c.params;
      r.group = c.group;
      r.priority = c.priority;
      d_.candidates.push_back(std::move(r));
    }
    compiled_.assign(d_.candidates.size(), 0);
    inputs_ = random_buffers(k, opt.seed);
  }

  Expected<TuneDecision> run() {
    if (d_.candidates.empty() || !(d_.candidates[0].params == codegen::TuneParams{}))
      return make_error(fmt::format(
          "autotune: the tuning space of kernel '{}' does not start with the default", k_.name));
    compile_all();
    if (!compiled_[0])
      return make_error(fmt::format("autotune: the default candidate of kernel '{}' does not compile: {}",
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

  // Candidate i's compile; writes only its own slots, so candidates may compile at once.
  void compile_one(size_t i) {
    Expected<double> ms = std::unexpected(Error{});
    try {
      if (opt_.hooks.fail_compile)
        if (std::optional<std::string> bad = opt_.hooks.fail_compile(i)) {
          disqualify(i, "compile failed: " + *bad);
          return;
        }
      ms = bench_.compile(i, d_.candidates[i].params);
    } catch (const std::exception& e) {
      ms = make_error(fmt::format("threw: {}", e.what()));
    }
    if (!ms) {
      disqualify(i, "compile failed: " + ms.error().message);
      return;
    }
    d_.candidates[i].compile_ms = *ms;
    compiled_[i] = 1;
  }

  void compile_all() {
    const auto n = static_cast<int64_t>(d_.candidates.size());
    const auto chunk = [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) compile_one(static_cast<size_t>(i));
    };
    if (!pf_ || !bench_.concurrent_compile()) {
      chunk(0, n);
      return;
    }
    try {
      pf_(n, chunk);
    } catch (const std::exception&) {
      // The threads failed, not a candidate: compile what is left here.
      for (size_t i = 0; i < d_.candidates.size(); ++i)
        if (!compiled_[i] && d_.candidates[i].status == CandidateStatus::ok) compile_one(i);
    }
  }

  Expected<void> run_guarded(size_t i, KernelBuffers& bufs) {
    try {
      return bench_.run(i, bufs);
    } catch (const std::exception& e) {
      return make_error(fmt::format("threw: {}", e.what()));
    }
  }

  // Runs candidate i on the inputs, its outputs first set back to theirs. Every candidate runs
  // in the same buffers, and only outputs are copied: a fresh copy of every buffer per candidate
  // (page faults on each page) took most of a first run's tuning (ew_chain's 256 MiB: 0.6-1 s
  // per candidate on a virtual machine). A kernel writes its outputs only.
  Expected<void> checked_run(size_t i) {
    restore_outputs();
    if (Expected<void> ok = run_guarded(i, inputs_); !ok) return ok;
    if (opt_.hooks.after_check_run) opt_.hooks.after_check_run(i, inputs_);
    return {};
  }

  void restore_outputs() {
    for (size_t b = 0; b < initial_.size(); ++b)
      if (k_.params[b].output)
        std::copy(initial_[b].bytes.begin(), initial_[b].bytes.end(), inputs_[b].bytes.begin());
  }

  // The default runs twice (the reference must be reproducible), every other candidate once.
  Expected<void> check_all() {
    initial_ = copy_outputs(k_, inputs_);
    KernelBuffers ref;
    Expected<void> ran = checked_run(0);
    if (ran) {
      ref = copy_outputs(k_, inputs_);
      ran = checked_run(0);
    }
    if (!ran)
      return make_error(fmt::format("autotune: the default candidate of kernel '{}' failed: {}",
                                    k_.name, ran.error().message));
    if (std::optional<std::string> bad = compare_outputs(k_, ref, inputs_))
      return make_error(fmt::format(
          "autotune: the default candidate of kernel '{}' gives different outputs on the same "
          "inputs: {}",
          k_.name, *bad));
    d_.candidates[0].output_checked = true;
    for (size_t i = 1; i < d_.candidates.size(); ++i) {
      if (!compiled_[i]) continue;
      if (Expected<void> ok = checked_run(i); !ok)
        disqualify(i, "run failed: " + ok.error().message);
      else if (std::optional<std::string> bad = compare_outputs(k_, ref, inputs_))
        disqualify(i, "wrong output: " + *bad);
      else
        d_.candidates[i].output_checked = true;
    }
    restore_outputs();  // the timed runs start from the inputs
    return {};
  }

  Expected<double> time_guarded(size_t i, int runs) {
    try {
      return bench_.time(i, runs);
    } catch (const std::exception& e) {
      return make_error(fmt::format("threw: {}", e.what()));
    }
  }

  // Runs per sample: enough default runs to last about settings_.min_sample_ms, from the second
  // timing (the first touches fresh buffers).
  Expected<void> calibrate() {
    if (Expected<void> ok = bench_.prepare_timing(inputs_, reads_an_output(k_)); !ok)
      return make_error(fmt::format("autotune: preparing to time kernel '{}': {}", k_.name,
                                    ok.error().message));
    Expected<double> one = time_guarded(0, 1);
    if (one) one = time_guarded(0, 1);
    if (!one)
      return make_error(fmt::format("autotune: the default candidate of kernel '{}' failed: {}",
                                    k_.name, one.error().message));
    d_.runs_per_sample = static_cast<int>(
        std::clamp(std::ceil(settings_.min_sample_ms / std::max(*one, 1e-6)), 1.0, 10000.0));
    return {};
  }

  Expected<TuneDecision> time_all() {
    std::vector<size_t> valid;
    for (size_t i = 0; i < d_.candidates.size(); ++i)
      if (d_.candidates[i].status == CandidateStatus::ok) valid.push_back(i);
    const SampleResult r = sample_candidates(
        static_cast<int>(valid.size()),
        [&](int v) { return time_guarded(valid[static_cast<size_t>(v)], d_.runs_per_sample); },
        settings_.sampler, d_.roofline_ms);
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
    keep_default_unless_clearly_beaten();
    d_.winner = d_.candidates[static_cast<size_t>(d_.winner_index)].params;
    return std::move(d_);
  }

  // A winner whose score beats the default's by less than settings_.min_gain gives way to the
  // default (still timed, not dropped): the gain is within microbenchmark noise.
  void keep_default_unless_clearly_beaten() {
    const CandidateResult& def = d_.candidates[0];
    const CandidateResult& won = d_.candidates[static_cast<size_t>(d_.winner_index)];
    if (d_.winner_index == 0 || def.status != CandidateStatus::ok || def.samples.empty()) return;
    const double gain = 1 - won.score / def.score;
    if (gain >= settings_.min_gain) return;
    d_.stop_reason += fmt::format("; kept the default: #{} was {:.1f}% faster (< {:.0f}%)",
                                  d_.winner_index, 100 * gain, 100 * settings_.min_gain);
    d_.winner_index = 0;
  }

  CandidateBench& bench_;
  const kir::Kernel& k_;
  const LevelSettings settings_;
  const ParallelFor& pf_;
  const TuneOptions& opt_;
  TuneDecision d_;
  std::vector<char> compiled_;  // not vector<bool>: candidates set their own slot concurrently
  KernelBuffers inputs_;        // every parameter; the candidates' checked runs write its outputs
  KernelBuffers initial_;       // the outputs' bytes before any run
};

}  // namespace

bool reads_an_output(const kir::Kernel& k) {
  for (const kir::Expr* e : kir::kernel_exprs(k))
    if (e->kind == kir::ExprKind::Load && k.params[static_cast<size_t>(e->buf)].output) return true;
  return false;
}

Expected<TuneDecision> tune_kernel(CandidateBench& bench, const kir::Kernel& kernel,
                                   const std::vector<TuneCandidate>& space, Level level,
                                   double roofline_ms, const ParallelFor& parallel_for,
                                   const TuneOptions& options) {
  if (!fits_on_host(kernel))
    return make_error(fmt::format("autotune: kernel '{}' needs {:.0f} bytes of host buffers to be "
                                  "benchmarked, more than the host holds",
                                  kernel.name, benchmark_bytes(kernel)));
  try {
    return TuneLoop(bench, kernel, space, level, roofline_ms, parallel_for, options).run();
  } catch (const std::bad_alloc&) {
    return make_error(fmt::format("autotune: out of host memory benchmarking kernel '{}'", kernel.name));
  }
}

}  // namespace kiln::autotune
