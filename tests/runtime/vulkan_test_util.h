// Shared fixture of the Vulkan backend tests: opens vulkan:0 (skipping where no loader or device
// exists) and compiles hand-written GLSL compute shaders into programs.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "codegen/gpu/gpu_source.h"
#include "runtime/gpu_backend.h"
#include "runtime/vulkan/vulkan_backend.h"

namespace kiln::runtime::vulkan {

// True when the error means "no Vulkan here" rather than a defect.
inline bool vulkan_unavailable(const std::string& message) {
  return message.find("libvulkan.so.1 not found") != std::string::npos ||
         message.find("(0 present") != std::string::npos ||
         message.find("no Vulkan driver found") != std::string::npos;
}

// Opens vulkan:0 with `options`, or skips the test when Vulkan is unavailable.
#define KILN_OPEN_VULKAN_OR_SKIP(backend, options)                                      \
  do {                                                                                  \
    auto opened = ::kiln::runtime::vulkan::open_backend(0, options);                    \
    if (!opened && ::kiln::runtime::vulkan::vulkan_unavailable(opened.error().message)) \
      GTEST_SKIP() << "no Vulkan: " << opened.error().message;                          \
    ASSERT_TRUE(opened.has_value()) << opened.error().message;                          \
    backend = std::move(*opened);                                                       \
  } while (0)

inline codegen::gpu::GpuSource glsl_source(std::string text, int64_t groups, int group_size) {
  codegen::gpu::GpuSource source;
  source.text = std::move(text);
  source.entry = "main";
  source.launch.groups = groups;
  source.launch.group_size = group_size;
  source.strategy = "test";
  return source;
}

class VulkanTest : public ::testing::Test {
 protected:
  void SetUp() override { KILN_OPEN_VULKAN_OR_SKIP(backend_, options()); }
  virtual VulkanBackendOptions options() const { return {}; }

  bool has_property(const std::string& key, const std::string& value) const {
    for (const auto& [k, v] : backend_->properties()) {
      if (k == key) return v == value;
    }
    return false;
  }

  bool has_feature(const std::string& feature) const {
    for (const auto& [key, value] : backend_->properties()) {
      if (key == "features")
        return (" " + value + " ").find(" " + feature + " ") != std::string::npos;
    }
    return false;
  }

  // Compiles and loads `glsl`, launched as `groups` workgroups of `group_size`.
  std::shared_ptr<const GpuProgram> program(const std::string& glsl, int64_t groups, int group_size,
                                            const std::string& name) {
    auto source = glsl_source(glsl, groups, group_size);
    auto binary = backend_->compile(source, name);
    EXPECT_TRUE(binary.has_value()) << binary.error().message;
    if (!binary) return nullptr;
    auto loaded = backend_->load(source, *binary);
    EXPECT_TRUE(loaded.has_value()) << loaded.error().message;
    return loaded ? *loaded : nullptr;
  }

  std::shared_ptr<DeviceMemory> allocate(size_t bytes) {
    auto memory = backend_->allocate(bytes);
    EXPECT_TRUE(memory.has_value()) << memory.error().message;
    return memory ? *memory : nullptr;
  }

  std::unique_ptr<GpuStream> stream() {
    auto s = backend_->create_stream();
    EXPECT_TRUE(s.has_value()) << s.error().message;
    return s ? std::move(*s) : nullptr;
  }

  std::unique_ptr<GpuBackend> backend_;
};

// c[i] = a[i] + b[i] over n floats, grid-stride.
inline std::string vector_add_glsl(uint32_t n) {
  return "#version 450\n"
         "layout(local_size_x = 256) in;\n"
         "layout(set = 0, binding = 0) readonly buffer A { float a[]; };\n"
         "layout(set = 0, binding = 1) readonly buffer B { float b[]; };\n"
         "layout(set = 0, binding = 2) writeonly buffer C { float c[]; };\n"
         "void main() {\n"
         "  uint stride = gl_NumWorkGroups.x * gl_WorkGroupSize.x;\n"
         "  for (uint i = gl_GlobalInvocationID.x; i < " +
         std::to_string(n) +
         "u; i += stride)\n"
         "    c[i] = a[i] + b[i];\n"
         "}\n";
}

}  // namespace kiln::runtime::vulkan
