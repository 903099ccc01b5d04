// What kiln reads about a CUDA device without creating a context: name, compute capability,
// memory and SM count, and how `kiln devices` prints them.
#pragma once

#include <cstddef>
#include <string>
#include <utility>
#include <vector>

#include "runtime/cuda/cuda_driver.h"
#include "kiln/error.h"

namespace kiln::runtime::cuda {

struct CudaDeviceInfo {
  int ordinal = 0;
  std::string name;  // "NVIDIA H100 80GB HBM3"
  int major = 0;     // compute capability
  int minor = 0;
  int sm_count = 0;
  int max_threads_per_block = 0;
  size_t total_memory = 0;  // bytes

  int sm() const { return major * 10 + minor; }  // 90 for compute capability 9.0
  std::string arch() const { return "sm_" + std::to_string(sm()); }
};

Expected<CudaDeviceInfo> query_device(const CudaDriver& driver, int ordinal);

// "13.0" from cuDriverGetVersion's 13000; the driver's message on failure.
Expected<std::string> driver_version(const CudaDriver& driver);

// The (key, value) rows `kiln devices` prints for a device.
std::vector<std::pair<std::string, std::string>> device_properties(
    const CudaDeviceInfo& info, const std::string& driver_version, const std::string& nvrtc);

}  // namespace kiln::runtime::cuda
