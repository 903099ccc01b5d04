// The GPU targets (`cuda:N`, `vulkan:N`, and compile-only CUDA for an sm_XX): kernels become CUDA
// C or GLSL (codegen/gpu), then a cubin, PTX or SPIR-V through the GpuBackend's toolchain, loaded
// as a CUDA module or a Vulkan pipeline; memory is the device's own, reached by copies on the
// backend's streams.
#pragma once

#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>

#include "runtime/gpu_backend.h"
#include "runtime/target.h"

namespace kiln::runtime {

// Rates for the fuser's cost model: a device that is really the CPU (lavapipe, property
// type = cpu) gets the cpu's reference rates; others DeviceRates::reference_gpu().
passes::DeviceRates gpu_rates(const GpuBackend& backend);

// What compiling a GPU kernel makes: its source and launch shape, its binary, and (once loaded)
// its program. Shared by every instance a dynamic kernel is bound to
// (GpuTarget::with_outer_extent).
struct GpuCode {
  codegen::gpu::GpuSource gpu_source;
  std::vector<uint8_t> binary;  // GpuBackend::binary_kind()
  std::shared_ptr<const GpuProgram> program;
  double ms = 0;
};

// A compiled GPU kernel: its code, and the outer extent a dynamic kernel is launched at.
class GpuKernel final : public Artifact {
 public:
  GpuKernel(std::shared_ptr<const GpuCode> code, int64_t outer_extent)
      : code(std::move(code)), outer_extent(outer_extent) {}
  const std::string& source() const override { return code->gpu_source.text; }
  double compile_ms() const override { return code->ms; }
  bool loaded() const override { return code->program != nullptr; }
  // "strategy matmul-mma, 64 workgroups of 256 threads"
  std::string summary() const override;

  std::shared_ptr<const GpuCode> code;
  // A dynamic kernel's (code->gpu_source.launch.dynamic_tasks > 0) outer extent, which it is
  // launched at (GpuTarget::with_outer_extent binds another); -1: unbound (read from the cache).
  int64_t outer_extent = -1;
};

// The source of `kernel` under `params` in `backend`'s dialect. Where the device has a budget of
// loop iterations per invocation (GpuBackend::loop_iteration_limit) and the default schedule
// (TuneParams{}: the heuristics) would run more, the first candidate of the kernel's tuning space
// (autotune/tune_space.h: nearest the heuristics first) that stays within it is written instead.
// An explicit schedule is written as asked: the backend's compile() refuses it when it is over,
// as it does a default with no candidate under the budget, naming the kernel, its bound, the
// limit and the device.
Expected<codegen::gpu::GpuSource> emit_for_device(const GpuBackend& backend,
                                                  const kir::Kernel& kernel,
                                                  const codegen::TuneParams& params,
                                                  codegen::CheckMode check,
                                                  const kir::KernelFacts* facts = nullptr,
                                                  bool tensor_cores = false);

// The source and launch shape a GPU kernel entry holds beside its binary, read and checked; an
// error when they are not one, or (with a non-empty `binary_kind`) the binary is of another kind.
Expected<codegen::gpu::GpuSource> read_gpu_entry(const cache::Entry& entry, std::string_view binary_kind);

class GpuTarget final : public Target {
 public:
  // `tensor_core_matmul` (kiln.toml compilation.matmul_precision = "high"): matmuls on the tensor
  // cores where the backend has them (GpuBackend::warp_mma; part of identity() then).
  explicit GpuTarget(std::unique_ptr<GpuBackend> backend, bool tensor_core_matmul = false);
  ~GpuTarget() override;

  std::string name() const override { return backend_->name(); }
  bool can_run() const override { return !backend_->compile_only(); }
  std::optional<size_t> max_kernel_buffers() const override {
    return backend_->max_kernel_buffers();
  }
  std::string source_extension() const override;
  std::vector<std::pair<std::string, std::string>> identity() const override;
  passes::DeviceRates reference_rates() const override { return gpu_rates(*backend_); }
  Expected<passes::DeviceRates> measure_rates() override;
  // The rate kernels are generated code: a new code generator measures again.
  std::string rates_setup() const override { return ""; }
  bool plans_with_measured_rates() const override { return false; }
  Expected<std::shared_ptr<const Artifact>> compile(const kir::Kernel& kernel,
                                                    const kir::KernelFacts& facts,
                                                    const codegen::TuneParams& params,
                                                    codegen::CheckMode check, bool load) override;
  // Dynamic kernels (codegen::gpu::serves_any_outer_extent) take the outer extent at run time;
  // their text is written at the size bucket's bound, so every instance within it is served.
  bool buckets_dynamic_kernels() const override { return true; }
  bool serves_any_outer_extent(const kir::Kernel& kernel, const kir::KernelFacts& facts,
                               codegen::CheckMode check) const override;
  bool serves_instance(const kir::Kernel& kernel,
                       const std::vector<bool>& written_only) const override;
  std::shared_ptr<const Artifact> with_outer_extent(const Artifact& artifact,
                                                    int64_t outer_extent) const override;
  std::optional<cache::Entry> to_entry(const Artifact& artifact) const override;
  Expected<std::shared_ptr<const Artifact>> from_entry(const cache::Entry& entry, bool load) override;
  Expected<std::vector<ArtifactForm>> forms(const Artifact& artifact, const std::string& name) override;
  Expected<autotune::TuneDecision> tune(const kir::Kernel& kernel, autotune::Level level,
                                        double roofline_ms) override;
  bool host_memory() const override { return false; }
  std::shared_ptr<DeviceMemory> wrap(std::shared_ptr<Buffer> buffer) override;
  Expected<std::shared_ptr<DeviceMemory>> allocate(size_t bytes) override;
  Expected<std::unique_ptr<Stream>> create_stream() override;

  GpuBackend& backend() { return *backend_; }
  bool tensor_cores() const { return tensor_cores_; }

 private:
  std::unique_ptr<GpuBackend> backend_;
  bool tensor_cores_;
};

// "cuda:N" / "vulkan:N" -> the backend's device N; nullopt for names of no GPU API; an error for
// a malformed index or a device that cannot be opened (the message says why).
std::optional<Expected<std::unique_ptr<GpuBackend>>> open_gpu_backend(
    std::string_view name, const codegen::cuda::NvrtcSearch& nvrtc = {});

}  // namespace kiln::runtime
