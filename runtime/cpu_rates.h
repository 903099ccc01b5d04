// The cpu device's rates for the fusion cost model, measured once per machine with JIT-compiled
// kernels and kept in $XDG_CACHE_HOME/kiln/ (else ~/.cache/kiln/), keyed by CPU and thread count.
#pragma once

#include <string>

#include "codegen/cpu/cpu_backend.h"
#include "passes/cost_model.h"
#include "support/thread_pool.h"

namespace kiln::runtime {

// KILN_CPU_RATES=reference gives passes::DeviceRates::reference_cpu() (deterministic plans).
// Otherwise: the kept measurement for this CPU, or a new measurement (about 0.3 s) that is kept.
passes::DeviceRates cpu_rates(codegen::CpuBackend& backend, support::ThreadPool& threads);

// Measures without reading or writing the kept file.
Expected<passes::DeviceRates> measure_cpu_rates(codegen::CpuBackend& backend,
                                                support::ThreadPool& threads);

}  // namespace kiln::runtime
