// A loaded kernel: SPIR-V shader module, the descriptor set layout of its storage buffers (found by
// reflecting the module's Binding decorations), pipeline layout and compute pipeline.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "codegen/gpu/gpu_source.h"
#include "runtime/gpu_backend.h"
#include "runtime/vulkan/vulkan_context.h"

namespace kiln::runtime::vulkan {

// The binding numbers of descriptor set 0 that `words` declares, ascending; an error if the words
// are not a SPIR-V module or use another descriptor set.
Expected<std::vector<uint32_t>> reflect_bindings(const std::vector<uint32_t>& words);

class VulkanProgram : public GpuProgram, public std::enable_shared_from_this<VulkanProgram> {
 public:
  explicit VulkanProgram(std::shared_ptr<VulkanContext> ctx) : ctx_(std::move(ctx)) {}
  ~VulkanProgram() override;
  VulkanProgram(const VulkanProgram&) = delete;
  VulkanProgram& operator=(const VulkanProgram&) = delete;

  VkShaderModule module = VK_NULL_HANDLE;
  VkDescriptorSetLayout set_layout = VK_NULL_HANDLE;
  VkPipelineLayout pipeline_layout = VK_NULL_HANDLE;
  VkPipeline pipeline = VK_NULL_HANDLE;
  // The bindings the module declares; binding i takes launch argument i. Arguments the module
  // does not bind (a buffer the optimizer found unused) are accepted and ignored.
  std::vector<uint32_t> bindings;
  // The launch shape the source was written for (a dynamic kernel's groups: launch_at), and the
  // entry point, for messages.
  codegen::gpu::LaunchShape launch;
  std::string entry;

 private:
  std::shared_ptr<VulkanContext> ctx_;
};

// Builds the pipeline for `binary` (SPIR-V bytes from compile()) through `cache`.
Expected<std::shared_ptr<const VulkanProgram>> load_program(
    const std::shared_ptr<VulkanContext>& ctx, VkPipelineCache cache,
    const codegen::gpu::GpuSource& source, const std::vector<uint8_t>& binary);

}  // namespace kiln::runtime::vulkan
