// GpuBackend over the CUDA driver API: the device's primary context, NVRTC compilation for its
// exact sm_XX, module loading, pooled memory and streams; plus device discovery.
#include "runtime/cuda/cuda_backend.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

#include "codegen/cuda/nvrtc.h"
#include "runtime/cuda/cuda_context.h"
#include "runtime/cuda/cuda_device_info.h"
#include "runtime/cuda/cuda_memory_pool.h"
#include "runtime/cuda/cuda_program.h"
#include "runtime/cuda/cuda_stream.h"
#include "runtime/gpu_backend.h"

namespace kiln::runtime::cuda {

Expected<CompileTarget> choose_compile_target(int device_sm, const std::vector<int>& supported,
                                              const std::string& nvrtc_version) {
  if (supported.empty() ||
      std::find(supported.begin(), supported.end(), device_sm) != supported.end())
    return CompileTarget{device_sm, true};
  int best = 0;
  for (int sm : supported)
    if (sm < device_sm) best = std::max(best, sm);
  if (best > 0) return CompileTarget{best, false};
  return make_error(
      fmt::format("cuda: NVRTC {} compiles for sm_{} to sm_{} only, not for this "
                  "device's sm_{}",
                  nvrtc_version, *std::min_element(supported.begin(), supported.end()),
                  *std::max_element(supported.begin(), supported.end()), device_sm));
}

namespace {

using codegen::cuda::Nvrtc;
using NvrtcResult = Expected<std::shared_ptr<const Nvrtc>>;

std::string nvrtc_label(const NvrtcResult& nvrtc) {
  return nvrtc ? "NVRTC " + (*nvrtc)->version() : std::string("none");
}

std::string cuda_fingerprint(int sm, const NvrtcResult& nvrtc) {
  return fmt::format("sm_{} {}", sm, nvrtc_label(nvrtc));
}

// What runs on a device of compute capability `sm`: a cubin for it, or PTX for the driver's JIT.
Expected<std::vector<uint8_t>> compile_for_sm(const NvrtcResult& nvrtc_or_error, int sm,
                                              const codegen::gpu::GpuSource& source,
                                              const std::string& name, const std::string& device) {
  if (!nvrtc_or_error)
    return make_error(fmt::format("cuda: cannot compile {} for {}: {}", name, device,
                                  nvrtc_or_error.error().message));
  const Nvrtc& nvrtc = **nvrtc_or_error;
  auto target = choose_compile_target(sm, nvrtc.supported_archs(), nvrtc.version());
  if (!target) return std::unexpected(target.error());
  auto binary = nvrtc.compile(source.text, name, fmt::format("sm_{}", target->sm), target->cubin);
  if (!binary) return std::unexpected(binary.error());
  if (target->cubin) return std::move(binary->cubin);
  // PTX for the driver's JIT, NUL-terminated as cuModuleLoadDataEx wants it.
  std::vector<uint8_t> ptx(binary->ptx.begin(), binary->ptx.end());
  ptx.push_back(0);
  return ptx;
}

// The ptx and cubin forms of a kernel compiled for `sm` (GpuBackend::binary_forms): the PTX
// NVRTC makes for the architecture compile_for_sm chose, and the binary when it is a cubin.
Expected<std::vector<ArtifactForm>> cuda_binary_forms(const NvrtcResult& nvrtc_or_error, int sm,
                                                      const codegen::gpu::GpuSource& source,
                                                      const std::vector<uint8_t>& binary,
                                                      const std::string& name) {
  if (!nvrtc_or_error) return std::unexpected(nvrtc_or_error.error());
  const Nvrtc& nvrtc = **nvrtc_or_error;
  auto target = choose_compile_target(sm, nvrtc.supported_archs(), nvrtc.version());
  if (!target) return std::unexpected(target.error());
  std::vector<ArtifactForm> forms;
  if (target->cubin) {
    auto ptx = nvrtc.compile(source.text, name, fmt::format("sm_{}", target->sm), /*cubin=*/false);
    if (!ptx) return std::unexpected(ptx.error());
    forms.push_back({"ptx", "ptx", std::move(ptx->ptx)});
    forms.push_back({"cubin", "cubin", std::string(binary.begin(), binary.end())});
  } else {  // the binary is the PTX itself, NUL-terminated
    std::string ptx(binary.begin(), binary.end());
    while (!ptx.empty() && ptx.back() == '\0') ptx.pop_back();
    forms.push_back({"ptx", "ptx", std::move(ptx)});
  }
  return forms;
}

// `kiln warm --target cuda --arch sm_XX` without a GPU: compiles exactly as a device of that
// architecture would, and has nothing to run on.
class CudaCompiler final : public GpuCompiler {
 public:
  CudaCompiler(int sm, NvrtcResult nvrtc) : sm_(sm), nvrtc_(std::move(nvrtc)) {}
  std::string name() const override { return fmt::format("cuda (sm_{}, compile only)", sm_); }
  std::vector<std::pair<std::string, std::string>> properties() const override {
    return {{"type", "gpu"}, {"arch", fmt::format("sm_{}", sm_)}, {"nvrtc", nvrtc_label(nvrtc_)}};
  }
  std::string fingerprint() const override { return cuda_fingerprint(sm_, nvrtc_); }
  codegen::gpu::Dialect dialect() const override { return codegen::gpu::Dialect::cuda; }
  bool warp_mma() const override { return sm_ >= 80; }
  std::string binary_kind() const override { return "cubin"; }
  Expected<std::vector<uint8_t>> compile(const codegen::gpu::GpuSource& source,
                                         const std::string& name) override {
    return compile_for_sm(nvrtc_, sm_, source, name, this->name());
  }
  Expected<std::vector<ArtifactForm>> binary_forms(const codegen::gpu::GpuSource& source,
                                                   const std::vector<uint8_t>& binary,
                                                   const std::string& name) const override {
    return cuda_binary_forms(nvrtc_, sm_, source, binary, name);
  }

