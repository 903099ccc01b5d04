// Feature selection and the printable description of a Vulkan physical device.
#include "runtime/vulkan/vulkan_device_info.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <string_view>

namespace kiln::runtime::vulkan {
namespace {

std::string device_type_name(VkPhysicalDeviceType type) {
  switch (type) {
    case VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU:
      return "integrated gpu";
    case VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU:
      return "discrete gpu";
    case VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU:
      return "virtual gpu";
    case VK_PHYSICAL_DEVICE_TYPE_CPU:
      return "cpu";
    case VK_PHYSICAL_DEVICE_TYPE_OTHER:
    case VK_PHYSICAL_DEVICE_TYPE_MAX_ENUM:  // not a type: the enum's 32-bit sentinel
      break;
  }
  return "other";
}

std::string heap_text(const VkMemoryHeap& heap) {
  return fmt::format("{} MiB{}", heap.size >> 20,
                     (heap.flags & VK_MEMORY_HEAP_DEVICE_LOCAL_BIT) != 0 ? " device-local" : "");
}

}  // namespace

FeatureChain::FeatureChain() {
  features.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2;
  vulkan11.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES;
  vulkan12.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES;
  features.pNext = &vulkan11;
  vulkan11.pNext = &vulkan12;
}

std::vector<std::string> select_features(const FeatureChain& supported, FeatureChain& enable) {
  std::vector<std::string> names;
  auto pick = [&](VkBool32 has, VkBool32& on, const char* name) {
    if (has == VK_TRUE) {
      on = VK_TRUE;
      names.emplace_back(name);
    }
  };
  pick(supported.features.features.shaderInt64, enable.features.features.shaderInt64,
       "shaderInt64");
  pick(supported.features.features.shaderFloat64, enable.features.features.shaderFloat64,
       "shaderFloat64");
  pick(supported.features.features.shaderInt16, enable.features.features.shaderInt16,
       "shaderInt16");
  pick(supported.vulkan12.storageBuffer8BitAccess, enable.vulkan12.storageBuffer8BitAccess,
       "storageBuffer8BitAccess");
  pick(supported.vulkan12.uniformAndStorageBuffer8BitAccess,
       enable.vulkan12.uniformAndStorageBuffer8BitAccess, "uniformAndStorageBuffer8BitAccess");
  pick(supported.vulkan11.storageBuffer16BitAccess, enable.vulkan11.storageBuffer16BitAccess,
       "storageBuffer16BitAccess");
  pick(supported.vulkan12.shaderFloat16, enable.vulkan12.shaderFloat16, "shaderFloat16");
  pick(supported.vulkan12.shaderInt8, enable.vulkan12.shaderInt8, "shaderInt8");
  return names;
}

std::string api_version_text(uint32_t version) {
  return fmt::format("{}.{}.{}", VK_API_VERSION_MAJOR(version), VK_API_VERSION_MINOR(version),
                     VK_API_VERSION_PATCH(version));
}

std::string ieee_arithmetic(const VkPhysicalDeviceProperties& p) {
  if (std::string_view(p.deviceName).starts_with("llvmpipe"))
    return "no: with a constant 0 or two equal operands, x*0, 0/x and x-x give 0 and x/0 an "
           "undefined value for every x (inf, NaN and -0 included); see docs/graph-format.md";
  return "yes";
}

std::optional<int64_t> loop_iteration_limit(const VkPhysicalDeviceProperties& p) {
  if (std::string_view(p.deviceName).starts_with("llvmpipe")) return kLlvmpipeLoopIterations;
  return std::nullopt;
}

std::vector<std::pair<std::string, std::string>> describe_device(
    const VkPhysicalDeviceProperties& p, const VkPhysicalDeviceMemoryProperties& memory,
    const std::vector<std::string>& features) {
  std::vector<std::pair<std::string, std::string>> out;
  out.emplace_back("name", p.deviceName);
  out.emplace_back("type", device_type_name(p.deviceType));
  out.emplace_back("vendor", fmt::format("0x{:04x}", p.vendorID));
  out.emplace_back("driver version", fmt::format("0x{:08x}", p.driverVersion));
  out.emplace_back("api version", api_version_text(p.apiVersion));
  const auto& l = p.limits;
  out.emplace_back("max workgroup size",
                   fmt::format("{} x {} x {} ({} invocations)", l.maxComputeWorkGroupSize[0],
                               l.maxComputeWorkGroupSize[1], l.maxComputeWorkGroupSize[2],
                               l.maxComputeWorkGroupInvocations));
  out.emplace_back("max workgroup count",
                   fmt::format("{} x {} x {}", l.maxComputeWorkGroupCount[0],
                               l.maxComputeWorkGroupCount[1], l.maxComputeWorkGroupCount[2]));
  out.emplace_back("shared memory", fmt::format("{} bytes", l.maxComputeSharedMemorySize));
  std::vector<std::string> heaps;
  for (uint32_t i = 0; i < memory.memoryHeapCount; ++i)
    heaps.push_back(heap_text(memory.memoryHeaps[i]));
  out.emplace_back("memory heaps", fmt::format("{}", fmt::join(heaps, ", ")));
  out.emplace_back("features",
                   features.empty() ? "none" : fmt::format("{}", fmt::join(features, " ")));
  out.emplace_back("timestamp period", fmt::format("{} ns", l.timestampPeriod));
  out.emplace_back("ieee arithmetic", ieee_arithmetic(p));
  const std::optional<int64_t> loops = loop_iteration_limit(p);
  out.emplace_back("loop iteration limit",
                   loops ? fmt::format("{} per invocation, all loops together; kiln refuses "
                                       "schedules over it (see docs/graph-format.md)",
                                       *loops)
                         : "none");
  return out;
}

}  // namespace kiln::runtime::vulkan
