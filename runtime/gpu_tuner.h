// Tuning GPU kernels on the device they run on: the GPU's CandidateBench for the shared tuning
// loop (autotune/tune_loop.h) over gpu_tune_space, with launches timed by the device (Vulkan
// timestamp queries, CUDA events); and the device's measured rates for the roofline.
#pragma once

#include "autotune/tune_loop.h"
#include "passes/cost_model.h"
#include "runtime/gpu_backend.h"

namespace kiln::runtime {

// Candidates are emitted and compiled on up to `compile_threads` threads at once (GpuBackend::
// compile is thread-safe), then loaded and run on one stream of `backend`. `tensor_cores`: as
// GpuTarget's (its matmuls on the tensor cores).
Expected<autotune::TuneDecision> tune_gpu_kernel(GpuBackend& backend, const kir::Kernel& kernel,
                                                 autotune::Level level, double roofline_ms,
                                                 int compile_threads,
                                                 const autotune::TuneOptions& options = {},
                                                 bool tensor_cores = false);

// Bandwidth, launch overhead and compute rate of the device, measured with the rate kernels of
// runtime/measured_rates.h timed on the device (the executor keeps them in the persistent cache).
Expected<passes::DeviceRates> measure_gpu_rates(GpuBackend& backend);

// Runs chunk(begin, end) over [0, n) on up to `threads` threads (the caller's among them).
autotune::ParallelFor thread_parallel_for(int threads);

}  // namespace kiln::runtime
