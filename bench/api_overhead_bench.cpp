// Framework overhead through kiln's C++ API, as Burn measures its fusion backend: a tensor of
// shape (1, 8, 8, 8), `reps` chained elementwise ops with a scalar (alternately * 1.0001 and
// + 0.0001) recorded and realized, from 1, 2, 4 and 8 threads at once, each on its own tensor of
// one shared device. The kernels are tiny, so what is measured is recording, planning (a plan
// cache hit after the first realize) and launching.
//   build/bench/kiln_api_bench --benchmark_counters_tabular=true
// Per row: real time = ms per realize on each thread; time_per_op = that over the ops ("1.2u" is
// 1.2 us); items_per_second = ops per second summed over the threads, so its ratio between two
// rows is the scaling.
#include <benchmark/benchmark.h>

#include <kiln/kiln.h>

#include <span>
#include <vector>

#include "bench/api_device.h"

namespace {

kiln::Device& device() {
  return kiln::bench::api_cpu_device();
}

void BurnShape(benchmark::State& state) {
  const auto reps = static_cast<int>(state.range(0));
  std::vector<float> data(512, 0.5f + static_cast<float>(state.thread_index()));
  kiln::Tensor x = kiln::Tensor::from_host(device(), std::span<const float>(data), {1, 8, 8, 8});
  auto chain = [&] {
    kiln::Tensor y = x;
    for (int r = 0; r < reps; ++r) y = r % 2 == 0 ? y * 1.0001 : y + 0.0001;
    return y;
  };
  if (!chain().realize()) state.SkipWithError("realize failed");  // plan built outside the timing
  for (auto _ : state) {
    kiln::Tensor y = chain();
    if (!y.realize()) state.SkipWithError("realize failed");
  }
  state.SetItemsProcessed(state.iterations() * reps);
  state.counters["time_per_op"] = benchmark::Counter(
      static_cast<double>(state.iterations()) * reps,
      benchmark::Counter::kIsRate | benchmark::Counter::kInvert | benchmark::Counter::kAvgThreads);
}

}  // namespace

BENCHMARK(BurnShape)
    ->ArgName("reps")
    ->Arg(512)
    ->Arg(1024)
    ->ThreadRange(1, 8)
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond)
    ->MeasureProcessCPUTime();

BENCHMARK_MAIN();
