// The Vulkan GpuBackend: device properties and fingerprint, GLSL -> SPIR-V, pipelines through one
// pipeline cache, pooled memory and streams; and open_vulkan_backend / list_vulkan_devices.
#include "runtime/vulkan/vulkan_backend.h"

#include <fmt/format.h>

#include <cstring>

#include "codegen/spirv/spirv_compiler.h"
#include "runtime/vulkan/vulkan_device_info.h"
#include "runtime/vulkan/vulkan_memory.h"
#include "runtime/vulkan/vulkan_program.h"
#include "runtime/vulkan/vulkan_stream.h"

namespace kiln::runtime::vulkan {
namespace {

std::string hex(const uint8_t* bytes, size_t n) {
  std::string out;
  for (size_t i = 0; i < n; ++i) out += fmt::format("{:02x}", bytes[i]);
  return out;
}

std::vector<uint8_t> spirv_bytes(const std::vector<uint32_t>& words) {
  std::vector<uint8_t> bytes(words.size() * sizeof(uint32_t));
  std::memcpy(bytes.data(), words.data(), bytes.size());
  return bytes;
}

// What every Vulkan backend compiles the same way: GLSL to SPIR-V through shaderc, and the binary
// disassembled (shown by `kiln dump --stage spirv`) and as is (written as .spv).
template <class Base>
class SpirvToolchain : public Base {
 public:
  codegen::gpu::Dialect dialect() const override { return codegen::gpu::Dialect::glsl; }
  std::string binary_kind() const override { return "spirv"; }
  Expected<std::vector<uint8_t>> compile(const codegen::gpu::GpuSource& source,
                                         const std::string& name) override {
    auto words = codegen::spirv::compile_glsl(source.text, name);
    if (!words) return std::unexpected(words.error());
    return spirv_bytes(*words);
  }
  Expected<std::vector<ArtifactForm>> binary_forms(const codegen::gpu::GpuSource&,
                                                   const std::vector<uint8_t>& binary,
                                                   const std::string&) const override {
    if (binary.size() % sizeof(uint32_t) != 0)
      return make_error(fmt::format("a SPIR-V binary of {} bytes is not whole words", binary.size()));
    std::vector<uint32_t> words(binary.size() / sizeof(uint32_t));
    std::memcpy(words.data(), binary.data(), binary.size());
    auto text = codegen::spirv::disassemble(words);
    if (!text) return std::unexpected(text.error());
    return std::vector<ArtifactForm>{{"spirv", "", std::move(*text)},
                                     {"spv", "spv", std::string(binary.begin(), binary.end())}};
  }
};

// No device: compiles as a Vulkan device would, names none, runs nothing.
class VulkanCompiler final : public SpirvToolchain<GpuCompiler> {
 public:
  std::string name() const override { return "vulkan (compile only)"; }
  std::vector<std::pair<std::string, std::string>> properties() const override {
    return {{"type", "gpu"}, {"toolchain", codegen::spirv::toolchain_version()}};
  }
  std::string fingerprint() const override {
    return "no device / " + codegen::spirv::toolchain_version();
  }
};

class VulkanBackend : public SpirvToolchain<GpuBackend> {
 public:
  VulkanBackend(std::shared_ptr<VulkanContext> ctx, const VulkanBackendOptions& options)
      : ctx_(std::move(ctx)),
        pool_(std::make_shared<MemoryPool>(ctx_, options.direct_host_access)) {}

  ~VulkanBackend() override {
    if (cache_ != VK_NULL_HANDLE) ctx_->fn.vkDestroyPipelineCache(ctx_->device, cache_, nullptr);
  }

  Expected<void> init() {
    VkPipelineCacheCreateInfo info{};
    info.sType = VK_STRUCTURE_TYPE_PIPELINE_CACHE_CREATE_INFO;
    return vk_check(ctx_->fn.vkCreatePipelineCache(ctx_->device, &info, nullptr, &cache_),
                    "creating the pipeline cache");
  }

  std::string name() const override { return fmt::format("vulkan:{}", ctx_->index); }

  std::vector<std::pair<std::string, std::string>> properties() const override {
    return describe_device(ctx_->info.properties, ctx_->info.memory, ctx_->info.features);
  }

