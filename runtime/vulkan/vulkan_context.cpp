// Instance creation, compute-device enumeration and logical-device creation.
#include "runtime/vulkan/vulkan_context.h"

#include <dlfcn.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <link.h>

#include <string>
#include <string_view>
#include <vector>

#include "runtime/vulkan/vulkan_device_info.h"

namespace kiln::runtime::vulkan {
namespace {

// The loader unloads a driver (ICD) when its last instance is destroyed. kiln keeps every Vulkan
// driver it has used loaded for the rest of the process instead: opening a device again does not
// map and initialize an LLVM-based driver such as lavapipe again, and what a driver allocates once
// (lavapipe: on its first device enumeration) stays reachable from it rather than orphaned by the
// unload (LeakSanitizer reported it as a leak from an unknown module).
void keep_drivers_loaded() {
  std::vector<std::string> drivers;
  dl_iterate_phdr(
      [](dl_phdr_info* info, size_t, void* out) {
        std::string_view name = info->dlpi_name ? info->dlpi_name : "";
        const std::string_view file = name.substr(name.rfind('/') + 1);
        if (file.starts_with("libvulkan_") || file.starts_with("libGLX_nvidia"))
          static_cast<std::vector<std::string>*>(out)->emplace_back(name);
        return 0;
      },
      &drivers);
  // dlopen outside dl_iterate_phdr, which holds the loader's lock.
  for (const std::string& d : drivers) dlopen(d.c_str(), RTLD_NOW | RTLD_NOLOAD | RTLD_NODELETE);
}

// The first queue family with compute, or -1.
int compute_family(const InstanceFunctions& fn, VkPhysicalDevice physical,
                   uint32_t* timestamp_bits) {
  uint32_t count = 0;
  fn.vkGetPhysicalDeviceQueueFamilyProperties(physical, &count, nullptr);
  std::vector<VkQueueFamilyProperties> families(count);
  fn.vkGetPhysicalDeviceQueueFamilyProperties(physical, &count, families.data());
  for (uint32_t i = 0; i < count; ++i) {
    if ((families[i].queueFlags & VK_QUEUE_COMPUTE_BIT) != 0 && families[i].queueCount > 0) {
      *timestamp_bits = families[i].timestampValidBits;
      return static_cast<int>(i);
    }
  }
  return -1;
}

Expected<void> create_device(VulkanContext& ctx, const InstanceFunctions& ifn) {
  FeatureChain supported;
  ifn.vkGetPhysicalDeviceFeatures2(ctx.info.physical, &supported.features);
  FeatureChain enable;
  select_features(supported, enable);
  float priority = 1.0f;
  VkDeviceQueueCreateInfo queue_info{};
  queue_info.sType = VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO;
  queue_info.queueFamilyIndex = ctx.info.queue_family;
  queue_info.queueCount = 1;
  queue_info.pQueuePriorities = &priority;
  VkDeviceCreateInfo info{};
  info.sType = VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO;
  info.pNext = &enable.features;
  info.queueCreateInfoCount = 1;
  info.pQueueCreateInfos = &queue_info;
  auto created = vk_check(ifn.vkCreateDevice(ctx.info.physical, &info, nullptr, &ctx.device),
                          fmt::format("creating a device on {}", ctx.info.properties.deviceName));
  if (!created) return created;
  auto fn = load_device_functions(ifn, ctx.device);
  if (!fn) return std::unexpected(fn.error());
  ctx.fn = *fn;
  ctx.fn.vkGetDeviceQueue(ctx.device, ctx.info.queue_family, 0, &ctx.queue);
  return {};
}

}  // namespace

VulkanInstance::~VulkanInstance() {
  if (instance != VK_NULL_HANDLE) fn.vkDestroyInstance(instance, nullptr);
}

Expected<std::shared_ptr<VulkanInstance>> open_vulkan_instance() {
  auto loader = vulkan_loader();
  if (!loader) return std::unexpected(loader.error());
  uint32_t version = VK_API_VERSION_1_0;
  if ((*loader)->enumerate_instance_version != nullptr) {
    (*loader)->enumerate_instance_version(&version);
  }
  if (version < VK_API_VERSION_1_2) {
    return make_error(fmt::format("vulkan: the loader supports API {}; kiln needs 1.2",
                                  api_version_text(version)));
  }
  VkApplicationInfo app{};
  app.sType = VK_STRUCTURE_TYPE_APPLICATION_INFO;
  app.pApplicationName = "kiln";
  app.pEngineName = "kiln";
  app.apiVersion = VK_API_VERSION_1_2;
  VkInstanceCreateInfo info{};
  info.sType = VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO;
  info.pApplicationInfo = &app;
  auto instance = std::make_shared<VulkanInstance>();
  VkResult result = (*loader)->create_instance(&info, nullptr, &instance->instance);
  if (result == VK_ERROR_INCOMPATIBLE_DRIVER) {
    return make_error(
        "vulkan: no Vulkan driver found (creating an instance: VK_ERROR_INCOMPATIBLE_DRIVER; "
        "install one, e.g. mesa-vulkan-drivers)");
  }
  auto created = vk_check(result, "creating an instance");
  if (!created) return std::unexpected(created.error());
  auto fn = load_instance_functions(**loader, instance->instance);
  if (!fn) return std::unexpected(fn.error());
  instance->fn = *fn;
  return instance;
}

Expected<std::vector<ComputeDevice>> compute_devices(const VulkanInstance& instance) {
  const InstanceFunctions& fn = instance.fn;
  uint32_t count = 0;
  auto counted = vk_check(fn.vkEnumeratePhysicalDevices(instance.instance, &count, nullptr),
                          "enumerating physical devices");
  if (!counted) return std::unexpected(counted.error());
  std::vector<VkPhysicalDevice> physical(count);
  auto listed = vk_check(fn.vkEnumeratePhysicalDevices(instance.instance, &count, physical.data()),
                         "enumerating physical devices");
  if (!listed) return std::unexpected(listed.error());
  keep_drivers_loaded();
  std::vector<ComputeDevice> devices;
  for (VkPhysicalDevice p : physical) {
    ComputeDevice d;
    d.physical = p;
    int family = compute_family(fn, p, &d.timestamp_valid_bits);
    fn.vkGetPhysicalDeviceProperties(p, &d.properties);
    if (family < 0 || d.properties.apiVersion < VK_API_VERSION_1_2) continue;
    d.queue_family = static_cast<uint32_t>(family);
    fn.vkGetPhysicalDeviceMemoryProperties(p, &d.memory);
    FeatureChain supported;
    fn.vkGetPhysicalDeviceFeatures2(p, &supported.features);
    FeatureChain enable;
    d.features = select_features(supported, enable);
    devices.push_back(std::move(d));
  }
  return devices;
}

VulkanContext::~VulkanContext() {
  if (device != VK_NULL_HANDLE) {
    fn.vkDeviceWaitIdle(device);
    fn.vkDestroyDevice(device, nullptr);
  }
}

Expected<void> VulkanContext::submit(VkCommandBuffer command_buffer, VkFence fence) {
  VkSubmitInfo info{};
  info.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO;
  info.commandBufferCount = 1;
  info.pCommandBuffers = &command_buffer;
  std::lock_guard<std::mutex> lock(queue_mutex_);
  return vk_check(fn.vkQueueSubmit(queue, 1, &info, fence), "submitting to the compute queue");
}

void VulkanContext::wait_idle() {
  std::lock_guard<std::mutex> lock(queue_mutex_);
  fn.vkDeviceWaitIdle(device);
}

Expected<std::shared_ptr<VulkanContext>> open_vulkan_context(int index) {
  auto instance = open_vulkan_instance();
  if (!instance) return std::unexpected(instance.error());
  auto devices = compute_devices(**instance);
  if (!devices) return std::unexpected(devices.error());
  if (index < 0 || static_cast<size_t>(index) >= devices->size()) {
    std::vector<std::string> names;
    for (const ComputeDevice& d : *devices) names.emplace_back(d.properties.deviceName);
    return make_error(fmt::format("vulkan: no device {} ({} present{}{})", index, devices->size(),
                                  names.empty() ? "" : ": ", fmt::join(names, ", ")));
  }
  auto ctx = std::make_shared<VulkanContext>(*instance, std::move((*devices)[index]), index);
  auto created = create_device(*ctx, (*instance)->fn);
  if (!created) return std::unexpected(created.error());
  return ctx;
}

}  // namespace kiln::runtime::vulkan
