// The cpu's rates: the rate kernels (runtime/measured_rates.h) JIT-compiled and run over the
// thread pool, each the median of a few runs after warm-up runs.
#include "runtime/cpu_rates.h"

#include <algorithm>
#include <chrono>
#include <fmt/format.h>
#include <functional>

#include "runtime/buffer.h"
#include "runtime/cpu_target.h"
#include "runtime/measured_rates.h"
#include "support/warm_up.h"

namespace kiln::runtime {

namespace {
using ir::DType;

double median_seconds(int runs, const std::function<void()>& fn) {
  std::vector<double> t;
  for (int r = 0; r < runs; ++r) {
    auto t0 = std::chrono::steady_clock::now();
    fn();
    t.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

Expected<double> time_on_cpu(codegen::CpuBackend& backend, support::ThreadPool& threads,
                             const kir::Kernel& k, int runs, bool one_core) {
  auto art = backend.compile(k, {});
  if (!art) return std::unexpected(art.error());
  std::shared_ptr<BufferPool> pool = BufferPool::create();
  auto made_x = pool->allocate(DType::f32, k.params[0].shape, "the rate probe's input");
  if (!made_x) return std::unexpected(made_x.error());
  auto made_y = pool->allocate(DType::f32, k.params[1].shape, "the rate probe's output");
  if (!made_y) return std::unexpected(made_y.error());
  const std::shared_ptr<Buffer>& x = *made_x;
  const std::shared_ptr<Buffer>& y = *made_y;
  std::fill_n(reinterpret_cast<float*>(x->data()), x->numel(), 1.0f);
  void* bufs[] = {x->data(), y->data()};
  const codegen::CpuArtifact& code = **art;
  const int64_t extent = code.outer_extent, min_chunk = cpu_min_chunk(k);
  // Cut as the device cuts a launch (a matmul's column blocks and row groups as a plan runs them),
  // over every thread, or run on this one alone.
  const auto run = [&](int64_t b, int64_t e) { code.run_units(bufs, b, e, extent); };
  auto launch = [&] {
    if (one_core)
      run(0, code.units(extent));
    else
      threads.parallel_for(code.units(extent), code.units(min_chunk), run, code.chunks_per_thread);
  };
  // Warm: pages, caches, and memory this VM serves slowly on its first passes (a fresh 64 MiB
  // read 2.96, 2.65, 1.91, 1.61, then 1.22 ms a pass on a 2-core Xeon VM, where the median of
  // 5 runs after one warm-up priced memory-bound kernels 1.2-1.5x over their times): at least
  // one run and kWarmupMs, at most kMaxWarmupRuns.
  constexpr double kWarmupMs = 10;
  constexpr int kMaxWarmupRuns = 1000;
  support::warm_up([&] {
    launch();
    return true;
  }, 1, kWarmupMs, kMaxWarmupRuns);
  return median_seconds(runs, launch);
}

}  // namespace

Expected<passes::DeviceRates> measure_cpu_rates(codegen::CpuBackend& backend,
                                                support::ThreadPool& threads) {
  // 64 MiB in and out (well past a 32 MiB L3); the chain on 64 KiB per thread (in L2).
  // The matmul 512 x 512 x 512 (268 MFLOP, 3 MiB of operands): a contraction large enough for
  // the rate kiln's matmuls reach (256^3, a fifth of a millisecond, came out at 240 to 258
  // GFLOP/s where 1024^3 ran at 312, 130% of it); the exps and the cache stream (1 MiB in,
  // 1 MiB out) in the caches. The chain again on one core (16384 elements, 2 Mi operations: the
  // rate of launches too small to wake a worker, passes::kOneCoreWorkOps).
  const RateSizes sizes{.stream = int64_t{16} << 20,
                        .compute = int64_t{16384} * threads.size(),
                        .matmul = 512,
                        .costly = int64_t{16384} * threads.size(),
                        .cache_stream = int64_t{1} << 18,
                        .parallel_launch = int64_t{16384} * threads.size(),
                        .serial_compute = 16384};
  return measure_rates([&](const kir::Kernel& k, int runs, bool one_core) {
    return time_on_cpu(backend, threads, k, runs, one_core);
  }, sizes);
}

}  // namespace kiln::runtime
