// The Vulkan loader opened with dlopen and its entry points fetched by name, so kiln has no
// link-time Vulkan dependency; also VkResult names for error messages.
#pragma once

#define VK_NO_PROTOTYPES
#include <vulkan/vulkan.h>

#include <string>

#include "kiln/error.h"

namespace kiln::runtime::vulkan {

// Entry points fetched with vkGetInstanceProcAddr(instance, ...).
#define KILN_VK_INSTANCE_FUNCTIONS(X)         \
  X(vkDestroyInstance)                        \
  X(vkEnumeratePhysicalDevices)               \
  X(vkGetPhysicalDeviceProperties)            \
  X(vkGetPhysicalDeviceFeatures2)             \
  X(vkGetPhysicalDeviceQueueFamilyProperties) \
  X(vkGetPhysicalDeviceMemoryProperties)      \
  X(vkCreateDevice)                           \
  X(vkGetDeviceProcAddr)

// Entry points fetched with vkGetDeviceProcAddr(device, ...).
#define KILN_VK_DEVICE_FUNCTIONS(X) \
  X(vkDestroyDevice)                \
  X(vkGetDeviceQueue)               \
  X(vkQueueSubmit)                  \
  X(vkDeviceWaitIdle)               \
  X(vkCreateBuffer)                 \
  X(vkDestroyBuffer)                \
  X(vkGetBufferMemoryRequirements)  \
  X(vkAllocateMemory)               \
  X(vkFreeMemory)                   \
  X(vkBindBufferMemory)             \
  X(vkMapMemory)                    \
  X(vkUnmapMemory)                  \
  X(vkFlushMappedMemoryRanges)      \
  X(vkInvalidateMappedMemoryRanges) \
  X(vkCreateShaderModule)           \
  X(vkDestroyShaderModule)          \
  X(vkCreateDescriptorSetLayout)    \
  X(vkDestroyDescriptorSetLayout)   \
  X(vkCreatePipelineLayout)         \
  X(vkDestroyPipelineLayout)        \
  X(vkCreatePipelineCache)          \
  X(vkDestroyPipelineCache)         \
  X(vkCreateComputePipelines)       \
  X(vkDestroyPipeline)              \
  X(vkCreateDescriptorPool)         \
  X(vkDestroyDescriptorPool)        \
  X(vkResetDescriptorPool)          \
  X(vkAllocateDescriptorSets)       \
  X(vkUpdateDescriptorSets)         \
  X(vkCreateCommandPool)            \
  X(vkDestroyCommandPool)           \
  X(vkResetCommandPool)             \
  X(vkAllocateCommandBuffers)       \
  X(vkBeginCommandBuffer)           \
  X(vkEndCommandBuffer)             \
  X(vkCmdCopyBuffer)                \
  X(vkCmdBindPipeline)              \
  X(vkCmdBindDescriptorSets)        \
  X(vkCmdDispatch)                  \
  X(vkCmdPushConstants)             \
  X(vkCmdPipelineBarrier)           \
  X(vkCmdWriteTimestamp)            \
  X(vkCmdResetQueryPool)            \
  X(vkCreateQueryPool)              \
  X(vkDestroyQueryPool)             \
  X(vkGetQueryPoolResults)          \
  X(vkCreateFence)                  \
  X(vkDestroyFence)                 \
  X(vkWaitForFences)                \
  X(vkResetFences)

#define KILN_VK_DECLARE_FUNCTION(name) PFN_##name name = nullptr;

struct InstanceFunctions {
  KILN_VK_INSTANCE_FUNCTIONS(KILN_VK_DECLARE_FUNCTION)
};

struct DeviceFunctions {
  KILN_VK_DEVICE_FUNCTIONS(KILN_VK_DECLARE_FUNCTION)
};

// The process-wide loader: opened once, kept open for the life of the process (drivers such as
// lavapipe do not survive being unloaded and loaded again).
struct VulkanLoader {
  PFN_vkGetInstanceProcAddr get_instance_proc_addr = nullptr;
  PFN_vkCreateInstance create_instance = nullptr;
  PFN_vkEnumerateInstanceVersion enumerate_instance_version = nullptr;  // null: Vulkan 1.0
};

// The loader, or why it is unusable ("vulkan: libvulkan.so.1 not found (...)").
Expected<const VulkanLoader*> vulkan_loader();

Expected<InstanceFunctions> load_instance_functions(const VulkanLoader& loader,
                                                    VkInstance instance);
Expected<DeviceFunctions> load_device_functions(const InstanceFunctions& fn, VkDevice device);

// "VK_ERROR_OUT_OF_DEVICE_MEMORY", or "VkResult(-1000)" for codes this file does not name.
std::string vk_result_name(VkResult result);

// Success, or an error "vulkan: <what>: <VkResult name>".
Expected<void> vk_check(VkResult result, const std::string& what);

}  // namespace kiln::runtime::vulkan
