// CUDA stream operations: cuMemcpy*Async, cuLaunchKernel and event timing.
#include "runtime/cuda/cuda_stream.h"

#include <fmt/format.h>

#include "runtime/cuda/cuda_memory_pool.h"
#include "runtime/cuda/cuda_program.h"

namespace kiln::runtime::cuda {

namespace {

// Launch limits of every CUDA device since compute capability 2.0 (and the gpu_source contract).
constexpr int64_t kMaxGroups = 65535;
constexpr int kMaxGroupSize = 1024;

Expected<CudaMemory*> as_cuda(const DeviceMemory* memory, std::string_view what) {
  auto* cuda = dynamic_cast<CudaMemory*>(const_cast<DeviceMemory*>(memory));
  if (!cuda) return make_error(fmt::format("cuda: {}: not memory of a CUDA device", what));
  return cuda;
}

}  // namespace

Expected<std::unique_ptr<CudaStream>> CudaStream::create(
    std::shared_ptr<const CudaContext> context) {
  auto handle = CudaStreamHandle::create(std::move(context));
  if (!handle) return std::unexpected(handle.error());
  return std::unique_ptr<CudaStream>(new CudaStream(std::move(*handle)));
}

CudaStream::~CudaStream() {
  if (!handle_->context().make_current()) return;
  driver().cuStreamSynchronize(handle_->get());
  for (const auto& [start, end] : timed_) {
    driver().cuEventDestroy(start);
    driver().cuEventDestroy(end);
  }
  for (CUevent event : spare_events_) driver().cuEventDestroy(event);
}

Expected<void> CudaStream::upload(DeviceMemory& dst, const void* src, size_t bytes) {
  auto memory = as_cuda(&dst, "upload destination");
  if (!memory) return std::unexpected(memory.error());
  if (bytes > dst.bytes())
    return make_error(
        fmt::format("cuda: upload of {} bytes into a {}-byte buffer", bytes, dst.bytes()));
  if (bytes == 0) return {};
  if (auto ok = handle_->context().make_current(); !ok) return ok;
  (*memory)->used_by(handle_);
  return driver().check(
      driver().cuMemcpyHtoDAsync((*memory)->pointer(), src, bytes, handle_->get()),
      fmt::format("cuMemcpyHtoDAsync of {} bytes", bytes));
}

Expected<void> CudaStream::download(const DeviceMemory& src, void* dst, size_t bytes) {
  auto memory = as_cuda(&src, "download source");
  if (!memory) return std::unexpected(memory.error());
  if (bytes > src.bytes())
    return make_error(
        fmt::format("cuda: download of {} bytes from a {}-byte buffer", bytes, src.bytes()));
  if (bytes == 0) return {};
  if (auto ok = handle_->context().make_current(); !ok) return ok;
  (*memory)->used_by(handle_);
  return driver().check(
      driver().cuMemcpyDtoHAsync(dst, (*memory)->pointer(), bytes, handle_->get()),
      fmt::format("cuMemcpyDtoHAsync of {} bytes", bytes));
}

Expected<CUevent> CudaStream::timing_event() {
  if (!spare_events_.empty()) {
    CUevent event = spare_events_.back();
    spare_events_.pop_back();
    return event;
  }
  CUevent event = nullptr;
  if (auto ok = driver().check(driver().cuEventCreate(&event, kEventDefault), "cuEventCreate"); !ok)
    return std::unexpected(ok.error());
  return event;
}

Expected<void> CudaStream::launch(const GpuProgram& program, const std::vector<DeviceMemory*>& args,
                                  bool timed, std::optional<int64_t> outer_extent) {
  const auto* cuda_program = dynamic_cast<const CudaProgram*>(&program);
  if (!cuda_program) return make_error("cuda: launch: not a program loaded by a CUDA backend");
  auto dims = dynamic_launch(cuda_program->launch(), outer_extent, cuda_program->entry());
  if (!dims) return make_error("cuda: " + dims.error().message);
  const codegen::gpu::LaunchShape& shape = dims->shape;
  if (shape.groups < 1 || shape.groups > kMaxGroups || shape.group_size < 1 ||
      shape.group_size > kMaxGroupSize)
    return make_error(fmt::format(
        "cuda: launch of '{}': {} blocks of {} threads is outside "
        "[1, {}] x [1, {}]",
        cuda_program->entry(), shape.groups, shape.group_size, kMaxGroups, kMaxGroupSize));
  // cuLaunchKernel copies the parameters during the call: kernelParams[i] points at the
  // CUdeviceptr that is pointer argument i, and a dynamic kernel's last at its outer extent.
  std::vector<CUdeviceptr> pointers(args.size());
  std::vector<void*> params(args.size());
  for (size_t i = 0; i < args.size(); ++i) {
    auto memory =
        as_cuda(args[i], fmt::format("launch of '{}', argument {}", cuda_program->entry(), i));
    if (!memory) return std::unexpected(memory.error());
    pointers[i] = (*memory)->pointer();
    params[i] = &pointers[i];
  }
  int32_t outer = dims->outer;
  if (shape.dynamic_tasks > 0) params.push_back(&outer);
  if (auto ok = handle_->context().make_current(); !ok) return ok;
  for (DeviceMemory* arg : args) static_cast<CudaMemory*>(arg)->used_by(handle_);
  if (!timed) return enqueue_launch(*cuda_program, shape, params);
  auto start = timing_event();
  if (!start) return std::unexpected(start.error());
  auto end = timing_event();
  if (!end) {
    spare_events_.push_back(*start);
    return std::unexpected(end.error());
  }
  auto ok = driver().check(driver().cuEventRecord(*start, handle_->get()), "cuEventRecord");
  if (ok) ok = enqueue_launch(*cuda_program, shape, params);
  if (ok) ok = driver().check(driver().cuEventRecord(*end, handle_->get()), "cuEventRecord");
  if (!ok) {
    spare_events_.push_back(*start);
    spare_events_.push_back(*end);
    return ok;
  }
  timed_.emplace_back(*start, *end);
  return {};
}

Expected<void> CudaStream::enqueue_launch(const CudaProgram& program,
                                          const codegen::gpu::LaunchShape& shape,
                                          std::vector<void*>& params) {
  return driver().check(
      driver().cuLaunchKernel(program.function(), static_cast<unsigned>(shape.groups), 1, 1,
                              static_cast<unsigned>(shape.group_size), 1, 1, 0, handle_->get(),
                              params.data(), nullptr),
      fmt::format("cuLaunchKernel('{}', {} blocks x {} threads)", program.entry(), shape.groups,
                  shape.group_size));
}

Expected<void> CudaStream::collect_times() {
  Expected<void> status;
  for (const auto& [start, end] : timed_) {
    float ms = 0.0f;
    if (status) {
      status = driver().check(driver().cuEventElapsedTime(&ms, start, end), "cuEventElapsedTime");
      if (status) times_ms_.push_back(static_cast<double>(ms));
    }
    spare_events_.push_back(start);
    spare_events_.push_back(end);
  }
  timed_.clear();
  return status;
}

Expected<void> CudaStream::synchronize() {
  times_ms_.clear();
  if (auto ok = handle_->context().make_current(); !ok) return ok;
  auto synced =
      driver().check(driver().cuStreamSynchronize(handle_->get()),
                     fmt::format("cuStreamSynchronize (device {})", handle_->context().ordinal()));
  if (!synced) {
    // The batch failed: its timings mean nothing, but the events are recycled.
    for (const auto& [start, end] : timed_) {
      spare_events_.push_back(start);
      spare_events_.push_back(end);
    }
    timed_.clear();
    return synced;
  }
  return collect_times();
}

}  // namespace kiln::runtime::cuda
