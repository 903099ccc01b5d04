// dlopen of libvulkan.so.1 and lookup of every entry point kiln uses.
#include "runtime/vulkan/vulkan_loader.h"

#include <dlfcn.h>
#include <fmt/format.h>

#include <mutex>
#include <string_view>
#include <utility>

namespace kiln::runtime::vulkan {
namespace {

Expected<VulkanLoader> open_loader() {
  void* handle = dlopen("libvulkan.so.1", RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* why = dlerror();
    return make_error(fmt::format(
        "vulkan: libvulkan.so.1 not found (install a Vulkan loader, e.g. libvulkan1): {}",
        why != nullptr ? why : "dlopen failed"));
  }
  VulkanLoader loader;
  loader.get_instance_proc_addr =
      reinterpret_cast<PFN_vkGetInstanceProcAddr>(dlsym(handle, "vkGetInstanceProcAddr"));
  if (loader.get_instance_proc_addr == nullptr) {
    return make_error("vulkan: libvulkan.so.1 has no vkGetInstanceProcAddr (not a Vulkan loader)");
  }
  loader.create_instance = reinterpret_cast<PFN_vkCreateInstance>(
      loader.get_instance_proc_addr(nullptr, "vkCreateInstance"));
  loader.enumerate_instance_version = reinterpret_cast<PFN_vkEnumerateInstanceVersion>(
      loader.get_instance_proc_addr(nullptr, "vkEnumerateInstanceVersion"));
  if (loader.create_instance == nullptr) {
    return make_error("vulkan: the loader does not provide vkCreateInstance");
  }
  return loader;
}

}  // namespace

Expected<const VulkanLoader*> vulkan_loader() {
  static std::once_flag once;
  static Expected<VulkanLoader> loader = make_error("vulkan: loader not opened");
  std::call_once(once, [] { loader = open_loader(); });
  if (!loader) return std::unexpected(loader.error());
  return &*loader;
}

Expected<InstanceFunctions> load_instance_functions(const VulkanLoader& loader,
                                                    VkInstance instance) {
  InstanceFunctions fn;
#define KILN_VK_LOAD(name)                                                                \
  fn.name = reinterpret_cast<PFN_##name>(loader.get_instance_proc_addr(instance, #name)); \
  if (fn.name == nullptr) return make_error("vulkan: the loader does not provide " #name);
  KILN_VK_INSTANCE_FUNCTIONS(KILN_VK_LOAD)
#undef KILN_VK_LOAD
  return fn;
}

Expected<DeviceFunctions> load_device_functions(const InstanceFunctions& instance_fn,
                                                VkDevice device) {
  DeviceFunctions fn;
#define KILN_VK_LOAD(name)                                                                \
  fn.name = reinterpret_cast<PFN_##name>(instance_fn.vkGetDeviceProcAddr(device, #name)); \
  if (fn.name == nullptr) return make_error("vulkan: the driver does not provide " #name);
  KILN_VK_DEVICE_FUNCTIONS(KILN_VK_LOAD)
#undef KILN_VK_LOAD
  return fn;
}

std::string vk_result_name(VkResult result) {
  // The codes kiln can meet by name; VkResult grows with every extension, others print as numbers.
  static constexpr std::pair<VkResult, std::string_view> kNames[] = {
#define KILN_VK_RESULT(name) {name, #name},
      KILN_VK_RESULT(VK_SUCCESS)
      KILN_VK_RESULT(VK_NOT_READY)
      KILN_VK_RESULT(VK_TIMEOUT)
      KILN_VK_RESULT(VK_INCOMPLETE)
      KILN_VK_RESULT(VK_ERROR_OUT_OF_HOST_MEMORY)
      KILN_VK_RESULT(VK_ERROR_OUT_OF_DEVICE_MEMORY)
      KILN_VK_RESULT(VK_ERROR_INITIALIZATION_FAILED)
      KILN_VK_RESULT(VK_ERROR_DEVICE_LOST)
      KILN_VK_RESULT(VK_ERROR_MEMORY_MAP_FAILED)
      KILN_VK_RESULT(VK_ERROR_LAYER_NOT_PRESENT)
      KILN_VK_RESULT(VK_ERROR_EXTENSION_NOT_PRESENT)
      KILN_VK_RESULT(VK_ERROR_FEATURE_NOT_PRESENT)
      KILN_VK_RESULT(VK_ERROR_INCOMPATIBLE_DRIVER)
      KILN_VK_RESULT(VK_ERROR_TOO_MANY_OBJECTS)
      KILN_VK_RESULT(VK_ERROR_FORMAT_NOT_SUPPORTED)
      KILN_VK_RESULT(VK_ERROR_FRAGMENTED_POOL)
      KILN_VK_RESULT(VK_ERROR_UNKNOWN)
      KILN_VK_RESULT(VK_ERROR_OUT_OF_POOL_MEMORY)
      KILN_VK_RESULT(VK_ERROR_INVALID_EXTERNAL_HANDLE)
      KILN_VK_RESULT(VK_ERROR_FRAGMENTATION)
      KILN_VK_RESULT(VK_ERROR_INVALID_OPAQUE_CAPTURE_ADDRESS)
      KILN_VK_RESULT(VK_PIPELINE_COMPILE_REQUIRED)
      KILN_VK_RESULT(VK_ERROR_INVALID_SHADER_NV)
#undef KILN_VK_RESULT
  };
  for (const auto& [code, name] : kNames)
    if (code == result) return std::string(name);
  return fmt::format("VkResult({})", static_cast<int>(result));
}

Expected<void> vk_check(VkResult result, const std::string& what) {
  if (result == VK_SUCCESS) return {};
  return make_error(fmt::format("vulkan: {}: {}", what, vk_result_name(result)));
}

}  // namespace kiln::runtime::vulkan
