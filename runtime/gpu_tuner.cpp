// The GPU's CandidateBench and the GPU rate measurement.
#include "runtime/gpu_tuner.h"

#include <fmt/format.h>

#include <algorithm>
#include <functional>
#include <numeric>
#include <thread>

#include "runtime/gpu_target.h"
#include "runtime/measured_rates.h"

namespace kiln::runtime {

namespace {

using codegen::gpu::GpuSource;


class GpuBench final : public autotune::CandidateBench {
 public:
  GpuBench(GpuBackend& backend, const kir::Kernel& k, size_t n, bool tensor_cores)
      : backend_(backend), k_(k), tensor_cores_(tensor_cores), sources_(n), binaries_(n),
        programs_(n) {}

  Expected<double> compile(size_t i, const codegen::TuneParams& params) override {
    const auto start = std::chrono::steady_clock::now();
    // The default gives way to a schedule within the device's loop budget as it does untuned
    // (gpu_target.h); another candidate over it fails in compile(), and is disqualified.
    auto src = emit_for_device(backend_, k_, params, codegen::CheckMode::none, nullptr, tensor_cores_);
    if (!src) return std::unexpected(src.error());
    auto bin = backend_.compile(*src, k_.name);
    if (!bin) return std::unexpected(bin.error());
    sources_[i] = std::move(*src);
    binaries_[i] = std::move(*bin);
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  }
  bool concurrent_compile() const override { return true; }

  Expected<void> run(size_t i, autotune::KernelBuffers& bufs) override {
    auto program = program_for(i);
    if (!program) return std::unexpected(program.error());
    auto mems = upload(bufs);
    if (!mems) return std::unexpected(mems.error());
    auto scratch = make_scratch(backend_, *stream_, sources_[i]);
    if (!scratch) return std::unexpected(scratch.error());
    if (*scratch) mems->push_back(std::move(*scratch));
    if (auto ok = stream_->launch(**program, args_of(*mems), false, outer()); !ok) return ok;
    for (size_t p = 0; p < bufs.size(); ++p)
      if (k_.params[p].output && !bufs[p].bytes.empty())
        if (auto ok = stream_->download(*(*mems)[p], bufs[p].data(), bufs[p].bytes.size()); !ok) return ok;
    return stream_->synchronize();
  }

  Expected<void> prepare_timing(const autotune::KernelBuffers& inputs, bool restore) override {
    inputs_ = &inputs;
    restore_ = restore;
    auto mems = upload(inputs);
    if (!mems) return std::unexpected(mems.error());
    timing_ = std::move(*mems);
    return stream_->synchronize();
  }

  Expected<double> time(size_t i, int runs) override {
    auto program = program_for(i);
    if (!program) return std::unexpected(program.error());
    std::vector<DeviceMemory*> args = args_of(timing_);
    // Split reductions leave their counters zero after each launch: one scratch serves every run.
    auto scratch = make_scratch(backend_, *stream_, sources_[i]);
    if (!scratch) return std::unexpected(scratch.error());
    if (*scratch) args.push_back(scratch->get());
    for (int r = 0; r < runs; ++r) {
      if (restore_)  // not timed: launch times cover the kernel only
        for (size_t p = 0; p < inputs_->size(); ++p)
          if (auto ok = stream_->upload(*timing_[p], (*inputs_)[p].data(), (*inputs_)[p].bytes.size()); !ok)
            return std::unexpected(ok.error());
      if (auto ok = stream_->launch(**program, args, /*timed=*/true, outer()); !ok)
        return std::unexpected(ok.error());
    }
    if (auto ok = stream_->synchronize(); !ok) return std::unexpected(ok.error());
    const std::vector<double> times = stream_->launch_times_ms();
    if (times.size() != static_cast<size_t>(runs))
      return make_error(fmt::format("{} timed launches gave {} times", runs, times.size()));
    return std::accumulate(times.begin(), times.end(), 0.0) / runs;
  }

 private:
  // A dynamic kernel's candidates run at its extent.
  std::optional<int64_t> outer() const {
    return k_.dynamic_outer ? std::optional<int64_t>(k_.outer_extent()) : std::nullopt;
  }
  // Loaded on first use, on the tuning thread (loading is not required to be thread-safe).
  Expected<std::shared_ptr<const GpuProgram>> program_for(size_t i) {
    if (!programs_[i]) {
      auto loaded = backend_.load(sources_[i], binaries_[i]);
      if (!loaded) return std::unexpected(loaded.error());
      programs_[i] = std::move(*loaded);
    }
    if (!stream_) {
      auto s = backend_.create_stream();
      if (!s) return std::unexpected(s.error());
      stream_ = std::move(*s);
    }
    return programs_[i];
  }

