// Device queries through cuDeviceGet* (no context needed) and their printed form.
#include "runtime/cuda/cuda_device_info.h"

#include <fmt/format.h>

namespace kiln::runtime::cuda {

Expected<CudaDeviceInfo> query_device(const CudaDriver& d, int ordinal) {
  CudaDeviceInfo info;
  info.ordinal = ordinal;
  CUdevice device = 0;
  auto ok = d.check(d.cuDeviceGet(&device, ordinal), fmt::format("cuDeviceGet({})", ordinal));
  char name[256] = {};
  if (ok) ok = d.check(d.cuDeviceGetName(name, sizeof(name) - 1, device), "cuDeviceGetName");
  const std::pair<int, int*> attributes[] = {
      {kAttrComputeCapabilityMajor, &info.major},
      {kAttrComputeCapabilityMinor, &info.minor},
      {kAttrMultiprocessorCount, &info.sm_count},
      {kAttrMaxThreadsPerBlock, &info.max_threads_per_block},
  };
  for (const auto& [attribute, out] : attributes)
    if (ok)
      ok = d.check(d.cuDeviceGetAttribute(out, attribute, device),
                   fmt::format("cuDeviceGetAttribute({}) of device {}", attribute, ordinal));
  if (ok) ok = d.check(d.cuDeviceTotalMem(&info.total_memory, device), "cuDeviceTotalMem");
  if (!ok) return std::unexpected(ok.error());
  info.name = name;
  return info;
}

Expected<std::string> driver_version(const CudaDriver& d) {
  int version = 0;
  if (auto ok = d.check(d.cuDriverGetVersion(&version), "cuDriverGetVersion"); !ok)
    return std::unexpected(ok.error());
  return fmt::format("{}.{}", version / 1000, version % 1000 / 10);
}

std::vector<std::pair<std::string, std::string>> device_properties(
    const CudaDeviceInfo& info, const std::string& driver_version, const std::string& nvrtc) {
  return {
      {"name", info.name},
      {"compute capability", fmt::format("{}.{} ({})", info.major, info.minor, info.arch())},
      {"memory", fmt::format("{:.1f} GiB", static_cast<double>(info.total_memory) /
                                               static_cast<double>(size_t{1} << 30))},
      {"multiprocessors", std::to_string(info.sm_count)},
      {"max threads per block", std::to_string(info.max_threads_per_block)},
      {"driver", "CUDA " + driver_version},
      {"nvrtc", nvrtc},
  };
}

}  // namespace kiln::runtime::cuda
