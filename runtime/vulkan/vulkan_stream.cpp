// Recording and submission of copies and dispatches, descriptor sets and timestamp queries.
#include "runtime/vulkan/vulkan_stream.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>

namespace kiln::runtime::vulkan {
namespace {

constexpr uint32_t kSetsPerPool = 64;
constexpr uint32_t kBuffersPerPool = 1024;

const VulkanDeviceMemory* as_vulkan(const DeviceMemory* memory) {
  return dynamic_cast<const VulkanDeviceMemory*>(memory);
}

}  // namespace

Expected<std::unique_ptr<VulkanStream>> VulkanStream::create(std::shared_ptr<VulkanContext> ctx) {
  std::unique_ptr<VulkanStream> stream(new VulkanStream(std::move(ctx)));
  auto ok = stream->init();
  if (!ok) return std::unexpected(ok.error());
  return stream;
}

Expected<void> VulkanStream::init() {
  VkCommandPoolCreateInfo pool_info{};
  pool_info.sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO;
  pool_info.queueFamilyIndex = ctx_->info.queue_family;
  auto pool =
      vk_check(ctx_->fn.vkCreateCommandPool(ctx_->device, &pool_info, nullptr, &command_pool_),
               "creating a command pool");
  if (!pool) return pool;
  VkFenceCreateInfo fence_info{};
  fence_info.sType = VK_STRUCTURE_TYPE_FENCE_CREATE_INFO;
  return vk_check(ctx_->fn.vkCreateFence(ctx_->device, &fence_info, nullptr, &fence_),
                  "creating a fence");
}

// Nothing is in flight outside synchronize(), which waits: unsubmitted commands are dropped.
VulkanStream::~VulkanStream() {
  const DeviceFunctions& fn = ctx_->fn;
  VkDevice device = ctx_->device;
  reset_batch();
  for (VkQueryPool pool : query_pools_) fn.vkDestroyQueryPool(device, pool, nullptr);
  for (VkDescriptorPool pool : descriptor_pools_) fn.vkDestroyDescriptorPool(device, pool, nullptr);
  if (fence_ != VK_NULL_HANDLE) fn.vkDestroyFence(device, fence_, nullptr);
  if (command_pool_ != VK_NULL_HANDLE) fn.vkDestroyCommandPool(device, command_pool_, nullptr);
}

// A full barrier: every earlier transfer or shader write is visible to every later command (and
// to the host, at the end of a segment).
void VulkanStream::barrier(VkCommandBuffer cmd, bool to_host) {
  VkMemoryBarrier b{};
  b.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER;
  b.srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT;
  b.dstAccessMask = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT |
                    VK_ACCESS_TRANSFER_READ_BIT | VK_ACCESS_TRANSFER_WRITE_BIT;
  VkPipelineStageFlags src = VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT;
  VkPipelineStageFlags dst = src;
  if (to_host) {
    b.dstAccessMask |= VK_ACCESS_HOST_READ_BIT | VK_ACCESS_HOST_WRITE_BIT;
    dst |= VK_PIPELINE_STAGE_HOST_BIT;
  }
  ctx_->fn.vkCmdPipelineBarrier(cmd, src, dst, 0, 1, &b, 0, nullptr, 0, nullptr);
}

Expected<VkCommandBuffer> VulkanStream::next_command() {
  if (open_ != VK_NULL_HANDLE) {
    if (open_has_commands_) barrier(open_, false);
    open_has_commands_ = true;
    return open_;
  }
  if (next_buffer_ == command_buffers_.size()) {
    VkCommandBufferAllocateInfo info{};
    info.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO;
    info.commandPool = command_pool_;
    info.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
    info.commandBufferCount = 1;
    VkCommandBuffer cmd;
    auto ok = vk_check(ctx_->fn.vkAllocateCommandBuffers(ctx_->device, &info, &cmd),
                       "allocating a command buffer");
    if (!ok) return std::unexpected(ok.error());
    command_buffers_.push_back(cmd);
  }
  VkCommandBuffer cmd = command_buffers_[next_buffer_++];
  VkCommandBufferBeginInfo begin{};
  begin.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO;
  begin.flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT;
  auto ok = vk_check(ctx_->fn.vkBeginCommandBuffer(cmd, &begin), "beginning a command buffer");
  if (!ok) return std::unexpected(ok.error());
  open_ = cmd;
  open_has_commands_ = true;
  steps_.push_back(Step{cmd});
  return cmd;
}

Expected<void> VulkanStream::close_segment() {
  if (open_ == VK_NULL_HANDLE) return {};
  barrier(open_, true);
  VkCommandBuffer cmd = open_;
  open_ = VK_NULL_HANDLE;
  open_has_commands_ = false;
  return vk_check(ctx_->fn.vkEndCommandBuffer(cmd), "ending a command buffer");
}

Expected<VulkanBuffer*> VulkanStream::staging(size_t bytes, BufferKind kind) {
  auto buffer = create_buffer(*ctx_, std::max<size_t>(bytes, 4), kind, false);
  if (!buffer) return std::unexpected(buffer.error());
  staging_.push_back(std::make_unique<VulkanBuffer>(*buffer));
  return staging_.back().get();
}

Expected<void> VulkanStream::upload(DeviceMemory& dst, const void* src, size_t bytes) {
  const VulkanDeviceMemory* memory = as_vulkan(&dst);
  if (memory == nullptr) return make_error("vulkan: upload to memory of another backend");
  if (bytes > memory->bytes()) {
    return make_error(
        fmt::format("vulkan: upload of {} bytes into a {}-byte buffer", bytes, memory->bytes()));
  }
  if (bytes == 0) return {};
  const VulkanBuffer& target = memory->block()->buffer;
  used_blocks_.push_back(memory->block());
  if (target.mapped != nullptr) {
    auto closed = close_segment();
    if (!closed) return closed;
    steps_.push_back(Step{VK_NULL_HANDLE, &target, src, nullptr, bytes});
    return {};
  }
  auto stage = staging(bytes, BufferKind::staging_upload);
  if (!stage) return std::unexpected(stage.error());
  std::memcpy((*stage)->mapped, src, bytes);
  flush_buffer(*ctx_, **stage);
  auto cmd = next_command();
  if (!cmd) return std::unexpected(cmd.error());
  VkBufferCopy region{0, 0, bytes};
  ctx_->fn.vkCmdCopyBuffer(*cmd, (*stage)->buffer, target.buffer, 1, &region);
  return {};
}

Expected<void> VulkanStream::download(const DeviceMemory& src, void* dst, size_t bytes) {
  const VulkanDeviceMemory* memory = as_vulkan(&src);
  if (memory == nullptr) return make_error("vulkan: download from memory of another backend");
  if (bytes > memory->bytes()) {
    return make_error(
        fmt::format("vulkan: download of {} bytes from a {}-byte buffer", bytes, memory->bytes()));
  }
  if (bytes == 0) return {};
  const VulkanBuffer& source = memory->block()->buffer;
  used_blocks_.push_back(memory->block());
  if (source.mapped != nullptr) {
    auto closed = close_segment();
    if (!closed) return closed;
    steps_.push_back(Step{VK_NULL_HANDLE, &source, nullptr, dst, bytes});
    return {};
  }
  auto stage = staging(bytes, BufferKind::staging_download);
  if (!stage) return std::unexpected(stage.error());
  auto cmd = next_command();
  if (!cmd) return std::unexpected(cmd.error());
  VkBufferCopy region{0, 0, bytes};
  ctx_->fn.vkCmdCopyBuffer(*cmd, source.buffer, (*stage)->buffer, 1, &region);
  staged_reads_.push_back(Step{VK_NULL_HANDLE, *stage, nullptr, dst, bytes});
  return {};
}

Expected<VkDescriptorPool> VulkanStream::new_descriptor_pool(uint32_t buffers) {
  VkDescriptorPoolSize size{VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, std::max(kBuffersPerPool, buffers)};
  VkDescriptorPoolCreateInfo info{};
  info.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO;
  info.maxSets = kSetsPerPool;
  info.poolSizeCount = 1;
  info.pPoolSizes = &size;
  VkDescriptorPool pool;
  auto ok = vk_check(ctx_->fn.vkCreateDescriptorPool(ctx_->device, &info, nullptr, &pool),
                     "creating a descriptor pool");
  if (!ok) return std::unexpected(ok.error());
  descriptor_pools_.push_back(pool);
  return pool;
}

// From the stream's descriptor pools (reset at synchronize), moving on to a new pool when the
// current one is full.
Expected<VkDescriptorSet> VulkanStream::descriptor_set(const VulkanProgram& program) {
  auto buffers = static_cast<uint32_t>(program.bindings.size());
  for (;; ++descriptor_pool_) {
    bool fresh = descriptor_pool_ == descriptor_pools_.size();
    if (fresh) {
      auto pool = new_descriptor_pool(buffers);
      if (!pool) return std::unexpected(pool.error());
    }
    VkDescriptorSetAllocateInfo info{};
    info.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO;
    info.descriptorPool = descriptor_pools_[descriptor_pool_];
    info.descriptorSetCount = 1;
    info.pSetLayouts = &program.set_layout;
    VkDescriptorSet set;
    VkResult r = ctx_->fn.vkAllocateDescriptorSets(ctx_->device, &info, &set);
    if (r == VK_SUCCESS) return set;
    bool full = r == VK_ERROR_OUT_OF_POOL_MEMORY || r == VK_ERROR_FRAGMENTED_POOL;
    if (!full || fresh) {
      return std::unexpected(vk_check(r, "allocating a descriptor set").error());
    }
  }
}

Expected<uint32_t> VulkanStream::timestamp_query(VkCommandBuffer cmd, VkQueryPool* pool) {
  if (ctx_->info.timestamp_valid_bits == 0) {
    return make_error(fmt::format(
        "vulkan:{}: the compute queue has no timestamps; timed launches are unsupported",
        ctx_->index));
  }
  uint32_t query = 2 * timed_launches_++;
  size_t index = query / kQueriesPerPool;
  if (index == query_pools_.size()) {
    VkQueryPoolCreateInfo info{};
    info.sType = VK_STRUCTURE_TYPE_QUERY_POOL_CREATE_INFO;
    info.queryType = VK_QUERY_TYPE_TIMESTAMP;
    info.queryCount = kQueriesPerPool;
    VkQueryPool created;
    auto ok = vk_check(ctx_->fn.vkCreateQueryPool(ctx_->device, &info, nullptr, &created),
                       "creating a timestamp query pool");
    if (!ok) return std::unexpected(ok.error());
    query_pools_.push_back(created);
  }
  *pool = query_pools_[index];
  query %= kQueriesPerPool;
  ctx_->fn.vkCmdResetQueryPool(cmd, *pool, query, 2);
  return query;
}

}  // namespace kiln::runtime::vulkan
