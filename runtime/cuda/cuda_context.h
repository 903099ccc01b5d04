// One CUDA device's primary context, made current on the calling thread before each driver call,
// and driver streams owned by it. Shared by the backend, its memory pool, streams and programs,
// so the context outlives everything created in it.
#pragma once

#include <memory>

#include "runtime/cuda/cuda_driver.h"
#include "kiln/error.h"

namespace kiln::runtime::cuda {

class CudaContext {
 public:
  // Retains device `ordinal`'s primary context (the one the CUDA runtime shares).
  static Expected<std::shared_ptr<const CudaContext>> retain(const CudaDriver& driver, int ordinal);
  ~CudaContext();
  CudaContext(const CudaContext&) = delete;
  CudaContext& operator=(const CudaContext&) = delete;

  const CudaDriver& driver() const { return driver_; }
  CUdevice device() const { return device_; }
  int ordinal() const { return ordinal_; }
  // Binds the context to the calling thread (cuCtxSetCurrent); cheap, so done before every call.
  Expected<void> make_current() const;

 private:
  CudaContext(const CudaDriver& driver, CUdevice device, CUcontext context, int ordinal)
      : driver_(driver), device_(device), context_(context), ordinal_(ordinal) {}
  const CudaDriver& driver_;
  CUdevice device_;
  CUcontext context_;
  int ordinal_;
};

// A driver stream (non-blocking with respect to the legacy default stream). Destroying it waits
// for its work first, so memory and events it used may be reused safely afterwards.
class CudaStreamHandle {
 public:
  static Expected<std::shared_ptr<CudaStreamHandle>> create(
      std::shared_ptr<const CudaContext> context);
  ~CudaStreamHandle();
  CudaStreamHandle(const CudaStreamHandle&) = delete;
  CudaStreamHandle& operator=(const CudaStreamHandle&) = delete;

  CUstream get() const { return stream_; }
  const CudaContext& context() const { return *context_; }

 private:
  CudaStreamHandle(std::shared_ptr<const CudaContext> context, CUstream stream)
      : context_(std::move(context)), stream_(stream) {}
  std::shared_ptr<const CudaContext> context_;
  CUstream stream_;
};

}  // namespace kiln::runtime::cuda
