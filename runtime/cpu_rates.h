// The cpu's rates for the fusion cost model, measured with JIT-compiled kernels over the thread
// pool (the executor keeps them in the persistent cache, keyed by CPU and thread count).
#pragma once

#include "codegen/cpu/cpu_backend.h"
#include "passes/cost_model.h"
#include "support/thread_pool.h"

namespace kiln::runtime {

// The rate kernels (runtime/measured_rates.h) run over `threads`: about 0.3 s.
Expected<passes::DeviceRates> measure_cpu_rates(codegen::CpuBackend& backend,
                                                support::ThreadPool& threads);

}  // namespace kiln::runtime
