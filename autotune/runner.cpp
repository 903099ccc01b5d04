// The cpu's CandidateBench: JIT-compiled candidates run over the caller's threads, timed by the
// wall clock.
#include "autotune/runner.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <exception>
#include <limits>
#include <memory>
#include <vector>

#include "support/host_memory.h"

namespace kiln::autotune {

namespace {

using Clock = std::chrono::steady_clock;

class CpuBench final : public CandidateBench {
 public:
  // Candidate i compiles kernels[i]: one kernel under several schedules, or several kernels of
  // the same parameters (cpu_time_ratio).
  CpuBench(codegen::CpuBackend& backend, const ParallelFor& pf,
           std::vector<const kir::Kernel*> kernels, const CpuCompile& compile)
      : backend_(backend),
        pf_(pf),
        compile_(compile),
        kernels_(std::move(kernels)),
        artifacts_(kernels_.size()) {}

  Expected<double> compile(size_t i, const codegen::TuneParams& params) override {
    auto art = compile_ ? compile_(*kernels_[i], params) : backend_.compile(*kernels_[i], params);
    if (!art) return std::unexpected(art.error());
    artifacts_[i] = std::move(*art);
    return artifacts_[i]->compile_ms;
  }
  bool concurrent_compile() const override { return true; }

  Expected<void> run(size_t i, KernelBuffers& bufs) override {
    std::vector<void*> ptrs;
    for (ir::HostTensor& b : bufs) ptrs.push_back(b.data());
    add_sizes(i, ptrs);
    return run_on(i, ptrs.data());
  }

  // Candidates are timed on buffers from the blocks the runtime's pool hands out (huge pages
  // for large ones), not on the host tensors' heap memory: on 4 KiB pages a 64 MiB layernorm ran
  // 1.7-1.8 ms instead of 1.25, and the schedule picked there was not the fastest in a plan.
  Expected<void> prepare_timing(const KernelBuffers& inputs, bool restore) override {
    inputs_ = &inputs;
    restore_ = restore;
    timing_.clear();
    std::vector<void*> buffers;
    for (const ir::HostTensor& t : inputs) {
      support::HostBlock block(t.bytes.size());
      if (!block.data())
        return make_error(fmt::format("out of memory: cannot allocate {} bytes to time kernel '{}'",
                                      t.bytes.size(), kernels_[0]->name));
      buffers.push_back(block.data());
      timing_.push_back(std::move(block));
    }
    timing_args_.assign(kernels_.size(), buffers);
    for (size_t i = 0; i < kernels_.size(); ++i) add_sizes(i, timing_args_[i]);
    restore_inputs();
    return {};
  }

  Expected<double> time(size_t i, int runs) override {
    if (restore_) restore_inputs();
    const auto start = Clock::now();
    for (int r = 0; r < runs; ++r)
      if (Expected<void> ok = run_on(i, timing_args_[i].data()); !ok)
        return std::unexpected(ok.error());
    return std::chrono::duration<double, std::milli>(Clock::now() - start).count() / runs;
  }

 private:
  codegen::CpuBackend& backend_;
  const ParallelFor& pf_;
  const CpuCompile& compile_;
  std::vector<const kir::Kernel*> kernels_;
  std::vector<std::shared_ptr<const codegen::CpuArtifact>> artifacts_;
  const KernelBuffers* inputs_ = nullptr;
  std::vector<support::HostBlock> timing_;
  std::vector<std::vector<void*>> timing_args_;  // per candidate: the timing buffers, its sizes
  bool restore_ = false;

  // A kernel with run-time sizes runs at its own instance's (ir/kernel_sizes.h), passed after
  // the buffers.
  void add_sizes(size_t i, std::vector<void*>& args) const {
    if (kernels_[i]->has_sizes()) args.push_back(const_cast<int64_t*>(kernels_[i]->sizes.data()));
  }

  // Cut as the device cuts it: in units of chunk_align points (CpuArtifact::units), over this
  // instance's range: code compiled for another instance of the same text (CpuCompile keeps
  // recent code by text) holds that instance's extent, and ran its rows here (a stale row count
  // left rows unwritten, or wrote past the buffers of a smaller instance).
  Expected<void> run_on(size_t i, void* const* args) {
    const codegen::CpuArtifact& code = *artifacts_[i];
    const kir::Kernel& k = *kernels_[i];
    const int64_t n = k.has_sizes()       ? codegen::CpuBackend::instance_range(code, k)
                      : code.dynamic_outer ? k.outer_extent()
                                           : code.outer_extent;
    try {
      const auto chunk = [&](int64_t begin, int64_t end) { code.run_units(args, begin, end, n); };
      if (pf_)
        pf_(code.units(n), chunk);
      else
        chunk(0, code.units(n));
    } catch (const std::exception& e) {
      return make_error(fmt::format("threw: {}", e.what()));
    }
    return {};
  }

