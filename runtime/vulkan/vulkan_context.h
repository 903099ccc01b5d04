// The Vulkan instance, the compute-capable physical devices in the loader's order, and one opened
// logical device with its compute queue, shared (by shared_ptr) by every object made from it.
#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "runtime/vulkan/vulkan_loader.h"

namespace kiln::runtime::vulkan {

// A VkInstance for API 1.2 and its entry points; destroyed with the last owner.
struct VulkanInstance {
  VkInstance instance = VK_NULL_HANDLE;
  InstanceFunctions fn;
  ~VulkanInstance();
};

Expected<std::shared_ptr<VulkanInstance>> open_vulkan_instance();

struct ComputeDevice {
  VkPhysicalDevice physical = VK_NULL_HANDLE;
  uint32_t queue_family = 0;  // the first family with VK_QUEUE_COMPUTE_BIT
  uint32_t timestamp_valid_bits = 0;
  VkPhysicalDeviceProperties properties{};
  VkPhysicalDeviceMemoryProperties memory{};
  std::vector<std::string> features;  // the optional features kiln enables on it
};

// The physical devices that have a compute queue, in the loader's order: kiln's device indices.
Expected<std::vector<ComputeDevice>> compute_devices(const VulkanInstance& instance);

// An opened device. Every kiln Vulkan object holds a shared_ptr to it, so the device and the
// instance are destroyed after everything made from them.
class VulkanContext {
 public:
  VulkanContext(std::shared_ptr<VulkanInstance> instance, ComputeDevice device, int index)
      : instance_(std::move(instance)), info(std::move(device)), index(index) {}
  ~VulkanContext();
  VulkanContext(const VulkanContext&) = delete;
  VulkanContext& operator=(const VulkanContext&) = delete;

  // vkQueueSubmit of one command buffer; the queue is shared by all streams, hence the mutex.
  Expected<void> submit(VkCommandBuffer command_buffer, VkFence fence);
  // Waits for all work on the device (error paths only: it stalls every stream).
  void wait_idle();

 private:
  std::shared_ptr<VulkanInstance> instance_;
  std::mutex queue_mutex_;

 public:
  ComputeDevice info;
  int index;
  VkDevice device = VK_NULL_HANDLE;
  VkQueue queue = VK_NULL_HANDLE;
  DeviceFunctions fn;
};

// Opens compute device `index`: "vulkan: no device 3 (1 present: llvmpipe ...)" when absent.
Expected<std::shared_ptr<VulkanContext>> open_vulkan_context(int index);

}  // namespace kiln::runtime::vulkan
