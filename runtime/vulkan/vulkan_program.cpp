// SPIR-V binding reflection and compute-pipeline creation.
#include "runtime/vulkan/vulkan_program.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <map>

namespace kiln::runtime::vulkan {
namespace {

constexpr uint32_t kSpirvMagic = 0x07230203;
constexpr uint32_t kOpDecorate = 71;
constexpr uint32_t kDecorationBinding = 33;
constexpr uint32_t kDecorationDescriptorSet = 34;

Expected<void> create_layouts(VulkanContext& ctx, VulkanProgram& program) {
  std::vector<VkDescriptorSetLayoutBinding> layout_bindings;
  for (uint32_t b : program.bindings) {
    VkDescriptorSetLayoutBinding lb{};
    lb.binding = b;
    lb.descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
    lb.descriptorCount = 1;
    lb.stageFlags = VK_SHADER_STAGE_COMPUTE_BIT;
    layout_bindings.push_back(lb);
  }
  VkDescriptorSetLayoutCreateInfo set_info{};
  set_info.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO;
  set_info.bindingCount = static_cast<uint32_t>(layout_bindings.size());
  set_info.pBindings = layout_bindings.data();
  auto set = vk_check(
      ctx.fn.vkCreateDescriptorSetLayout(ctx.device, &set_info, nullptr, &program.set_layout),
      "creating a descriptor set layout");
  if (!set) return set;
  VkPipelineLayoutCreateInfo layout_info{};
  layout_info.sType = VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO;
  layout_info.setLayoutCount = 1;
  layout_info.pSetLayouts = &program.set_layout;
  // A dynamic kernel's outer extent: the push constant block KilnSizes { int outer; }.
  VkPushConstantRange sizes{};
  sizes.stageFlags = VK_SHADER_STAGE_COMPUTE_BIT;
  sizes.offset = 0;
  sizes.size = sizeof(int32_t);
  if (program.launch.dynamic_tasks > 0) {
    layout_info.pushConstantRangeCount = 1;
    layout_info.pPushConstantRanges = &sizes;
  }
  return vk_check(
      ctx.fn.vkCreatePipelineLayout(ctx.device, &layout_info, nullptr, &program.pipeline_layout),
      "creating a pipeline layout");
}

}  // namespace

Expected<std::vector<uint32_t>> reflect_bindings(const std::vector<uint32_t>& words) {
  if (words.size() < 5 || words[0] != kSpirvMagic) {
    return make_error("vulkan: the binary is not a SPIR-V module (bad magic number)");
  }
  std::map<uint32_t, uint32_t> binding_of;  // result id -> binding
  std::map<uint32_t, uint32_t> set_of;      // result id -> descriptor set
  for (size_t i = 5; i < words.size();) {
    uint32_t count = words[i] >> 16;
    uint32_t opcode = words[i] & 0xffff;
    if (count == 0 || i + count > words.size()) {
      return make_error(fmt::format("vulkan: malformed SPIR-V instruction at word {}", i));
    }
    if (opcode == kOpDecorate && count >= 4) {
      if (words[i + 2] == kDecorationBinding) binding_of[words[i + 1]] = words[i + 3];
      if (words[i + 2] == kDecorationDescriptorSet) set_of[words[i + 1]] = words[i + 3];
    }
    i += count;
  }
  std::vector<uint32_t> bindings;
  for (const auto& [id, binding] : binding_of) {
    auto set = set_of.find(id);
    if (set != set_of.end() && set->second != 0) {
      return make_error(
          fmt::format("vulkan: the shader uses descriptor set {}; kiln binds buffers at set 0 only",
                      set->second));
    }
    bindings.push_back(binding);
  }
  std::sort(bindings.begin(), bindings.end());
  bindings.erase(std::unique(bindings.begin(), bindings.end()), bindings.end());
  return bindings;
}

VulkanProgram::~VulkanProgram() {
  VulkanContext& ctx = *ctx_;
  if (pipeline != VK_NULL_HANDLE) ctx.fn.vkDestroyPipeline(ctx.device, pipeline, nullptr);
  if (pipeline_layout != VK_NULL_HANDLE) {
    ctx.fn.vkDestroyPipelineLayout(ctx.device, pipeline_layout, nullptr);
  }
  if (set_layout != VK_NULL_HANDLE)
    ctx.fn.vkDestroyDescriptorSetLayout(ctx.device, set_layout, nullptr);
  if (module != VK_NULL_HANDLE) ctx.fn.vkDestroyShaderModule(ctx.device, module, nullptr);
}

Expected<std::shared_ptr<const VulkanProgram>> load_program(
    const std::shared_ptr<VulkanContext>& ctx, VkPipelineCache cache,
    const codegen::gpu::GpuSource& source, const std::vector<uint8_t>& binary) {
  // The workgroup count is checked at launch (VulkanStream::launch): a dynamic kernel's depends on
  // the extent it is launched at.
  if (binary.size() % 4 != 0) {
    return make_error(
        fmt::format("vulkan: SPIR-V binary of {} bytes is not whole words", binary.size()));
  }
  std::vector<uint32_t> words(binary.size() / 4);
  std::memcpy(words.data(), binary.data(), binary.size());
  auto bindings = reflect_bindings(words);
  if (!bindings) return std::unexpected(bindings.error());
  // Past the limit, drivers fail in their own ways (lavapipe, 32, crashed running the kernel).
  const uint32_t limit = ctx->info.properties.limits.maxPerStageDescriptorStorageBuffers;
  if (bindings->size() > limit)
    return make_error(
        fmt::format("vulkan: kernel '{}' binds {} buffers; {} binds at most {} to one kernel "
                    "(maxPerStageDescriptorStorageBuffers)",
                    source.entry.empty() ? "main" : source.entry, bindings->size(),
                    ctx->info.properties.deviceName, limit));
  auto program = std::make_shared<VulkanProgram>(ctx);
  program->bindings = std::move(*bindings);
  program->launch = source.launch;
  program->entry = source.entry.empty() ? "main" : source.entry;
  VkShaderModuleCreateInfo module_info{};
  module_info.sType = VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO;
  module_info.codeSize = binary.size();
  module_info.pCode = words.data();
  auto module =
      vk_check(ctx->fn.vkCreateShaderModule(ctx->device, &module_info, nullptr, &program->module),
               "creating a shader module");
  if (!module) return std::unexpected(module.error());
  auto layouts = create_layouts(*ctx, *program);
  if (!layouts) return std::unexpected(layouts.error());
  VkComputePipelineCreateInfo info{};
  info.sType = VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO;
  info.stage.sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO;
  info.stage.stage = VK_SHADER_STAGE_COMPUTE_BIT;
  info.stage.module = program->module;
  std::string entry = source.entry.empty() ? "main" : source.entry;
  info.stage.pName = entry.c_str();
  info.layout = program->pipeline_layout;
  auto pipeline = vk_check(
      ctx->fn.vkCreateComputePipelines(ctx->device, cache, 1, &info, nullptr, &program->pipeline),
      "creating a compute pipeline");
  if (!pipeline) return std::unexpected(pipeline.error());
  return std::shared_ptr<const VulkanProgram>(std::move(program));
}

}  // namespace kiln::runtime::vulkan
