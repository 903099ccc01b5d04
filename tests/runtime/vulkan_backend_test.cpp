// The Vulkan backend outside streams: device listing and selection, properties, fingerprint,
// compilation, pipeline loading and binding reflection, pooled memory and its errors.
#include <fmt/format.h>

#include <cstring>
#include <optional>

#include "codegen/spirv/spirv_compiler.h"
#include "runtime/vulkan/vulkan_memory.h"
#include "runtime/vulkan/vulkan_program.h"
#include "tests/runtime/vulkan_test_util.h"

namespace kiln::runtime::vulkan {
namespace {

std::string property(const std::vector<std::pair<std::string, std::string>>& properties,
                     const std::string& key) {
  for (const auto& [k, v] : properties) {
    if (k == key) return v;
  }
  return "";
}

VkBuffer handle_of(const std::shared_ptr<DeviceMemory>& memory) {
  return dynamic_cast<const VulkanDeviceMemory&>(*memory).block()->buffer.buffer;
}

TEST(VulkanDevices, ListsComputeDevicesWithProperties) {
  std::vector<GpuDeviceInfo> devices = list_vulkan_devices();
  ASSERT_FALSE(devices.empty());
  if (!devices[0].present) {
    ASSERT_EQ(devices.size(), 1u);
    EXPECT_EQ(devices[0].name, "vulkan");
    EXPECT_FALSE(property(devices[0].properties, "absent").empty());
    GTEST_SKIP() << "no Vulkan: " << property(devices[0].properties, "absent");
  }
  bool lavapipe = false;
  for (size_t i = 0; i < devices.size(); ++i) {
    const GpuDeviceInfo& d = devices[i];
    EXPECT_TRUE(d.present);
    EXPECT_EQ(d.name, "vulkan:" + std::to_string(i));
    for (const char* key :
         {"name", "type", "vendor", "driver version", "api version", "max workgroup size",
          "max workgroup count", "shared memory", "memory heaps", "features", "timestamp period",
          "ieee arithmetic", "loop iteration limit"}) {
      EXPECT_FALSE(property(d.properties, key).empty()) << d.name << " lacks " << key;
    }
    if (property(d.properties, "name").find("llvmpipe") != std::string::npos) {
      lavapipe = true;
      EXPECT_EQ(property(d.properties, "type"), "cpu");
      EXPECT_NE(property(d.properties, "features").find("shaderInt64"), std::string::npos);
      // Its constant folding of x*0, x-x, 0/x and x/0 is stated (tests/conformance: the fuzz
      // keeps inf and NaN out of that arithmetic on such a device).
      EXPECT_TRUE(property(d.properties, "ieee arithmetic").starts_with("no: "));
      // Its loops stop, silently, after 65535 iterations per invocation (docs/graph-format.md).
      EXPECT_TRUE(
          property(d.properties, "loop iteration limit").starts_with("65535 per invocation"));
    } else {
      EXPECT_EQ(property(d.properties, "ieee arithmetic"), "yes");
      EXPECT_EQ(property(d.properties, "loop iteration limit"), "none");
    }
  }
  // This machine (and CI) has Mesa's lavapipe installed.
  EXPECT_TRUE(lavapipe);
}

TEST(VulkanDevices, BadIndexSaysWhichDevicesExist) {
  auto backend = open_vulkan_backend(7);
  ASSERT_FALSE(backend.has_value());
  const std::string& message = backend.error().message;
  if (vulkan_unavailable(message)) GTEST_SKIP() << message;
  EXPECT_NE(message.find("vulkan: no device 7 ("), std::string::npos) << message;
  EXPECT_NE(message.find("present: "), std::string::npos) << message;
  auto negative = open_vulkan_backend(-1);
  ASSERT_FALSE(negative.has_value());
  EXPECT_NE(negative.error().message.find("no device -1"), std::string::npos);
}

TEST_F(VulkanTest, DescribesItself) {
  EXPECT_EQ(backend_->name(), "vulkan:0");
  EXPECT_EQ(backend_->binary_kind(), "spirv");
  EXPECT_EQ(backend_->dialect(), codegen::gpu::Dialect::glsl);
  auto properties = backend_->properties();
  std::string name = property(properties, "name");
  ASSERT_FALSE(name.empty());
  EXPECT_NE(property(properties, "api version").substr(0, 2), "1.0");
  std::string fingerprint = backend_->fingerprint();
  EXPECT_EQ(fingerprint.find(name), 0u) << fingerprint;
  EXPECT_NE(fingerprint.find(codegen::spirv::toolchain_version()), std::string::npos);
  // The pipeline cache UUID: 32 hex digits.
  size_t at = fingerprint.find("pipeline cache ");
  ASSERT_NE(at, std::string::npos);
  EXPECT_EQ(fingerprint.substr(at + 15, 32).find_first_not_of("0123456789abcdef"),
            std::string::npos);
  auto again = open_vulkan_backend(0);
  ASSERT_TRUE(again.has_value());
  EXPECT_EQ((*again)->fingerprint(), fingerprint);
}

TEST_F(VulkanTest, CompileProducesSpirvAndReflectsBindings) {
  auto source = glsl_source(vector_add_glsl(1000), 4, 256);
  auto binary = backend_->compile(source, "vector_add");
  ASSERT_TRUE(binary.has_value()) << binary.error().message;
  ASSERT_EQ(binary->size() % 4, 0u);
  std::vector<uint32_t> words(binary->size() / 4);
  std::memcpy(words.data(), binary->data(), binary->size());
  EXPECT_EQ(words[0], 0x07230203u);
  auto bindings = reflect_bindings(words);
  ASSERT_TRUE(bindings.has_value()) << bindings.error().message;
  EXPECT_EQ(*bindings, (std::vector<uint32_t>{0, 1, 2}));
  auto loaded = backend_->load(source, *binary);
  ASSERT_TRUE(loaded.has_value()) << loaded.error().message;
  EXPECT_EQ(dynamic_cast<const VulkanProgram&>(**loaded).launch.groups, 4);
}

TEST_F(VulkanTest, CompileErrorsNameTheKernel) {
  auto binary = backend_->compile(glsl_source("#version 450\nvoid main() { oops(); }\n", 1, 1),
                                  "broken_kernel");
  ASSERT_FALSE(binary.has_value());
  EXPECT_NE(binary.error().message.find("broken_kernel"), std::string::npos)
      << binary.error().message;
}

// Lavapipe ends an invocation's loops early, without an error, past 65535 iterations in all: a
// source whose loops may run more is refused before shaderc, by name; one at the budget compiles.
TEST_F(VulkanTest, CompileRefusesSourcesOverTheLoopBudget) {
  const std::optional<int64_t> limit = backend_->loop_iteration_limit();
  if (!has_property("type", "cpu")) {
    EXPECT_FALSE(limit.has_value());
    GTEST_SKIP() << "vulkan:0 is not lavapipe";
  }
  ASSERT_EQ(limit, 65535);
  auto source = glsl_source(vector_add_glsl(1000), 4, 256);
  source.loop_iterations = 65535;
  EXPECT_TRUE(backend_->compile(source, "vector_add").has_value());
  source.loop_iterations = 65536;
  auto refused = backend_->compile(source, "vector_add");
  ASSERT_FALSE(refused.has_value());
  const std::string& m = refused.error().message;
  for (const char* part :
       {"kernel vector_add: its test schedule (4 workgroups of 256) runs up to 65536 loop "
        "iterations per invocation",
        "over the 65535 that vulkan:0 (llvmpipe", "which would give wrong results"})
    EXPECT_NE(m.find(part), std::string::npos) << "no '" << part << "' in: " << m;
}

// A program binding more buffers than the device allows one kernel (lavapipe: 32) crashed the
// driver when it ran. It is refused at load, with the count and the limit; one at the limit loads.
TEST_F(VulkanTest, AProgramOverTheBindingLimitIsRefusedAtLoad) {
  const std::optional<size_t> limit = backend_->max_kernel_buffers();
  ASSERT_TRUE(limit.has_value());
  if (*limit > 256) GTEST_SKIP() << "vulkan:0 binds up to " << *limit << " buffers to a kernel";
  auto program = [&](size_t buffers) {
    std::string glsl = "#version 450\nlayout(local_size_x = 1) in;\n";
    std::string sum = "0.0";
    for (size_t b = 0; b < buffers; ++b) {
      glsl += fmt::format("layout(std430, binding = {0}) buffer B{0} {{ float d[]; }} b{0};\n", b);
      if (b > 0) sum += fmt::format(" + b{}.d[0]", b);
    }
    glsl += fmt::format("void main() {{ b0.d[0] = {}; }}\n", sum);
    auto source = glsl_source(glsl, 1, 1);
    auto binary = backend_->compile(source, "many_buffers");
    EXPECT_TRUE(binary.has_value()) << binary.error().message;
    return backend_->load(source, *binary);
  };
  EXPECT_TRUE(program(*limit).has_value());
  auto over = program(*limit + 1);
  ASSERT_FALSE(over.has_value());
  const std::string& m = over.error().message;
  EXPECT_NE(m.find(fmt::format("binds {} buffers", *limit + 1)), std::string::npos) << m;
  EXPECT_NE(m.find(fmt::format("at most {} to one kernel", *limit)), std::string::npos) << m;
}

TEST_F(VulkanTest, BadBinariesFailToLoadAndBadLaunchShapesFailToLaunch) {
  auto source = glsl_source(vector_add_glsl(1000), 4, 256);
  auto garbage = backend_->load(source, std::vector<uint8_t>(64, 0x5a));
  ASSERT_FALSE(garbage.has_value());
  EXPECT_NE(garbage.error().message.find("not a SPIR-V module"), std::string::npos);
  auto odd = backend_->load(source, std::vector<uint8_t>(7, 0));
  ASSERT_FALSE(odd.has_value());
  EXPECT_NE(odd.error().message.find("whole words"), std::string::npos);
  auto binary = backend_->compile(source, "vector_add");
  ASSERT_TRUE(binary.has_value());
  // A launch shape outside the device's limits loads (a dynamic kernel's workgroups depend on the
  // extent it is launched at) and is refused at launch, with nothing run.
  source.launch.groups = 0;
  auto no_groups = backend_->load(source, *binary);
  ASSERT_TRUE(no_groups.has_value()) << no_groups.error().message;
  auto s = stream();
  auto a = allocate(4000), b = allocate(4000), c = allocate(4000);
  auto launched = s->launch(**no_groups, {a.get(), b.get(), c.get()});
  ASSERT_FALSE(launched.has_value());
  EXPECT_NE(launched.error().message.find("launch of 0 workgroups is outside [1, "),
            std::string::npos)
      << launched.error().message;
  EXPECT_TRUE(s->synchronize().has_value());
}

TEST_F(VulkanTest, PoolRecyclesFreedBlocksBySizeClass) {
  EXPECT_EQ(MemoryPool::size_class(1), 256u);
  EXPECT_EQ(MemoryPool::size_class(1000), 1024u);
  EXPECT_EQ(MemoryPool::size_class((1u << 20) + 1), (1u << 20) + (1u << 18));
  auto first = allocate(1000);
  ASSERT_NE(first, nullptr);
  EXPECT_EQ(first->bytes(), 1000u);
  VkBuffer handle = handle_of(first);
  first.reset();
  auto same_class = allocate(900);
  ASSERT_NE(same_class, nullptr);
  EXPECT_EQ(handle_of(same_class), handle);
  auto other = allocate(1000);  // the block is taken: a new one
  ASSERT_NE(other, nullptr);
  EXPECT_NE(handle_of(other), handle);
}

// A server meeting a new size on most requests: each buffer larger than any freed before, one live
// at a time. The pool kept every freed buffer (here 8 size classes from 1.25 to 4 MiB, 19.5 MiB in
// all) until the device was full; now it keeps at most twice its peak of live bytes (8 MiB; at
// least the minimum asked for, 64 KiB here), freeing the ones released longest ago, and still
// reuses the last.
TEST(VulkanMemoryPool, KeepsNoMoreFreeBuffersThanTwiceItsPeakOfLiveOnes) {
  auto ctx = open_vulkan_context(0);
  if (!ctx && vulkan_unavailable(ctx.error().message))
    GTEST_SKIP() << "no Vulkan: " << ctx.error().message;
  ASSERT_TRUE(ctx.has_value()) << ctx.error().message;
  auto pool = std::make_shared<MemoryPool>(*ctx, /*direct_host_access=*/true,
                                           /*min_cached=*/size_t{64} << 10);
  constexpr size_t kMiB = size_t{1} << 20;
  size_t most_cached = 0, classes = 0;
  VkBuffer last = VK_NULL_HANDLE;
  for (size_t quarters : {5, 6, 7, 8, 10, 12, 14, 16}) {
    const size_t bytes = quarters * kMiB / 4;
    ASSERT_EQ(MemoryPool::size_class(bytes), bytes) << "a class of its own";
    auto block = pool->acquire(bytes);
    ASSERT_TRUE(block.has_value()) << block.error().message;
    last = (*block)->buffer.buffer;
    block->reset();
    most_cached = std::max(most_cached, pool->cached_bytes());
    ++classes;
  }
  EXPECT_EQ(classes, 8u);
  EXPECT_EQ(pool->peak_live_bytes(), 4 * kMiB);
  EXPECT_LE(most_cached, 8 * kMiB);
  EXPECT_GE(pool->cached_bytes(), 4 * kMiB);
  auto again = pool->acquire(4 * kMiB);
  ASSERT_TRUE(again.has_value()) << again.error().message;
  EXPECT_EQ((*again)->buffer.buffer, last) << "the buffer released last is kept";
}

TEST_F(VulkanTest, AllocationTooLargeForTheDeviceIsAClearError) {
  auto huge = backend_->allocate(size_t{1} << 50);
  ASSERT_FALSE(huge.has_value());
  const std::string& message = huge.error().message;
  EXPECT_EQ(message.find("vulkan:"), 0u) << message;
  EXPECT_NE(message.find("bytes"), std::string::npos) << message;
  EXPECT_NE(message.find("cannot allocate 1125899906842624 bytes on vulkan:0: larger than its "
                         "largest memory heap"),
            std::string::npos)
      << message;
  EXPECT_NE(allocate(4096), nullptr);  // the backend still works
}

}  // namespace
}  // namespace kiln::runtime::vulkan
