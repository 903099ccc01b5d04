// The cpu's CandidateBench: JIT-compiled candidates run over the caller's threads, timed by the
// wall clock.
#include "autotune/runner.h"

#include <fmt/format.h>

#include <chrono>
#include <cstring>
#include <exception>
#include <memory>
#include <vector>

#include "support/host_memory.h"

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
    if (k_.has_sizes()) ptrs.push_back(const_cast<int64_t*>(k_.sizes.data()));  // after the buffers
    return run_on(i, ptrs.data());
  }

  // Candidates are timed on buffers from the blocks the runtime's pool hands out (huge pages
  // for large ones), not on the host tensors' heap memory: on 4 KiB pages a 64 MiB layernorm ran
  // 1.7-1.8 ms instead of 1.25, and the schedule picked there was not the fastest in a plan.
  Expected<void> prepare_timing(const KernelBuffers& inputs, bool restore) override {
    inputs_ = &inputs;
    restore_ = restore;
    timing_.clear();
    timing_ptrs_.clear();
    for (const ir::HostTensor& t : inputs) {
      support::HostBlock block(t.bytes.size());
      if (!block.data())
        return make_error(fmt::format("out of memory: cannot allocate {} bytes to time kernel '{}'",
                                      t.bytes.size(), k_.name));
      timing_ptrs_.push_back(block.data());
      timing_.push_back(std::move(block));
    }
    // A kernel with run-time sizes runs at its own instance's (ir/kernel_sizes.h).
    if (k_.has_sizes()) timing_ptrs_.push_back(const_cast<int64_t*>(k_.sizes.data()));
    restore_inputs();
    return {};
  }

  Expected<double> time(size_t i, int runs) override {
    if (restore_) restore_inputs();
    const auto start = Clock::now();
    for (int r = 0; r < runs; ++r)
      if (Expected<void> ok = run_on(i, timing_ptrs_.data()); !ok)
        return std::unexpected(ok.error());
    return std::chrono::duration<double, std::milli>(Clock::now() - start).count() / runs;
  }

 private:
  codegen::CpuBackend& backend_;
  const ParallelFor& pf_;
  const kir::Kernel& k_;
  std::vector<std::shared_ptr<const codegen::CpuArtifact>> artifacts_;
  const KernelBuffers* inputs_ = nullptr;
  std::vector<support::HostBlock> timing_;
  std::vector<void*> timing_ptrs_;
  bool restore_ = false;

  // Cut as the device cuts it: in units of chunk_align points (CpuArtifact::units).
  Expected<void> run_on(size_t i, void* const* args) {
    const codegen::CpuArtifact& code = *artifacts_[i];
    const int64_t n = code.outer_extent;
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
                                       Level level, double roofline_ms,
                                       const TuneOptions& options) {
  const std::vector<TuneCandidate> space = cpu_tune_space(kernel, level);
  CpuBench bench(backend, parallel_for, kernel, space.size());
  return tune_kernel(bench, kernel, space, level, roofline_ms, parallel_for, options);
}

}  // namespace kiln::autotune
