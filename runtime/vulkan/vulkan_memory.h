// Vulkan buffers: device-local storage buffers from a pool of size classes (kiln's DeviceMemory),
// and host-visible staging buffers for devices whose device-local memory the host cannot map.
//
// Reuse is ordered by ownership: a DeviceMemory holds a shared_ptr to its PooledBlock, and every
// stream that records a command using the block holds another until that stream's synchronize()
// has waited for the commands (or the stream is destroyed, which also waits). A block returns to
// the free list only when the last of these is gone, so no command can still be using it when
// another allocation receives it.
#pragma once

#include <memory>
#include <mutex>
#include <vector>

#include "runtime/gpu_backend.h"
#include "runtime/vulkan/vulkan_context.h"
#include "support/free_blocks.h"

namespace kiln::runtime::vulkan {

struct VulkanBuffer {
  VkBuffer buffer = VK_NULL_HANDLE;
  VkDeviceMemory memory = VK_NULL_HANDLE;
  VkDeviceSize size = 0;
  void* mapped = nullptr;  // persistently mapped when the host can see the memory
  bool coherent = false;
};

enum class BufferKind {
  device,           // storage + transfer; device-local preferred
  staging_upload,   // transfer source; host-visible
  staging_download  // transfer destination; host-visible, host-cached preferred
};

// A buffer of `size` bytes with bound memory; device buffers are mapped only if `map_device`.
Expected<VulkanBuffer> create_buffer(VulkanContext& ctx, VkDeviceSize size, BufferKind kind,
                                     bool map_device);
void destroy_buffer(VulkanContext& ctx, VulkanBuffer& buffer);
// Makes host writes visible to the device / device writes visible to the host (non-coherent).
void flush_buffer(VulkanContext& ctx, const VulkanBuffer& buffer);
void invalidate_buffer(VulkanContext& ctx, const VulkanBuffer& buffer);

class MemoryPool;

// One pooled buffer; goes back to its pool's free list when the last owner lets go.
struct PooledBlock {
  std::shared_ptr<MemoryPool> pool;
  VulkanBuffer buffer;
  ~PooledBlock();
};

// Free device buffers by size class, bounded as the cpu's are (support/free_blocks.h): at most
// twice the most bytes live at once, at least `min_cached` (64 MiB; less in tests). Thread-safe.
class MemoryPool : public std::enable_shared_from_this<MemoryPool> {
 public:
  // With `direct_host_access`, device buffers whose memory is host-visible are mapped and read
  // and written by the host directly; otherwise every transfer goes through staging buffers.
  MemoryPool(std::shared_ptr<VulkanContext> ctx, bool direct_host_access,
             size_t min_cached = support::kMinCachedBytes)
      : ctx_(std::move(ctx)), direct_(direct_host_access), free_(min_cached) {}
  ~MemoryPool();

  Expected<std::shared_ptr<PooledBlock>> acquire(size_t bytes);
  void release(VulkanBuffer buffer);
  // Bytes held in free lists (for tests and `kiln devices`).
  size_t cached_bytes() const;
  VulkanContext& context() const { return *ctx_; }

  // The most bytes live at once so far (the cache's bound is twice this).
  size_t peak_live_bytes() const;

  static VkDeviceSize size_class(size_t bytes);

 private:
  using Blocks = std::vector<support::FreeBlocks<VulkanBuffer>::Sized>;
  void destroy(Blocks blocks);
  void drop_cached();

  std::shared_ptr<VulkanContext> ctx_;
  bool direct_;
  mutable std::mutex mutex_;
  support::FreeBlocks<VulkanBuffer> free_;
};

class VulkanDeviceMemory : public DeviceMemory {
 public:
  VulkanDeviceMemory(std::shared_ptr<PooledBlock> block, size_t bytes)
      : block_(std::move(block)), bytes_(bytes) {}
  size_t bytes() const override { return bytes_; }
  const std::shared_ptr<PooledBlock>& block() const { return block_; }

 private:
  std::shared_ptr<PooledBlock> block_;
  size_t bytes_;
};

}  // namespace kiln::runtime::vulkan