  Expected<std::vector<std::shared_ptr<DeviceMemory>>> upload(const autotune::KernelBuffers& bufs) {
    std::vector<std::shared_ptr<DeviceMemory>> mems;
    for (const ir::HostTensor& b : bufs) {
      auto mem = backend_.allocate(device_alloc_bytes(b.bytes.size()));
      if (!mem) return std::unexpected(mem.error());
      if (!b.bytes.empty())
        if (auto ok = stream_->upload(**mem, b.data(), b.bytes.size()); !ok) return std::unexpected(ok.error());
      mems.push_back(std::move(*mem));
    }
    return mems;
  }

  static std::vector<DeviceMemory*> args_of(const std::vector<std::shared_ptr<DeviceMemory>>& mems) {
    std::vector<DeviceMemory*> args;
    for (const auto& m : mems) args.push_back(m.get());
    return args;
  }

  GpuBackend& backend_;
  const kir::Kernel& k_;
  bool tensor_cores_;
  std::vector<GpuSource> sources_;
  std::vector<std::vector<uint8_t>> binaries_;
  std::vector<std::shared_ptr<const GpuProgram>> programs_;
  std::unique_ptr<GpuStream> stream_;
  std::vector<std::shared_ptr<DeviceMemory>> timing_;
  const autotune::KernelBuffers* inputs_ = nullptr;
  bool restore_ = false;
};

// The median seconds of `runs` timed launches of `k` (x filled with 1.0f), after one warm-up.
Expected<double> time_on_device(GpuBackend& backend, const kir::Kernel& k, int runs) {
  auto src = codegen::gpu::emit_source(k, {}, backend.dialect());
  if (!src) return std::unexpected(src.error());
  auto bin = backend.compile(*src, k.name);
  if (!bin) return std::unexpected(bin.error());
  auto program = backend.load(*src, *bin);
  if (!program) return std::unexpected(program.error());
  auto stream = backend.create_stream();
  if (!stream) return std::unexpected(stream.error());
  const size_t bytes = device_alloc_bytes(static_cast<size_t>(k.params[0].shape[0]) * 4);
  auto x = backend.allocate(bytes), y = backend.allocate(bytes);
  if (!x || !y) return std::unexpected((!x ? x : y).error());
  const std::vector<float> ones(bytes / 4, 1.0f);
  if (auto ok = (*stream)->upload(**x, ones.data(), bytes); !ok) return std::unexpected(ok.error());
  for (int r = 0; r <= runs; ++r)
    if (auto ok = (*stream)->launch(**program, {x->get(), y->get()}, /*timed=*/true); !ok)
      return std::unexpected(ok.error());
  if (auto ok = (*stream)->synchronize(); !ok) return std::unexpected(ok.error());
  std::vector<double> ms = (*stream)->launch_times_ms();
  if (ms.size() != static_cast<size_t>(runs) + 1)
    return make_error(fmt::format("{} timed launches gave {} times", runs + 1, ms.size()));
  ms.erase(ms.begin());  // the warm-up
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2] / 1e3;
}

}  // namespace

autotune::ParallelFor thread_parallel_for(int threads) {
  return [threads](int64_t n, const std::function<void(int64_t, int64_t)>& chunk) {
    const int64_t parts = std::clamp<int64_t>(threads, 1, std::max<int64_t>(n, 1));
    std::vector<std::thread> pool;
    for (int64_t t = 1; t < parts; ++t)
      pool.emplace_back([&, t] { chunk(n * t / parts, n * (t + 1) / parts); });
    chunk(0, n / parts);
    for (std::thread& th : pool) th.join();
  };
}

Expected<autotune::TuneDecision> tune_gpu_kernel(GpuBackend& backend, const kir::Kernel& kernel,
                                                 autotune::Level level, double roofline_ms,
                                                 int compile_threads,
                                                 const autotune::TuneOptions& options,
                                                 bool tensor_cores) {
  const std::vector<autotune::TuneCandidate> space =
      autotune::gpu_tune_space(kernel, level, tensor_cores);
  GpuBench bench(backend, kernel, space.size(), tensor_cores);
  return autotune::tune_kernel(bench, kernel, space, level, roofline_ms,
                               thread_parallel_for(compile_threads), options);
}

Expected<passes::DeviceRates> measure_gpu_rates(GpuBackend& backend) {
  // 128 MiB streamed; the chain over 4 Mi elements (512 Mi flops: well above launch overhead).
  const RateSizes sizes{.stream = int64_t{16} << 20, .compute = int64_t{4} << 20};
  return measure_rates([&](const kir::Kernel& k, int runs, bool) { return time_on_device(backend, k, runs); },
                       sizes);
}

}  // namespace kiln::runtime
