// The CUDA driver API, loaded from libcuda.so.1 with dlopen: a table of the entry points kiln uses
// and the few types and constants they take, declared here (values from cuda.h, stable across
// CUDA 11-13) so that building kiln needs no CUDA headers and running it needs no driver.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "kiln/error.h"

namespace kiln::runtime::cuda {

using CUresult = int;
using CUdevice = int;
using CUdeviceptr = unsigned long long;  // NOLINT: the driver's own type (64-bit builds)
using CUcontext = struct CUctx_st*;
using CUmodule = struct CUmod_st*;
using CUfunction = struct CUfunc_st*;
using CUstream = struct CUstream_st*;
using CUevent = struct CUevent_st*;
using CUjit_option = int;

inline constexpr CUresult kCudaSuccess = 0;
inline constexpr CUresult kCudaErrorOutOfMemory = 2;    // CUDA_ERROR_OUT_OF_MEMORY
inline constexpr CUresult kCudaErrorNoDevice = 100;     // CUDA_ERROR_NO_DEVICE
inline constexpr CUresult kCudaErrorNotReady = 600;     // CUDA_ERROR_NOT_READY
inline constexpr int kAttrMaxThreadsPerBlock = 1;       // CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK
inline constexpr int kAttrMultiprocessorCount = 16;     // CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT
inline constexpr int kAttrComputeCapabilityMajor = 75;  // ..._COMPUTE_CAPABILITY_MAJOR
inline constexpr int kAttrComputeCapabilityMinor = 76;  // ..._COMPUTE_CAPABILITY_MINOR
inline constexpr unsigned kStreamNonBlocking = 0x1;     // CU_STREAM_NON_BLOCKING
inline constexpr unsigned kEventDefault = 0x0;          // CU_EVENT_DEFAULT (timing enabled)
inline constexpr unsigned kEventDisableTiming = 0x2;    // CU_EVENT_DISABLE_TIMING
inline constexpr CUjit_option kJitErrorLogBuffer = 5;   // CU_JIT_ERROR_LOG_BUFFER
inline constexpr CUjit_option kJitErrorLogBufferSize = 6;  // CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES

// The driver's entry points. Loaded once per process and never unloaded (libcuda does not
// support being dlclose'd while contexts exist); cuInit(0) has been called when load() succeeds.
struct CudaDriver {
  CUresult (*cuInit)(unsigned) = nullptr;
  CUresult (*cuDriverGetVersion)(int*) = nullptr;
  CUresult (*cuGetErrorName)(CUresult, const char**) = nullptr;
  CUresult (*cuGetErrorString)(CUresult, const char**) = nullptr;
  CUresult (*cuDeviceGetCount)(int*) = nullptr;
  CUresult (*cuDeviceGet)(CUdevice*, int) = nullptr;
  CUresult (*cuDeviceGetName)(char*, int, CUdevice) = nullptr;
  CUresult (*cuDeviceGetAttribute)(int*, int, CUdevice) = nullptr;
  CUresult (*cuDeviceTotalMem)(size_t*, CUdevice) = nullptr;  // _v2
  CUresult (*cuDevicePrimaryCtxRetain)(CUcontext*, CUdevice) = nullptr;
  CUresult (*cuDevicePrimaryCtxRelease)(CUdevice) = nullptr;  // _v2
  CUresult (*cuCtxSetCurrent)(CUcontext) = nullptr;
  CUresult (*cuStreamCreate)(CUstream*, unsigned) = nullptr;
  CUresult (*cuStreamDestroy)(CUstream) = nullptr;  // _v2
  CUresult (*cuStreamSynchronize)(CUstream) = nullptr;
  CUresult (*cuMemAlloc)(CUdeviceptr*, size_t) = nullptr;                               // _v2
  CUresult (*cuMemFree)(CUdeviceptr) = nullptr;                                         // _v2
  CUresult (*cuMemcpyHtoDAsync)(CUdeviceptr, const void*, size_t, CUstream) = nullptr;  // _v2
  CUresult (*cuMemcpyDtoHAsync)(void*, CUdeviceptr, size_t, CUstream) = nullptr;        // _v2
  CUresult (*cuModuleLoadDataEx)(CUmodule*, const void*, unsigned, CUjit_option*, void**) = nullptr;
  CUresult (*cuModuleGetFunction)(CUfunction*, CUmodule, const char*) = nullptr;
  CUresult (*cuModuleUnload)(CUmodule) = nullptr;
  CUresult (*cuLaunchKernel)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                             unsigned, CUstream, void**, void**) = nullptr;
  CUresult (*cuEventCreate)(CUevent*, unsigned) = nullptr;
  CUresult (*cuEventRecord)(CUevent, CUstream) = nullptr;
  CUresult (*cuEventQuery)(CUevent) = nullptr;
  CUresult (*cuEventSynchronize)(CUevent) = nullptr;
  CUresult (*cuEventElapsedTime)(float*, CUevent, CUevent) = nullptr;  // _v2 where present
  CUresult (*cuEventDestroy)(CUevent) = nullptr;                       // _v2

  // The process-wide driver: an error saying what is missing (no libcuda.so.1, a symbol, or
  // cuInit failing, e.g. CUDA_ERROR_NO_DEVICE) when it cannot be used.
  static Expected<const CudaDriver*> load();

  // "CUDA_ERROR_OUT_OF_MEMORY: out of memory" for `result`.
  std::string describe(CUresult result) const;
  // Success, or "cuda: <what>: CUDA_ERROR_X: <driver message>".
  Expected<void> check(CUresult result, std::string_view what) const;
};

// The library file name tried first; tests and messages name it.
inline constexpr const char* kCudaDriverLibrary = "libcuda.so.1";

}  // namespace kiln::runtime::cuda
