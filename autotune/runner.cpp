// The cpu's CandidateBench: JIT-compiled candidates run over the caller's threads, timed by the
// wall clock.
#include "autotune/runner.h"

#include <fmt/format.h>

#include <chrono>
#include <exception>
#include <memory>

namespace kiln::autotune {

namespace {

using Clock = std::chrono::steady_clock;

class CpuBench final : public CandidateBench {
 public:
  CpuBench(codegen::CpuBackend& backend, const ParallelFor& pf, const kir::Kernel& k, size_t n)
      : backend_(backend), pf_(pf), k_(k), artifacts_(n) {}

  Expected<double> compile(size_t i, const codegen::TuneParams& params) override {
    auto art = backend_.compile(k_, params);
    if (!art) return std::unexpected(art.error());
    artifacts_[i] = std::move(*art);
    return artifacts_[i]->compile_ms;
  }
  bool concurrent_compile() const override { return true; }

  Expected<void> run(size_t i, KernelBuffers& bufs) override {
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

  Expected<void> prepare_timing(const KernelBuffers& inputs, bool restore) override {
    inputs_ = &inputs;
    timing_ = inputs;
    restore_ = restore;
    return {};
  }

  Expected<double> time(size_t i, int runs) override {
    if (restore_) timing_ = *inputs_;
    const auto start = Clock::now();
    for (int r = 0; r < runs; ++r)
      if (Expected<void> ok = run(i, timing_); !ok) return std::unexpected(ok.error());
    return std::chrono::duration<double, std::milli>(Clock::now() - start).count() / runs;
  }

 private:
  codegen::CpuBackend& backend_;
  const ParallelFor& pf_;
  const kir::Kernel& k_;
  std::vector<std::shared_ptr<const codegen::CpuArtifact>> artifacts_;
  const KernelBuffers* inputs_ = nullptr;
  KernelBuffers timing_;
  bool restore_ = false;
};

}  // namespace

Expected<TuneDecision> tune_cpu_kernel(codegen::CpuBackend& backend,
                                       const ParallelFor& parallel_for, const kir::Kernel& kernel,
                                       Level level, double roofline_ms,
                                       const TuneOptions& options) {
  const std::vector<TuneCandidate> space = cpu_tune_space(kernel, level);
  CpuBench bench(backend, parallel_for, kernel, space.size());
  return tune_kernel(bench, kernel, space, level, roofline_ms, parallel_for, options);
}

}  // namespace kiln::autotune
