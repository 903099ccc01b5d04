// Measuring a device's rates for the cost model and the autotuner's roofline, with three
// generated kernels: a stream (bandwidth), a one-element launch (launch overhead) and an
// arithmetic chain (compute rate). A measurement is kept in $XDG_CACHE_HOME/kiln/ (else
// ~/.cache/kiln/) under a name per device, so that it is taken once per machine and device.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

#include "ir/kernel_ir.h"
#include "passes/cost_model.h"
#include "support/error.h"

namespace kiln::runtime {

// The median seconds of `runs` runs of `kernel` (after one warm-up run), on the device measured.
// The kernel's parameters are x (input, filled with 1.0f) and y (output), both f32.
using KernelTimer = std::function<Expected<double>(const kir::Kernel& kernel, int runs)>;

struct RateSizes {
  int64_t stream = int64_t{16} << 20;  // f32 elements streamed in and out (past the caches)
  int64_t compute = 16384;             // elements of the arithmetic chain (each 64 mul+add pairs)
};

Expected<passes::DeviceRates> measure_rates(const KernelTimer& time, const RateSizes& sizes);

// The kept measurement named `file_stem` (e.g. "cpu-rates-<cpu>-<hash>-t2"), or a new one from
// `measure`, kept best-effort. A failed measurement warns on stderr (naming `what`) and gives
// `fallback`.
passes::DeviceRates kept_rates(const std::string& file_stem,
                               const std::function<Expected<passes::DeviceRates>()>& measure,
                               const passes::DeviceRates& fallback, std::string_view what);

}  // namespace kiln::runtime
