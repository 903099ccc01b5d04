// GpuStream on a CUDA driver stream: async copies, cuLaunchKernel launches, and launch timing
// with a pair of events around each timed launch.
#pragma once

#include <memory>
#include <utility>
#include <vector>

#include "runtime/cuda/cuda_context.h"
#include "runtime/gpu_backend.h"

namespace kiln::runtime::cuda {

class CudaProgram;

class CudaStream final : public GpuStream {
 public:
  static Expected<std::unique_ptr<CudaStream>> create(std::shared_ptr<const CudaContext> context);
  ~CudaStream() override;

  Expected<void> upload(DeviceMemory& dst, const void* src, size_t bytes) override;
  Expected<void> download(const DeviceMemory& src, void* dst, size_t bytes) override;
  Expected<void> launch(const GpuProgram& program, const std::vector<DeviceMemory*>& args,
                        bool timed = false,
                        std::optional<int64_t> outer_extent = std::nullopt) override;
  Expected<void> synchronize() override;
  std::vector<double> launch_times_ms() const override { return times_ms_; }

 private:
  explicit CudaStream(std::shared_ptr<CudaStreamHandle> handle) : handle_(std::move(handle)) {}
  const CudaDriver& driver() const { return handle_->context().driver(); }
  Expected<CUevent> timing_event();
  Expected<void> enqueue_launch(const CudaProgram& program, const codegen::gpu::LaunchShape& shape,
                                std::vector<void*>& params);
  // Collects the timed launches' durations and recycles their events.
  Expected<void> collect_times();

  std::shared_ptr<CudaStreamHandle> handle_;
  std::vector<std::pair<CUevent, CUevent>> timed_;  // (start, end) of each pending timed launch
  std::vector<CUevent> spare_events_;
  std::vector<double> times_ms_;
};

}  // namespace kiln::runtime::cuda
