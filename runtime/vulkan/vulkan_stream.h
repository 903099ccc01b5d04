// A GpuStream on the shared compute queue: commands are recorded into command buffers and run at
// synchronize(), one submission per segment, with a full memory barrier between commands.
//
// Host reads and writes of mapped device memory (the direct path, when device-local memory is
// host-visible) happen between segments, in stream order: synchronize() submits the commands
// before such a host step, waits on the fence, does the copy, then goes on. Through staging
// buffers (the other path) uploads are copied into staging at record time and downloads are
// copied out of staging after the last segment.
#pragma once

#include <memory>
#include <vector>

#include "runtime/vulkan/vulkan_memory.h"
#include "runtime/vulkan/vulkan_program.h"

namespace kiln::runtime::vulkan {

class VulkanStream : public GpuStream {
 public:
  static Expected<std::unique_ptr<VulkanStream>> create(std::shared_ptr<VulkanContext> ctx);
  ~VulkanStream() override;
  VulkanStream(const VulkanStream&) = delete;
  VulkanStream& operator=(const VulkanStream&) = delete;

  Expected<void> upload(DeviceMemory& dst, const void* src, size_t bytes) override;
  Expected<void> download(const DeviceMemory& src, void* dst, size_t bytes) override;
  Expected<void> launch(const GpuProgram& program, const std::vector<DeviceMemory*>& args,
                        bool timed = false,
                        std::optional<int64_t> outer_extent = std::nullopt) override;
  Expected<void> synchronize() override;
  std::vector<double> launch_times_ms() const override { return times_ms_; }

 private:
  static constexpr uint32_t kQueriesPerPool = 128;  // 64 timed launches per query pool

  // A run of recorded commands, or a host copy to or from mapped memory between two runs.
  struct Step {
    VkCommandBuffer commands = VK_NULL_HANDLE;
    const VulkanBuffer* mapped = nullptr;  // host step: the mapped buffer
    const void* host_src = nullptr;        // host write: from here into `mapped`
    void* host_dst = nullptr;              // host read: from `mapped` to here
    size_t bytes = 0;
  };

  explicit VulkanStream(std::shared_ptr<VulkanContext> ctx) : ctx_(std::move(ctx)) {}
  Expected<void> init();
  // The open command buffer (beginning one if needed), after a barrier if it has commands.
  Expected<VkCommandBuffer> next_command();
  Expected<void> close_segment();
  void barrier(VkCommandBuffer cmd, bool to_host);
  Expected<VkDescriptorPool> new_descriptor_pool(uint32_t buffers);
  Expected<VkDescriptorSet> descriptor_set(const VulkanProgram& program);
  Expected<VkDescriptorSet> bind_arguments(const VulkanProgram& program,
                                           const std::vector<DeviceMemory*>& args);
  Expected<uint32_t> timestamp_query(VkCommandBuffer cmd, VkQueryPool* pool);
  Expected<VulkanBuffer*> staging(size_t bytes, BufferKind kind);
  Expected<void> run_steps();
  void read_timestamps();
  void reset_batch();

  std::shared_ptr<VulkanContext> ctx_;
  VkCommandPool command_pool_ = VK_NULL_HANDLE;
  VkFence fence_ = VK_NULL_HANDLE;
  std::vector<VkCommandBuffer> command_buffers_;  // reused; the first `next_buffer_` are in use
  size_t next_buffer_ = 0;
  VkCommandBuffer open_ = VK_NULL_HANDLE;
  bool open_has_commands_ = false;
  std::vector<VkDescriptorPool> descriptor_pools_;
  size_t descriptor_pool_ = 0;
  std::vector<VkQueryPool> query_pools_;
  uint32_t timed_launches_ = 0;

  // The batch: steps in order, and what must live until they have run.
  std::vector<Step> steps_;
  std::vector<std::unique_ptr<VulkanBuffer>> staging_;
  std::vector<Step> staged_reads_;  // copied out of staging after the last step
  std::vector<std::shared_ptr<PooledBlock>> used_blocks_;
  std::vector<std::shared_ptr<const VulkanProgram>> used_programs_;
  std::vector<double> times_ms_;
};

}  // namespace kiln::runtime::vulkan
