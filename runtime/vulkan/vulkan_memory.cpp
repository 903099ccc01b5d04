// Buffer creation, memory-type choice and the size-class pool behind DeviceMemory.
#include "runtime/vulkan/vulkan_memory.h"

#include <fmt/format.h>

#include <bit>

namespace kiln::runtime::vulkan {
namespace {

constexpr VkMemoryPropertyFlags kHostVisible = VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT;

// The first memory type allowed by `bits` with all of `required`, preferring one that also has
// `preferred`; -1 if none.
int find_memory_type(const VkPhysicalDeviceMemoryProperties& memory, uint32_t bits,
                     VkMemoryPropertyFlags required, VkMemoryPropertyFlags preferred) {
  int fallback = -1;
  for (uint32_t i = 0; i < memory.memoryTypeCount; ++i) {
    if ((bits & (1u << i)) == 0) continue;
    VkMemoryPropertyFlags flags = memory.memoryTypes[i].propertyFlags;
    if ((flags & required) != required) continue;
    if ((flags & preferred) == preferred) return static_cast<int>(i);
    if (fallback < 0) fallback = static_cast<int>(i);
  }
  return fallback;
}

const char* kind_name(BufferKind kind) {
  switch (kind) {
    case BufferKind::device:
      return "device buffer";
    case BufferKind::staging_upload:
      return "upload staging buffer";
    case BufferKind::staging_download:
      return "download staging buffer";
  }
  return "buffer";
}

Expected<void> allocate_and_bind(VulkanContext& ctx, VulkanBuffer& b, BufferKind kind,
                                 bool map_device) {
  VkMemoryRequirements req;
  ctx.fn.vkGetBufferMemoryRequirements(ctx.device, b.buffer, &req);
  const auto& memory = ctx.info.memory;
  int type =
      kind == BufferKind::device
          ? find_memory_type(memory, req.memoryTypeBits, 0, VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT)
          : find_memory_type(memory, req.memoryTypeBits, kHostVisible,
                             kind == BufferKind::staging_download
                                 ? VK_MEMORY_PROPERTY_HOST_CACHED_BIT
                                 : VK_MEMORY_PROPERTY_HOST_COHERENT_BIT);
  if (type < 0) return make_error(fmt::format("vulkan: no memory type for a {}", kind_name(kind)));
  VkMemoryPropertyFlags flags = memory.memoryTypes[type].propertyFlags;
  VkDeviceSize heap = memory.memoryHeaps[memory.memoryTypes[type].heapIndex].size;
  if (req.size > heap) {
    return make_error(fmt::format(
        "vulkan: cannot allocate a {} of {} bytes on vulkan:{}: larger than its memory heap "
        "({} bytes)",
        kind_name(kind), b.size, ctx.index, heap));
  }
  VkMemoryAllocateInfo info{};
  info.sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO;
  info.allocationSize = req.size;
  info.memoryTypeIndex = static_cast<uint32_t>(type);
  std::string what =
      fmt::format("allocating {} bytes for a {} on vulkan:{}", b.size, kind_name(kind), ctx.index);
  auto allocated = vk_check(ctx.fn.vkAllocateMemory(ctx.device, &info, nullptr, &b.memory), what);
  if (!allocated) return allocated;
  auto bound = vk_check(ctx.fn.vkBindBufferMemory(ctx.device, b.buffer, b.memory, 0), what);
  if (!bound) return bound;
  b.coherent = (flags & VK_MEMORY_PROPERTY_HOST_COHERENT_BIT) != 0;
  bool map = (flags & kHostVisible) != 0 && (kind != BufferKind::device || map_device);
  if (map) {
    return vk_check(ctx.fn.vkMapMemory(ctx.device, b.memory, 0, VK_WHOLE_SIZE, 0, &b.mapped),
                    "mapping " + what);
  }
  return {};
}

}  // namespace

Expected<VulkanBuffer> create_buffer(VulkanContext& ctx, VkDeviceSize size, BufferKind kind,
                                     bool map_device) {
  VulkanBuffer b;
  b.size = size;
  VkBufferCreateInfo info{};
  info.sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO;
  info.size = size;
  info.sharingMode = VK_SHARING_MODE_EXCLUSIVE;
  info.usage = kind == BufferKind::device
                   ? VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_SRC_BIT |
                         VK_BUFFER_USAGE_TRANSFER_DST_BIT
               : kind == BufferKind::staging_upload ? VK_BUFFER_USAGE_TRANSFER_SRC_BIT
                                                    : VK_BUFFER_USAGE_TRANSFER_DST_BIT;
  auto created = vk_check(
      ctx.fn.vkCreateBuffer(ctx.device, &info, nullptr, &b.buffer),
      fmt::format("creating a {} of {} bytes on vulkan:{}", kind_name(kind), size, ctx.index));
  if (!created) return std::unexpected(created.error());
  auto bound = allocate_and_bind(ctx, b, kind, map_device);
  if (!bound) {
    destroy_buffer(ctx, b);
    return std::unexpected(bound.error());
  }
  return b;
}

void destroy_buffer(VulkanContext& ctx, VulkanBuffer& b) {
  if (b.mapped != nullptr) ctx.fn.vkUnmapMemory(ctx.device, b.memory);
  if (b.buffer != VK_NULL_HANDLE) ctx.fn.vkDestroyBuffer(ctx.device, b.buffer, nullptr);
  if (b.memory != VK_NULL_HANDLE) ctx.fn.vkFreeMemory(ctx.device, b.memory, nullptr);
  b = VulkanBuffer{};
}

void flush_buffer(VulkanContext& ctx, const VulkanBuffer& b) {
  if (b.coherent) return;
  VkMappedMemoryRange range{VK_STRUCTURE_TYPE_MAPPED_MEMORY_RANGE, nullptr, b.memory, 0,
                            VK_WHOLE_SIZE};
  ctx.fn.vkFlushMappedMemoryRanges(ctx.device, 1, &range);
}

void invalidate_buffer(VulkanContext& ctx, const VulkanBuffer& b) {
  if (b.coherent) return;
  VkMappedMemoryRange range{VK_STRUCTURE_TYPE_MAPPED_MEMORY_RANGE, nullptr, b.memory, 0,
                            VK_WHOLE_SIZE};
  ctx.fn.vkInvalidateMappedMemoryRanges(ctx.device, 1, &range);
}

PooledBlock::~PooledBlock() {
  pool->release(buffer);
}

MemoryPool::~MemoryPool() {
  drop_cached();
}

// Powers of two up to 1 MiB; above, multiples of an eighth of the next power of two (at most
// 12.5% waste).
VkDeviceSize MemoryPool::size_class(size_t bytes) {
  VkDeviceSize n = std::max<VkDeviceSize>(bytes, 256);
  VkDeviceSize pow2 = std::bit_ceil(n);
  if (pow2 <= (VkDeviceSize{1} << 20)) return pow2;
  VkDeviceSize step = pow2 / 8;
  return (n + step - 1) / step * step;
}

Expected<std::shared_ptr<PooledBlock>> MemoryPool::acquire(size_t bytes) {
  VkDeviceSize size = size_class(bytes);
  const VkPhysicalDeviceMemoryProperties& memory = ctx_->info.memory;
  VkDeviceSize largest_heap = 0;
  for (uint32_t i = 0; i < memory.memoryHeapCount; ++i) {
    largest_heap = std::max(largest_heap, memory.memoryHeaps[i].size);
  }
  if (size > largest_heap) {
    return make_error(fmt::format(
        "vulkan: cannot allocate {} bytes on vulkan:{}: larger than its largest memory heap "
        "({} bytes)",
        bytes, ctx_->index, largest_heap));
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (auto cached = free_.take(size, size))
      return std::shared_ptr<PooledBlock>(new PooledBlock{shared_from_this(), cached->block});
  }
  auto b = create_buffer(*ctx_, size, BufferKind::device, direct_);
  if (!b && cached_bytes() > 0) {  // cached free blocks may be what filled the device
    drop_cached();
    b = create_buffer(*ctx_, size, BufferKind::device, direct_);
  }
  if (!b) return std::unexpected(b.error());
  {
    std::lock_guard<std::mutex> lock(mutex_);
    free_.note_fresh(size);
  }
  return std::shared_ptr<PooledBlock>(new PooledBlock{shared_from_this(), *b});
}

void MemoryPool::release(VulkanBuffer buffer) {
  Blocks dropped;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    dropped = free_.release(buffer.size, buffer);
  }
  destroy(std::move(dropped));
}

size_t MemoryPool::cached_bytes() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return free_.cached_bytes();
}

size_t MemoryPool::peak_live_bytes() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return free_.peak_live_bytes();
}

void MemoryPool::destroy(Blocks blocks) {
  for (auto& [size, b] : blocks) destroy_buffer(*ctx_, b);
}

void MemoryPool::drop_cached() {
  Blocks dropped;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    dropped = free_.take_all();
  }
  destroy(std::move(dropped));
}

}  // namespace kiln::runtime::vulkan
