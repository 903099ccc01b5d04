// VulkanStream's launches and synchronize(): dispatch recording, submission of the batch's
// segments, host copies between them, timestamp read-back and the batch reset.
#include <fmt/format.h>

#include <cstring>

#include "runtime/vulkan/vulkan_stream.h"

namespace kiln::runtime::vulkan {
namespace {

// The descriptor range: the requested bytes rounded to whole words, within the block.
VkDeviceSize buffer_range(const VulkanDeviceMemory& memory) {
  VkDeviceSize words = (std::max<VkDeviceSize>(memory.bytes(), 4) + 3) / 4 * 4;
  return std::min(words, memory.block()->buffer.size);
}

}  // namespace

// A descriptor set of `program`'s layout pointing binding i at args[i].
Expected<VkDescriptorSet> VulkanStream::bind_arguments(const VulkanProgram& program,
                                                       const std::vector<DeviceMemory*>& args) {
  const VulkanProgram* vk_program = &program;
  std::vector<VkDescriptorBufferInfo> infos;
  std::vector<VkWriteDescriptorSet> writes;
  infos.reserve(vk_program->bindings.size());
  uint64_t max_range = ctx_->info.properties.limits.maxStorageBufferRange;
  for (uint32_t binding : vk_program->bindings) {
    const VulkanDeviceMemory* memory =
        binding < args.size() ? dynamic_cast<const VulkanDeviceMemory*>(args[binding]) : nullptr;
    if (memory == nullptr) {
      return make_error(fmt::format(
          "vulkan: launch: the kernel binds buffer {} but {} arguments were given{}", binding,
          args.size(), binding < args.size() ? " (argument is null or of another backend)" : ""));
    }
    if (memory->bytes() > max_range) {
      return make_error(
          fmt::format("vulkan: launch: buffer {} of {} bytes exceeds the device's "
                      "storage buffer range ({} bytes)",
                      binding, memory->bytes(), max_range));
    }
    infos.push_back(
        VkDescriptorBufferInfo{memory->block()->buffer.buffer, 0, buffer_range(*memory)});
    VkWriteDescriptorSet write{};
    write.sType = VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET;
    write.dstBinding = binding;
    write.descriptorCount = 1;
    write.descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
    write.pBufferInfo = &infos.back();
    writes.push_back(write);
  }
  auto set = descriptor_set(*vk_program);
  if (!set) return std::unexpected(set.error());
  for (VkWriteDescriptorSet& w : writes) w.dstSet = *set;
  ctx_->fn.vkUpdateDescriptorSets(ctx_->device, static_cast<uint32_t>(writes.size()), writes.data(),
                                  0, nullptr);
  return *set;
}

Expected<void> VulkanStream::launch(const GpuProgram& program,
                                    const std::vector<DeviceMemory*>& args, bool timed,
                                    std::optional<int64_t> outer_extent) {
  const auto* vk_program = dynamic_cast<const VulkanProgram*>(&program);
  if (vk_program == nullptr) return make_error("vulkan: launch of a program of another backend");
  auto dims = dynamic_launch(vk_program->launch, outer_extent, vk_program->entry);
  if (!dims) return make_error("vulkan: " + dims.error().message);
  const auto& limits = ctx_->info.properties.limits;
  if (dims->shape.groups < 1 || dims->shape.groups > limits.maxComputeWorkGroupCount[0])
    return make_error(fmt::format("vulkan: launch of {} workgroups is outside [1, {}] on vulkan:{}",
                                  dims->shape.groups, limits.maxComputeWorkGroupCount[0],
                                  ctx_->index));
  auto set = bind_arguments(*vk_program, args);
  if (!set) return std::unexpected(set.error());
  auto cmd = next_command();
  if (!cmd) return std::unexpected(cmd.error());
  VkQueryPool pool = VK_NULL_HANDLE;
  uint32_t query = 0;
  // Each timestamp is written once every earlier command has finished its compute stage: the
  // first after the previous dispatch, the second after this one.
  if (timed) {
    auto q = timestamp_query(*cmd, &pool);
    if (!q) return std::unexpected(q.error());
    query = *q;
    ctx_->fn.vkCmdWriteTimestamp(*cmd, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, pool, query);
  }
  ctx_->fn.vkCmdBindPipeline(*cmd, VK_PIPELINE_BIND_POINT_COMPUTE, vk_program->pipeline);
  ctx_->fn.vkCmdBindDescriptorSets(*cmd, VK_PIPELINE_BIND_POINT_COMPUTE,
                                   vk_program->pipeline_layout, 0, 1, &*set, 0, nullptr);
  if (vk_program->launch.dynamic_tasks > 0)
    ctx_->fn.vkCmdPushConstants(*cmd, vk_program->pipeline_layout, VK_SHADER_STAGE_COMPUTE_BIT, 0,
                                sizeof(dims->outer), &dims->outer);
  ctx_->fn.vkCmdDispatch(*cmd, static_cast<uint32_t>(dims->shape.groups), 1, 1);
  if (timed)
    ctx_->fn.vkCmdWriteTimestamp(*cmd, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, pool, query + 1);
  for (uint32_t binding : vk_program->bindings) {
    used_blocks_.push_back(static_cast<const VulkanDeviceMemory*>(args[binding])->block());
  }
  used_programs_.push_back(vk_program->shared_from_this());
  return {};
}

Expected<void> VulkanStream::run_steps() {
  auto closed = close_segment();
  if (!closed) return closed;
  for (const Step& step : steps_) {
    if (step.commands != VK_NULL_HANDLE) {
      auto submitted = ctx_->submit(step.commands, fence_);
      if (!submitted) return submitted;
      auto waited =
          vk_check(ctx_->fn.vkWaitForFences(ctx_->device, 1, &fence_, VK_TRUE, UINT64_MAX),
                   "waiting for the stream's commands");
      if (!waited) return waited;
      auto reset = vk_check(ctx_->fn.vkResetFences(ctx_->device, 1, &fence_), "resetting a fence");
      if (!reset) return reset;
    } else if (step.host_src != nullptr) {
      std::memcpy(step.mapped->mapped, step.host_src, step.bytes);
      flush_buffer(*ctx_, *step.mapped);
    } else {
      invalidate_buffer(*ctx_, *step.mapped);
      std::memcpy(step.host_dst, step.mapped->mapped, step.bytes);
    }
  }
  for (const Step& read : staged_reads_) {
    invalidate_buffer(*ctx_, *read.mapped);
    std::memcpy(read.host_dst, read.mapped->mapped, read.bytes);
  }
  read_timestamps();
  return {};
}

void VulkanStream::read_timestamps() {
  times_ms_.clear();
  uint32_t valid_bits = ctx_->info.timestamp_valid_bits;
  uint64_t mask = valid_bits >= 64 ? ~uint64_t{0} : (uint64_t{1} << valid_bits) - 1;
  double period_ns = ctx_->info.properties.limits.timestampPeriod;
  for (uint32_t i = 0; i < timed_launches_; ++i) {
    uint32_t query = 2 * i;
    uint64_t stamps[2] = {0, 0};
    VkResult r = ctx_->fn.vkGetQueryPoolResults(ctx_->device, query_pools_[query / kQueriesPerPool],
                                                query % kQueriesPerPool, 2, sizeof(stamps), stamps,
                                                sizeof(uint64_t),
                                                VK_QUERY_RESULT_64_BIT | VK_QUERY_RESULT_WAIT_BIT);
    uint64_t ticks = r == VK_SUCCESS ? ((stamps[1] - stamps[0]) & mask) : 0;
    times_ms_.push_back(static_cast<double>(ticks) * period_ns * 1e-6);
  }
}

Expected<void> VulkanStream::synchronize() {
  auto ran = run_steps();
  if (!ran) ctx_->wait_idle();  // a failed wait may leave the batch running: let it finish first
  reset_batch();
  if (!ran) {
    return make_error(fmt::format("{} (stream on vulkan:{}; the batch was dropped)",
                                  ran.error().message, ctx_->index));
  }
  return {};
}

// Forgets the batch: command buffers and descriptor sets are recycled, staging buffers freed, and
// the blocks and programs the batch used are let go (blocks may now return to the pool).
void VulkanStream::reset_batch() {
  if (open_ != VK_NULL_HANDLE) ctx_->fn.vkEndCommandBuffer(open_);
  open_ = VK_NULL_HANDLE;
  open_has_commands_ = false;
  if (command_pool_ != VK_NULL_HANDLE) ctx_->fn.vkResetCommandPool(ctx_->device, command_pool_, 0);
  next_buffer_ = 0;
  for (VkDescriptorPool pool : descriptor_pools_)
    ctx_->fn.vkResetDescriptorPool(ctx_->device, pool, 0);
  descriptor_pool_ = 0;
  timed_launches_ = 0;
  for (auto& buffer : staging_) destroy_buffer(*ctx_, *buffer);
  staging_.clear();
  steps_.clear();
  staged_reads_.clear();
  used_blocks_.clear();
  used_programs_.clear();
}

}  // namespace kiln::runtime::vulkan
