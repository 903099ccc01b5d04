// The narrow interface a GPU runtime (CUDA driver, Vulkan) gives the GPU target
// (runtime/gpu_target.h): compile generated source, load it, move memory (DeviceMemory,
// runtime/target.h), launch in order on a stream. Everything toolkit-specific stays behind it, in
// runtime/cuda/ and runtime/vulkan/.
#pragma once

#include <fmt/format.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "codegen/cuda/nvrtc.h"
#include "codegen/gpu/gpu_source.h"
#include "runtime/target.h"
#include "kiln/error.h"

namespace kiln::runtime {

// A kernel loaded on the device (a CUDA module and function, a Vulkan pipeline).
class GpuProgram {
 public:
  virtual ~GpuProgram() = default;
};

// An in-order queue of copies and launches. Host pointers handed to upload/download must stay
// valid until synchronize() returns; downloads are complete only then. One thread at a time per
// stream; different streams may be used from different threads at once.
class GpuStream {
 public:
  virtual ~GpuStream() = default;
  virtual Expected<void> upload(DeviceMemory& dst, const void* src, size_t bytes) = 0;
  virtual Expected<void> download(const DeviceMemory& src, void* dst, size_t bytes) = 0;
  // args[i] is kernel parameter i (and, for checked kernels, the error slot last). With `timed`,
  // the launch's device time is measured (timestamp queries / events) and reported by
  // launch_times_ms() after the next synchronize(). A dynamic kernel (LaunchShape::dynamic_tasks)
  // runs at `outer_extent`, which it takes as its run-time argument (dynamic_launch); a static
  // one ignores it.
  virtual Expected<void> launch(const GpuProgram& program, const std::vector<DeviceMemory*>& args,
                                bool timed = false,
                                std::optional<int64_t> outer_extent = std::nullopt) = 0;
  // Waits for everything enqueued; errors carry the driver's message.
  virtual Expected<void> synchronize() = 0;
  // Device milliseconds of each timed launch of the last synchronized batch, in launch order.
  virtual std::vector<double> launch_times_ms() const = 0;
};

// The launch of a program compiled with `compiled` at `outer_extent` (codegen::gpu::launch_at),
// with the int its kernel takes: an error for a dynamic kernel without an extent, or with one
// outside [0, kMaxDynamicBound]. The int is 0 for a static kernel.
struct DynamicLaunch {
  codegen::gpu::LaunchShape shape;
  int32_t outer = 0;
};
inline Expected<DynamicLaunch> dynamic_launch(const codegen::gpu::LaunchShape& compiled,
                                              std::optional<int64_t> outer_extent,
                                              const std::string& entry) {
  if (compiled.dynamic_tasks <= 0) return DynamicLaunch{compiled, 0};
  if (!outer_extent || *outer_extent < 0 || *outer_extent > codegen::gpu::kMaxDynamicBound)
    return make_error(fmt::format(
        "launch of dynamic kernel '{}': {} (it takes an outer extent in [0, {}])", entry,
        outer_extent ? fmt::format("outer extent {}", *outer_extent) : "no outer extent given",
        codegen::gpu::kMaxDynamicBound));
  return DynamicLaunch{codegen::gpu::launch_at(compiled, *outer_extent),
                       static_cast<int32_t>(*outer_extent)};
}

// The bytes to allocate for `bytes` of data: device allocations are never empty, so that a
// zero-element tensor still binds a buffer.
inline size_t device_alloc_bytes(size_t bytes) { return bytes < 16 ? 16 : bytes; }

class GpuBackend;
// The scratch buffer a kernel with source.scratch_bytes > 0 takes as its last argument, its
// counters zeroed on `stream` (runtime/gpu_target.cpp); null for a kernel without one.
Expected<std::shared_ptr<DeviceMemory>> make_scratch(GpuBackend& backend, GpuStream& stream,
                                                     const codegen::gpu::GpuSource& source);

class GpuBackend {
 public:
  virtual ~GpuBackend() = default;
  virtual std::string name() const = 0;  // "cuda:0", "vulkan:0"
  // A compiler without a device (open_cuda_compiler, open_vulkan_compiler): load, allocate and
  // streams are errors.
  virtual bool compile_only() const { return false; }
  // What `kiln devices` prints: name, driver, memory, compute capability / API version, ...
  virtual std::vector<std::pair<std::string, std::string>> properties() const = 0;
  // Everything about the device and toolchain that changes a compiled artifact (part of cache
  // keys): CUDA compute capability + NVRTC version; Vulkan pipeline-cache UUID + shaderc version.
  virtual std::string fingerprint() const = 0;
  virtual codegen::gpu::Dialect dialect() const = 0;
  // What compile() produces: "cubin" (CUDA, for this device's sm_XX) or "spirv".
  virtual std::string binary_kind() const = 0;
  // The most loop iterations the driver lets one invocation run, all its loops together
  // (codegen::gpu::GpuSource::loop_iterations counts them the same way), before it ends them
  // early without an error; compile() refuses sources over it. nullopt: no such budget.
  virtual std::optional<int64_t> loop_iteration_limit() const { return std::nullopt; }
  // The most buffers one kernel binds (Vulkan's maxPerStageDescriptorStorageBuffers); the fuser
  // keeps its groups within it. nullopt: no limit that kiln's kernels reach.
  virtual std::optional<size_t> max_kernel_buffers() const { return std::nullopt; }
  // Whether compiled kernels may use warp-level tensor-core instructions (mma.sync on tf32
  // operands): CUDA devices and compilers of sm_80 and later.
  virtual bool warp_mma() const { return false; }