 private:
  int sm_;
  NvrtcResult nvrtc_;
};

class CudaBackend final : public GpuBackend {
 public:
  CudaBackend(std::shared_ptr<const CudaContext> context, CudaDeviceInfo info,
              std::string driver_version, NvrtcResult nvrtc)
      : context_(context),
        info_(std::move(info)),
        driver_version_(std::move(driver_version)),
        nvrtc_(std::move(nvrtc)),
        pool_(std::make_shared<CudaMemoryPool>(std::move(context))) {}

  std::string name() const override { return fmt::format("cuda:{}", info_.ordinal); }
  std::vector<std::pair<std::string, std::string>> properties() const override {
    return device_properties(info_, driver_version_, nvrtc_label(nvrtc_));
  }
  // The architecture and toolchain only (DESIGN.md §8: the compute capability): two devices of
  // one sm_XX share binaries, and `kiln warm --arch sm_XX` can fill the cache without the device.
  std::string fingerprint() const override { return cuda_fingerprint(info_.sm(), nvrtc_); }
  codegen::gpu::Dialect dialect() const override { return codegen::gpu::Dialect::cuda; }
  bool warp_mma() const override { return info_.sm() >= 80; }
  std::string binary_kind() const override { return "cubin"; }

  Expected<std::vector<uint8_t>> compile(const codegen::gpu::GpuSource& source,
                                         const std::string& name) override;
  Expected<std::vector<ArtifactForm>> binary_forms(const codegen::gpu::GpuSource& source,
                                                   const std::vector<uint8_t>& binary,
                                                   const std::string& name) const override {
    return cuda_binary_forms(nvrtc_, info_.sm(), source, binary, name);
  }
  Expected<std::shared_ptr<const GpuProgram>> load(const codegen::gpu::GpuSource& source,
                                                   const std::vector<uint8_t>& binary) override {
    auto program = CudaProgram::load(context_, source, binary);
    if (!program) return std::unexpected(program.error());
    return std::shared_ptr<const GpuProgram>(std::move(*program));
  }
  Expected<std::shared_ptr<DeviceMemory>> allocate(size_t bytes) override {
    return pool_->allocate(bytes);
  }
  Expected<std::unique_ptr<GpuStream>> create_stream() override {
    auto stream = CudaStream::create(context_);
    if (!stream) return std::unexpected(stream.error());
    return std::unique_ptr<GpuStream>(std::move(*stream));
  }