  void restore_inputs() {
    for (size_t b = 0; b < timing_.size(); ++b)
      if (const auto& bytes = (*inputs_)[b].bytes; !bytes.empty())
        std::memcpy(timing_[b].data(), bytes.data(), bytes.size());
  }
};

}  // namespace

Expected<TuneDecision> tune_cpu_kernel(codegen::CpuBackend& backend,
                                       const ParallelFor& parallel_for, const kir::Kernel& kernel,
                                       Level level, double roofline_ms, const TuneOptions& options,
                                       const CpuCompile& compile) {
  const std::vector<TuneCandidate> space = cpu_tune_space(kernel, level, backend.llc_bytes());
  CpuBench bench(backend, parallel_for, std::vector<const kir::Kernel*>(space.size(), &kernel),
                 compile);
  return tune_kernel(bench, kernel, space, level, roofline_ms, parallel_for, options);
}

namespace {
// "f32[4,999], out f32[4,999]": each parameter, for the message of two kernels that do not match.
std::string params_text(const kir::Kernel& k) {
  std::string out;
  for (const kir::Param& p : k.params)
    out += fmt::format("{}{}{}[{}]", out.empty() ? "" : ", ", p.output ? "out " : "",
                       dtype_name(p.dtype), fmt::join(p.shape, ","));
  return out;
}

double median_of(std::vector<double> xs) {
  std::ranges::sort(xs);
  return xs[xs.size() / 2];
}
}  // namespace

Expected<double> cpu_time_ratio(codegen::CpuBackend& backend, const ParallelFor& parallel_for,
                                const kir::Kernel& candidate, const kir::Kernel& reference,
                                const TimeRatioOptions& options) {
  if (params_text(candidate) != params_text(reference))
    return make_error(fmt::format("kernel '{}' takes ({}), not the parameters of '{}' ({})",
                                  candidate.name, params_text(candidate), reference.name,
                                  params_text(reference)));
  CpuBench bench(backend, parallel_for, {&reference, &candidate}, options.compile);
  for (size_t i = 0; i < 2; ++i)
    if (Expected<double> ok = bench.compile(i, {}); !ok) return std::unexpected(ok.error());
  const KernelBuffers inputs = random_buffers(reference, options.seed);
  KernelBuffers want = inputs, got = inputs;
  if (Expected<void> ok = bench.run(0, want); !ok) return std::unexpected(ok.error());
  if (Expected<void> ok = bench.run(1, got); !ok) return std::unexpected(ok.error());
  if (std::optional<std::string> wrong = compare_outputs(reference, want, got))
    return make_error(fmt::format("kernel '{}' does not compute what '{}' does: {}", candidate.name,
                                  reference.name, *wrong));
  if (Expected<void> ok = bench.prepare_timing(inputs, reads_an_output(reference)); !ok)
    return std::unexpected(ok.error());
  // One run of each first (its code and data warm), then as many runs per sample as make it
  // about sample_ms long, counted from the faster of two more runs of each: a first run's page
  // faults, or a neighbour's time slice, made it seem many times longer, and the samples then
  // one run each, which a time slice on a loaded machine could reverse.
  double once = 0;
  for (size_t i = 0; i < 2; ++i) {
    double fastest = std::numeric_limits<double>::infinity();
    for (int r = 0; r < 3; ++r) {
      Expected<double> t = bench.time(i, 1);
      if (!t) return std::unexpected(t.error());
      if (r > 0) fastest = std::min(fastest, *t);
    }
    once = std::max(once, fastest);
  }
  const int runs = static_cast<int>(
      std::clamp(std::ceil(options.sample_ms / std::max(once, 1e-6)), 1.0, 1000.0));
  std::vector<double> ratios;
  for (int p = 0; p < options.pairs; ++p) {
    // The two alternate, each first in every other pair: neither gains by its place.
    double ms[2] = {0, 0};
    for (size_t k = 0; k < 2; ++k) {
      const size_t i = p % 2 ? 1 - k : k;
      Expected<double> t = bench.time(i, runs);
      if (!t) return std::unexpected(t.error());
      ms[i] = *t;
    }
    ratios.push_back(ms[1] / std::max(ms[0], 1e-9));
  }
  return median_of(std::move(ratios));
}

}  // namespace kiln::autotune
