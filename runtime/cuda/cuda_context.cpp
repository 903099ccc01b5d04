// CUDA primary context retain/release and owned driver streams.
#include "runtime/cuda/cuda_context.h"

#include <fmt/format.h>

namespace kiln::runtime::cuda {

Expected<std::shared_ptr<const CudaContext>> CudaContext::retain(const CudaDriver& driver,
                                                                 int ordinal) {
  CUdevice device = 0;
  if (auto ok = driver.check(driver.cuDeviceGet(&device, ordinal),
                             fmt::format("cuDeviceGet({})", ordinal));
      !ok)
    return std::unexpected(ok.error());
  CUcontext context = nullptr;
  if (auto ok = driver.check(driver.cuDevicePrimaryCtxRetain(&context, device),
                             fmt::format("cuDevicePrimaryCtxRetain(device {})", ordinal));
      !ok)
    return std::unexpected(ok.error());
  return std::shared_ptr<const CudaContext>(new CudaContext(driver, device, context, ordinal));
}

CudaContext::~CudaContext() {
  driver_.cuDevicePrimaryCtxRelease(device_);
}

Expected<void> CudaContext::make_current() const {
  return driver_.check(driver_.cuCtxSetCurrent(context_), "cuCtxSetCurrent");
}

Expected<std::shared_ptr<CudaStreamHandle>> CudaStreamHandle::create(
    std::shared_ptr<const CudaContext> context) {
  if (auto ok = context->make_current(); !ok) return std::unexpected(ok.error());
  CUstream stream = nullptr;
  const CudaDriver& d = context->driver();
  if (auto ok = d.check(d.cuStreamCreate(&stream, kStreamNonBlocking), "cuStreamCreate"); !ok)
    return std::unexpected(ok.error());
  return std::shared_ptr<CudaStreamHandle>(new CudaStreamHandle(std::move(context), stream));
}

CudaStreamHandle::~CudaStreamHandle() {
  // Errors cannot be reported from here; a failed synchronize already reported through the
  // stream's last synchronize(), and cuStreamDestroy releases the stream regardless.
  if (!context_->make_current()) return;
  const CudaDriver& d = context_->driver();
  d.cuStreamSynchronize(stream_);
  d.cuStreamDestroy(stream_);
}

}  // namespace kiln::runtime::cuda
