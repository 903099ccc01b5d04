// A decoder's cache update through kiln's C++ API: cache = where(rows == pos, new_row, cache),
// one row of a [rows, 1024] f32 cache a step, realized with the old cache held by nothing else,
// so the result is written over it (buffer donation, docs/embedding.md). With donation the
// kernel stores only the row that changes (codegen/cpu/llvm_emitter.cpp, emit_store), so a step
// costs about the same at every cache size; `held` keeps a handle to the old cache, so the
// result needs new memory and every element is written: what each step would cost otherwise.
//   build/bench/kiln_cache_update_bench
#include <benchmark/benchmark.h>

#include <kiln/kiln.h>

#include <span>
#include <vector>

#include "bench/api_device.h"

namespace {

constexpr int64_t kWidth = 1024;

kiln::Device& device() {
  return kiln::bench::api_cpu_device();
}

void CacheRowUpdate(benchmark::State& state) {
  const int64_t rows = state.range(0);
  const bool held = state.range(1) != 0;
  std::vector<int32_t> index(static_cast<size_t>(rows));
  for (int64_t r = 0; r < rows; ++r) index[static_cast<size_t>(r)] = static_cast<int32_t>(r);
  const kiln::Tensor row_ids =
      kiln::Tensor::from_host(device(), std::span<const int32_t>(index), {rows, 1});
  std::vector<float> zeros(static_cast<size_t>(rows * kWidth), 0.f), row(kWidth, 1.f);
  kiln::Tensor cache =
      kiln::Tensor::from_host(device(), std::span<const float>(zeros), {rows, kWidth});
  const kiln::Tensor fresh =
      kiln::Tensor::from_host(device(), std::span<const float>(row), {1, kWidth});
  int32_t pos = 0;
  kiln::Tensor old;
  auto step = [&] {
    const kiln::Tensor at =
        kiln::Tensor::from_host(device(), std::span<const int32_t>(&pos, 1), {1});
    if (held) old = cache;
    cache = kiln::where(kiln::eq(row_ids, at), fresh * 2.0, cache);
    pos = static_cast<int32_t>((pos + 1) % rows);
    return cache.realize().has_value();
  };
  if (!step()) state.SkipWithError("realize failed");  // plan built outside the timing
  for (auto _ : state)
    if (!step()) state.SkipWithError("realize failed");
  state.counters["donated"] = device().last_stats().donated;
}

}  // namespace

BENCHMARK(CacheRowUpdate)
    ->ArgNames({"rows", "held"})
    ->ArgsProduct({{512, 4096, 16384}, {0, 1}})
    ->UseRealTime()
    ->Unit(benchmark::kMicrosecond);

BENCHMARK_MAIN();
