// Measuring a device's rates for the cost model and the autotuner's roofline, with generated
// kernels: a stream (bandwidth), a one-element launch (launch overhead) and an arithmetic chain
// (compute rate); where the sizes ask, the chain on one core (the rate of work too small for more), a matmul (matmul rate), each costly elementwise op (its
// time per element) and a stream that stays in the caches (cache bandwidth). The executor keeps a measurement in the persistent cache
// (runtime/executor.h), so that it is taken once per machine and device.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include <optional>

#include "cache/store.h"
#include "ir/kernel_ir.h"
#include "passes/cost_model.h"
#include "kiln/error.h"

namespace kiln::runtime {

// The median seconds of `runs` runs of `kernel` (after one warm-up run), on the device measured,
// over all its cores or, with `one_core`, on one. The kernel's parameters are x (input, filled
// with 1.0f) and y (output), both f32 (the matmul's are n x n: y = x @ x).
using KernelTimer = std::function<Expected<double>(const kir::Kernel& kernel, int runs, bool one_core)>;

struct RateSizes {
  int64_t stream = int64_t{16} << 20;  // f32 elements streamed in and out (past the caches)
  int64_t compute = 16384;             // elements of the arithmetic chain (each 64 mul+add pairs)
  // The rates by kind of work (passes/cost_model.h); 0 leaves the rate out (then priced as
  // compute or bandwidth): the side of an n x n x n matmul, the elements each costly op is timed
  // on, and f32 elements streamed in and out of the caches.
  int64_t matmul = 0;
  int64_t costly = 0;
  int64_t cache_stream = 0;
  // With cache_stream: the elements of a stream that just spans every thread (a chunk each): its
  // time beyond its bytes at the cache bandwidth is the launch overhead of a kernel that wakes
  // the threads (a one-element launch runs on the caller alone).
  int64_t parallel_launch = 0;
  // The arithmetic chain's elements timed on one core (DeviceRates::serial_compute_rate); 0 leaves
  // that rate out.
  int64_t serial_compute = 0;
};

Expected<passes::DeviceRates> measure_rates(const KernelTimer& time, const RateSizes& sizes);

// A measurement as the persistent cache keeps it (an autotune-table entry, JSON), and back;
// nullopt for an entry that is not an intact measurement (a rate missing, zero or not finite).
cache::Entry rates_entry(const passes::DeviceRates& rates);
std::optional<passes::DeviceRates> rates_from_entry(const cache::Entry& entry);
// A timing of a kernel with run-time sizes against one size's own code (sizes_decision_key): the
// ratio of their times, as a cache entry and back (nullopt for an entry that holds no positive
// finite ratio).
cache::Entry ratio_entry(double ratio);
std::optional<double> ratio_from_entry(const cache::Entry& entry);

}  // namespace kiln::runtime