 private:
  std::shared_ptr<const CudaContext> context_;
  CudaDeviceInfo info_;
  std::string driver_version_;
  NvrtcResult nvrtc_;
  std::shared_ptr<CudaMemoryPool> pool_;
};

Expected<std::vector<uint8_t>> CudaBackend::compile(const codegen::gpu::GpuSource& source,
                                                    const std::string& name) {
  return compile_for_sm(nvrtc_, info_.sm(), source, name, this->name());
}

// The loaded driver and its device count; the error says why CUDA is unusable here.
Expected<std::pair<const CudaDriver*, int>> driver_and_count() {
  auto driver = CudaDriver::load();
  if (!driver) return std::unexpected(driver.error());
  int count = 0;
  if (auto ok = (*driver)->check((*driver)->cuDeviceGetCount(&count), "cuDeviceGetCount"); !ok)
    return std::unexpected(ok.error());
  if (count == 0) return make_error("cuda: the NVIDIA driver reports no CUDA device");
  return std::pair<const CudaDriver*, int>{*driver, count};
}

}  // namespace

}  // namespace kiln::runtime::cuda

namespace kiln::runtime {

Expected<std::unique_ptr<GpuBackend>> open_cuda_compiler(std::string_view arch,
                                                         const codegen::cuda::NvrtcSearch& search) {
  auto sm = codegen::cuda::parse_arch(arch);
  if (!sm) return std::unexpected(sm.error());
  auto nvrtc = codegen::cuda::Nvrtc::load(search);
  if (!nvrtc) return make_error("cuda: cannot compile for " + std::string(arch) + ": " + nvrtc.error().message);
  // A device picks the newest architecture NVRTC knows below its own (choose_compile_target); an
  // --arch without a device names the target itself, so one NVRTC does not know (a typo such as
  // sm_900) is refused rather than compiled as PTX for another architecture.
  if (const std::vector<int> archs = (*nvrtc)->supported_archs();
      !archs.empty() && std::find(archs.begin(), archs.end(), *sm) == archs.end()) {
    std::vector<std::string> names;
    for (int a : archs) names.push_back(fmt::format("sm_{}", a));
    return make_error(fmt::format("cuda: NVRTC {} does not compile for {}; it knows {}",
                                  (*nvrtc)->version(), arch, fmt::join(names, ", ")));
  }
  return std::unique_ptr<GpuBackend>(new cuda::CudaCompiler(*sm, std::move(nvrtc)));
}

Expected<std::unique_ptr<GpuBackend>> open_cuda_backend(int index,
                                                        const codegen::cuda::NvrtcSearch& search) {
  using namespace cuda;
  auto found = driver_and_count();
  if (!found) return std::unexpected(found.error());
  const auto [driver, count] = *found;
  if (index < 0 || index >= count)
    return make_error(
        fmt::format("cuda: no device cuda:{}: this machine has {} CUDA device{} "
                    "(cuda:0 to cuda:{})",
                    index, count, count == 1 ? "" : "s", count - 1));
  auto info = query_device(*driver, index);
  if (!info) return std::unexpected(info.error());
  auto version = driver_version(*driver);
  if (!version) return std::unexpected(version.error());
  auto context = CudaContext::retain(*driver, index);
  if (!context) return std::unexpected(context.error());
  return std::unique_ptr<GpuBackend>(
      new CudaBackend(std::move(*context), std::move(*info), *version, Nvrtc::load(search)));
}

std::vector<GpuDeviceInfo> list_cuda_devices(const codegen::cuda::NvrtcSearch& search) {
  using namespace cuda;
  auto found = driver_and_count();
  if (!found) return {GpuDeviceInfo{"cuda", false, {{"absent", found.error().message}}}};
  const auto [driver, count] = *found;
  const std::string version = driver_version(*driver).value_or("unknown");
  const std::string nvrtc = nvrtc_label(Nvrtc::load(search));
  std::vector<GpuDeviceInfo> devices;
  for (int i = 0; i < count; ++i) {
    const std::string name = fmt::format("cuda:{}", i);
    auto info = query_device(*driver, i);
    if (info)
      devices.push_back({name, true, device_properties(*info, version, nvrtc)});
    else
      devices.push_back({name, false, {{"absent", info.error().message}}});
  }
  return devices;
}

}  // namespace kiln::runtime
