// What kiln asks of a Vulkan physical device: the optional shader features it enables when present,
// and the properties `kiln devices` prints.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "runtime/vulkan/vulkan_loader.h"

namespace kiln::runtime::vulkan {

// VkPhysicalDeviceFeatures2 with the Vulkan 1.1 and 1.2 feature structs chained behind it. The
// chain points into the object itself, so it is neither copied nor moved.
struct FeatureChain {
  VkPhysicalDeviceFeatures2 features{};
  VkPhysicalDeviceVulkan11Features vulkan11{};
  VkPhysicalDeviceVulkan12Features vulkan12{};

  FeatureChain();
  FeatureChain(const FeatureChain&) = delete;
  FeatureChain& operator=(const FeatureChain&) = delete;
};

// Sets in `enable` each feature the generated shaders may use (shaderInt64, shaderFloat64, ...)
// that `supported` has, and returns their names in a fixed order.
std::vector<std::string> select_features(const FeatureChain& supported, FeatureChain& enable);

// How faithfully the driver keeps IEEE 754 arithmetic, the "ieee arithmetic" property: "yes",
// or "no: " and what it changes. Mesa's llvmpipe (lavapipe) simplifies x*0, 0*x, 0/x and x-x
// to 0 and x/0 to an undefined value in its own code generator whenever 0 is a constant or both
// operands are one value, whatever x holds (inf, NaN, -0), and no float-controls execution mode
// or `precise` turns that off (Mesa 22.3: gallivm's lp_build_mul, lp_build_sub, lp_build_div).
std::string ieee_arithmetic(const VkPhysicalDeviceProperties& properties);

// The loop iterations one shader invocation may run, all its loops together, before the driver
// ends them early and silently (runtime/gpu_backend.h): Mesa's llvmpipe (lavapipe) gives each
// invocation one budget of LP_MAX_TGSI_LOOP_ITERATIONS = 65535, taken by every pass of every loop,
// nested loops and the pass that leaves a loop included (Mesa 22.3: gallivm's lp_exec_endloop).
// nullopt for other drivers.
inline constexpr int64_t kLlvmpipeLoopIterations = 65535;
std::optional<int64_t> loop_iteration_limit(const VkPhysicalDeviceProperties& properties);

// Name, type, vendor, driver and API versions, limits, memory heaps, features, timestamp period,
// ieee arithmetic, loop iteration limit.
std::vector<std::pair<std::string, std::string>> describe_device(
    const VkPhysicalDeviceProperties& properties, const VkPhysicalDeviceMemoryProperties& memory,
    const std::vector<std::string>& features);

// "1.3.230"
std::string api_version_text(uint32_t version);

}  // namespace kiln::runtime::vulkan
