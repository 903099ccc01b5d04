// A kernel loaded into a CUDA context: the module (cubin, or PTX the driver JIT-compiles), its
// entry function and the launch shape it was generated for.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "codegen/gpu/gpu_source.h"
#include "runtime/cuda/cuda_context.h"
#include "runtime/gpu_backend.h"
#include "kiln/error.h"

namespace kiln::runtime::cuda {

class CudaProgram final : public GpuProgram {
 public:
  // `binary` is a cubin (ELF) or NUL-terminated PTX text; PTX without its NUL is accepted too.
  static Expected<std::shared_ptr<const CudaProgram>> load(
      std::shared_ptr<const CudaContext> context, const codegen::gpu::GpuSource& source,
      const std::vector<uint8_t>& binary);
  ~CudaProgram() override;
  CudaProgram(const CudaProgram&) = delete;
  CudaProgram& operator=(const CudaProgram&) = delete;

  CUfunction function() const { return function_; }
  const codegen::gpu::LaunchShape& launch() const { return launch_; }
  const std::string& entry() const { return entry_; }

 private:
  CudaProgram(std::shared_ptr<const CudaContext> context, CUmodule module, CUfunction function,
              const codegen::gpu::GpuSource& source)
      : context_(std::move(context)),
        module_(module),
        function_(function),
        launch_(source.launch),
        entry_(source.entry) {}
  std::shared_ptr<const CudaContext> context_;
  CUmodule module_;
  CUfunction function_;
  codegen::gpu::LaunchShape launch_;
  std::string entry_;
};

// True when `binary` starts with the ELF magic (a cubin rather than PTX text).
bool is_cubin(const std::vector<uint8_t>& binary);

}  // namespace kiln::runtime::cuda