  // Generated source -> device binary (NVRTC / shaderc). Thread-safe. `name` is for messages.
  virtual Expected<std::vector<uint8_t>> compile(const codegen::gpu::GpuSource& source,
                                                 const std::string& name) = 0;
  // The forms `kiln dump` shows of a compiled kernel besides its source: CUDA: "ptx" (NVRTC's
  // PTX, also written as .ptx) and "cubin" (the binary, when it is one); Vulkan: "spirv" (the
  // binary disassembled, shown only) and "spv" (the binary, written as .spv).
  virtual Expected<std::vector<ArtifactForm>> binary_forms(const codegen::gpu::GpuSource& source,
                                                           const std::vector<uint8_t>& binary,
                                                           const std::string& name) const = 0;
  // A binary from compile() (possibly of another process) -> a program ready to launch.
  virtual Expected<std::shared_ptr<const GpuProgram>> load(const codegen::gpu::GpuSource& source,
                                                           const std::vector<uint8_t>& binary) = 0;
  // Pooled device memory; fails with the driver's message when the device is out of memory.
  virtual Expected<std::shared_ptr<DeviceMemory>> allocate(size_t bytes) = 0;
  virtual Expected<std::unique_ptr<GpuStream>> create_stream() = 0;
};

// A toolchain without a device (open_cuda_compiler, open_vulkan_compiler): it compiles as a
// device would; load, allocate and streams fail saying there is nothing to run on.
class GpuCompiler : public GpuBackend {
 public:
  bool compile_only() const override { return true; }
  Expected<std::shared_ptr<const GpuProgram>> load(const codegen::gpu::GpuSource&,
                                                   const std::vector<uint8_t>&) override {
    return make_error(no_device());
  }
  Expected<std::shared_ptr<DeviceMemory>> allocate(size_t) override { return make_error(no_device()); }
  Expected<std::unique_ptr<GpuStream>> create_stream() override { return make_error(no_device()); }

 private:
  std::string no_device() const { return name() + ": no device to run on"; }
};

// Opens the runtime's device `index`: an error (not a crash) when the driver, loader or device is
// missing; the message says which.
// CUDA targets look for NVRTC where `nvrtc` says (KILN_NVRTC_LIBRARY, CUDA_HOME, read at the edge).
Expected<std::unique_ptr<GpuBackend>> open_cuda_backend(int index,
                                                        const codegen::cuda::NvrtcSearch& nvrtc = {});
Expected<std::unique_ptr<GpuBackend>> open_vulkan_backend(int index);
// Compile-only CUDA for `arch` ("sm_90"), for `kiln warm --target cuda` and `kiln dump` without a
// GPU: compile() and fingerprint() are what a device of that architecture gives, so its cache
// entries are found there; load, allocate and streams are errors.
Expected<std::unique_ptr<GpuBackend>> open_cuda_compiler(std::string_view arch,
                                                         const codegen::cuda::NvrtcSearch& nvrtc = {});
// Compile-only Vulkan (shaderc and SPIRV-Tools, no device), for `kiln dump --target vulkan` where
// no Vulkan device is present: its fingerprint names no device, so it shares no cache entries.
std::unique_ptr<GpuBackend> open_vulkan_compiler();
// The devices present, as `kiln devices` lists them: one (name, properties) per device, or one
// entry named e.g. "cuda" whose properties say why none is usable.
using GpuDeviceInfo = DeviceInfo;
std::vector<GpuDeviceInfo> list_cuda_devices(const codegen::cuda::NvrtcSearch& nvrtc = {});
std::vector<GpuDeviceInfo> list_vulkan_devices();

}  // namespace kiln::runtime