  std::optional<int64_t> loop_iteration_limit() const override {
    return vulkan::loop_iteration_limit(ctx_->info.properties);
  }

  std::optional<size_t> max_kernel_buffers() const override {
    return ctx_->info.properties.limits.maxPerStageDescriptorStorageBuffers;
  }

  // Sources that would outrun the driver's loop budget are refused before shaderc runs.
  Expected<std::vector<uint8_t>> compile(const codegen::gpu::GpuSource& source,
                                         const std::string& name) override {
    if (const std::optional<int64_t> limit = loop_iteration_limit()) {
      const std::string device =
          fmt::format("{} ({})", this->name(), ctx_->info.properties.deviceName);
      if (auto ok = codegen::gpu::check_loop_iterations(source, name, *limit, device); !ok)
        return std::unexpected(ok.error());
    }
    return SpirvToolchain<GpuBackend>::compile(source, name);
  }

  std::string fingerprint() const override {
    const VkPhysicalDeviceProperties& p = ctx_->info.properties;
    return fmt::format("{} / pipeline cache {} / driver 0x{:08x} / {}", p.deviceName,
                       hex(p.pipelineCacheUUID, VK_UUID_SIZE), p.driverVersion,
                       codegen::spirv::toolchain_version());
  }

  Expected<std::shared_ptr<const GpuProgram>> load(const codegen::gpu::GpuSource& source,
                                                   const std::vector<uint8_t>& binary) override {
    auto program = load_program(ctx_, cache_, source, binary);
    if (!program) return std::unexpected(program.error());
    return std::shared_ptr<const GpuProgram>(std::move(*program));
  }

  Expected<std::shared_ptr<DeviceMemory>> allocate(size_t bytes) override {
    auto block = pool_->acquire(bytes);
    if (!block) return std::unexpected(block.error());
    return std::shared_ptr<DeviceMemory>(
        std::make_shared<VulkanDeviceMemory>(std::move(*block), bytes));
  }

  Expected<std::unique_ptr<GpuStream>> create_stream() override {
    auto stream = VulkanStream::create(ctx_);
    if (!stream) return std::unexpected(stream.error());
    return std::unique_ptr<GpuStream>(std::move(*stream));
  }

 private:
  std::shared_ptr<VulkanContext> ctx_;
  std::shared_ptr<MemoryPool> pool_;
  VkPipelineCache cache_ = VK_NULL_HANDLE;
};

}  // namespace

Expected<std::unique_ptr<GpuBackend>> open_backend(int index, const VulkanBackendOptions& options) {
  auto ctx = open_vulkan_context(index);
  if (!ctx) return std::unexpected(ctx.error());
  auto backend = std::make_unique<VulkanBackend>(std::move(*ctx), options);
  auto ok = backend->init();
  if (!ok) return std::unexpected(ok.error());
  return std::unique_ptr<GpuBackend>(std::move(backend));
}

}  // namespace kiln::runtime::vulkan

namespace kiln::runtime {

Expected<std::unique_ptr<GpuBackend>> open_vulkan_backend(int index) {
  return vulkan::open_backend(index, vulkan::VulkanBackendOptions{});
}

std::unique_ptr<GpuBackend> open_vulkan_compiler() { return std::make_unique<vulkan::VulkanCompiler>(); }

std::vector<GpuDeviceInfo> list_vulkan_devices() {
  auto absent = [](std::string reason) {
    return std::vector<GpuDeviceInfo>{
        GpuDeviceInfo{"vulkan", false, {{"absent", std::move(reason)}}}};
  };
  auto instance = vulkan::open_vulkan_instance();
  if (!instance) return absent(instance.error().message);
  auto devices = vulkan::compute_devices(**instance);
  if (!devices) return absent(devices.error().message);
  if (devices->empty()) return absent("vulkan: no device with a compute queue and API 1.2");
  std::vector<GpuDeviceInfo> out;
  for (size_t i = 0; i < devices->size(); ++i) {
    const vulkan::ComputeDevice& d = (*devices)[i];
    out.push_back(GpuDeviceInfo{fmt::format("vulkan:{}", i), true,
                                vulkan::describe_device(d.properties, d.memory, d.features)});
  }
  return out;
}

}  // namespace kiln::runtime
