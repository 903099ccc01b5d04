// Loads libcuda.so.1 with dlopen, resolves the driver entry points kiln uses and formats CUresults.
#include "runtime/cuda/cuda_driver.h"

#include <dlfcn.h>
#include <fmt/format.h>

#include <initializer_list>

namespace kiln::runtime::cuda {

namespace {

// Resolves the first of `symbols` that the library has (the newest versioned name first); adds
// the first name to `missing` when none is there.
template <class Fn>
void resolve(void* library, std::initializer_list<const char*> symbols, Fn& out,
             std::string& missing) {
  for (const char* symbol : symbols) {
    out = reinterpret_cast<Fn>(dlsym(library, symbol));
    if (out) return;
  }
  missing += (missing.empty() ? "" : ", ") + std::string(*symbols.begin());
}

// The symbol names are those cuda.h maps the API names to (its _v2 defines).
std::string resolve_all(void* lib, CudaDriver& d) {
  std::string missing;
  resolve(lib, {"cuInit"}, d.cuInit, missing);
  resolve(lib, {"cuDriverGetVersion"}, d.cuDriverGetVersion, missing);
  resolve(lib, {"cuGetErrorName"}, d.cuGetErrorName, missing);
  resolve(lib, {"cuGetErrorString"}, d.cuGetErrorString, missing);
  resolve(lib, {"cuDeviceGetCount"}, d.cuDeviceGetCount, missing);
  resolve(lib, {"cuDeviceGet"}, d.cuDeviceGet, missing);
  resolve(lib, {"cuDeviceGetName"}, d.cuDeviceGetName, missing);
  resolve(lib, {"cuDeviceGetAttribute"}, d.cuDeviceGetAttribute, missing);
  resolve(lib, {"cuDeviceTotalMem_v2"}, d.cuDeviceTotalMem, missing);
  resolve(lib, {"cuDevicePrimaryCtxRetain"}, d.cuDevicePrimaryCtxRetain, missing);
  resolve(lib, {"cuDevicePrimaryCtxRelease_v2"}, d.cuDevicePrimaryCtxRelease, missing);
  resolve(lib, {"cuCtxSetCurrent"}, d.cuCtxSetCurrent, missing);
  resolve(lib, {"cuStreamCreate"}, d.cuStreamCreate, missing);
  resolve(lib, {"cuStreamDestroy_v2"}, d.cuStreamDestroy, missing);
  resolve(lib, {"cuStreamSynchronize"}, d.cuStreamSynchronize, missing);
  resolve(lib, {"cuMemAlloc_v2"}, d.cuMemAlloc, missing);
  resolve(lib, {"cuMemFree_v2"}, d.cuMemFree, missing);
  resolve(lib, {"cuMemcpyHtoDAsync_v2"}, d.cuMemcpyHtoDAsync, missing);
  resolve(lib, {"cuMemcpyDtoHAsync_v2"}, d.cuMemcpyDtoHAsync, missing);
  resolve(lib, {"cuModuleLoadDataEx"}, d.cuModuleLoadDataEx, missing);
  resolve(lib, {"cuModuleGetFunction"}, d.cuModuleGetFunction, missing);
  resolve(lib, {"cuModuleUnload"}, d.cuModuleUnload, missing);
  resolve(lib, {"cuLaunchKernel"}, d.cuLaunchKernel, missing);
  resolve(lib, {"cuEventCreate"}, d.cuEventCreate, missing);
  resolve(lib, {"cuEventRecord"}, d.cuEventRecord, missing);
  resolve(lib, {"cuEventQuery"}, d.cuEventQuery, missing);
  resolve(lib, {"cuEventSynchronize"}, d.cuEventSynchronize, missing);
  // cuda.h 12.8+ maps cuEventElapsedTime to _v2; older drivers have only the plain name.
  resolve(lib, {"cuEventElapsedTime_v2", "cuEventElapsedTime"}, d.cuEventElapsedTime, missing);
  resolve(lib, {"cuEventDestroy_v2"}, d.cuEventDestroy, missing);
  return missing;
}

Expected<const CudaDriver*> load_once() {
  // Never closed: see CudaDriver.
  void* lib = dlopen(kCudaDriverLibrary, RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    const char* why = dlerror();
    return make_error(fmt::format("cuda: {} not found (no NVIDIA driver on this machine): {}",
                                  kCudaDriverLibrary, why ? why : "dlopen failed"));
  }
  static CudaDriver driver;
  if (std::string missing = resolve_all(lib, driver); !missing.empty())
    return make_error(
        fmt::format("cuda: {} is too old: it lacks {} (kiln needs a CUDA 11.0 or "
                    "newer driver)",
                    kCudaDriverLibrary, missing));
  if (auto ok = driver.check(driver.cuInit(0), "cuInit"); !ok) return std::unexpected(ok.error());
  return &driver;
}

}  // namespace

Expected<const CudaDriver*> CudaDriver::load() {
  static const Expected<const CudaDriver*> loaded = load_once();
  return loaded;
}

std::string CudaDriver::describe(CUresult result) const {
  const char* name = nullptr;
  const char* text = nullptr;
  if (cuGetErrorName == nullptr || cuGetErrorName(result, &name) != kCudaSuccess || !name)
    name = nullptr;
  if (cuGetErrorString == nullptr || cuGetErrorString(result, &text) != kCudaSuccess || !text)
    text = nullptr;
  return fmt::format("{}: {}", name ? name : fmt::format("CUresult {}", result),
                     text ? text : "unknown error");
}

Expected<void> CudaDriver::check(CUresult result, std::string_view what) const {
  if (result == kCudaSuccess) return {};
  return make_error(fmt::format("cuda: {}: {}", what, describe(result)));
}

}  // namespace kiln::runtime::cuda
