// kiln's Vulkan GpuBackend (declared for tests; the rest of kiln uses open_vulkan_backend()).
#pragma once

#include <memory>

#include "runtime/gpu_backend.h"

namespace kiln::runtime::vulkan {

struct VulkanBackendOptions {
  // Read and write host-visible device memory directly instead of through staging buffers.
  // Off only to test the staging path on devices (lavapipe) whose memory is all host-visible.
  bool direct_host_access = true;
};

Expected<std::unique_ptr<GpuBackend>> open_backend(int index, const VulkanBackendOptions& options);

}  // namespace kiln::runtime::vulkan
