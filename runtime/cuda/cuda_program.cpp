// Loads a cubin or PTX module with cuModuleLoadDataEx and finds the kernel's entry function.
#include "runtime/cuda/cuda_program.h"

#include <fmt/format.h>


namespace kiln::runtime::cuda {

bool is_cubin(const std::vector<uint8_t>& binary) {
  return binary.size() >= 4 && binary[0] == 0x7f && binary[1] == 'E' && binary[2] == 'L' &&
         binary[3] == 'F';
}

namespace {

// Loads `image` with the JIT's error log captured (it explains PTX the driver rejects).
Expected<CUmodule> load_module(const CudaContext& context, const void* image,
                               const std::string& entry) {
  const CudaDriver& d = context.driver();
  std::vector<char> log(8192, '\0');
  CUjit_option options[] = {kJitErrorLogBuffer, kJitErrorLogBufferSize};
  // The driver reads the size option as an unsigned int stored in the pointer-sized slot.
  void* values[] = {log.data(), reinterpret_cast<void*>(static_cast<uintptr_t>(log.size()))};
  CUmodule module = nullptr;
  const CUresult result = d.cuModuleLoadDataEx(&module, image, 2, options, values);
  if (result == kCudaSuccess) return module;
  log.back() = '\0';
  const std::string jit_log(log.data());
  return make_error(fmt::format("cuda: cuModuleLoadDataEx for kernel '{}' on device {}: {}{}{}",
                                entry, context.ordinal(), d.describe(result),
                                jit_log.empty() ? "" : "\n", jit_log));
}

}  // namespace

Expected<std::shared_ptr<const CudaProgram>> CudaProgram::load(
    std::shared_ptr<const CudaContext> context, const codegen::gpu::GpuSource& source,
    const std::vector<uint8_t>& binary) {
  if (binary.empty())
    return make_error(fmt::format("cuda: kernel '{}': empty binary", source.entry));
  if (auto ok = context->make_current(); !ok) return std::unexpected(ok.error());
  // PTX must be NUL-terminated for the driver; a cubin is passed as it is.
  std::vector<uint8_t> terminated;
  const void* image = binary.data();
  if (!is_cubin(binary) && binary.back() != 0) {
    terminated = binary;
    terminated.push_back(0);
    image = terminated.data();
  }
  auto module = load_module(*context, image, source.entry);
  if (!module) return std::unexpected(module.error());
  const CudaDriver& d = context->driver();
  CUfunction function = nullptr;
  if (auto ok = d.check(d.cuModuleGetFunction(&function, *module, source.entry.c_str()),
                        fmt::format("cuModuleGetFunction('{}')", source.entry));
      !ok) {
    d.cuModuleUnload(*module);
    return std::unexpected(ok.error());
  }
  return std::shared_ptr<const CudaProgram>(
      new CudaProgram(std::move(context), *module, function, source));
}

CudaProgram::~CudaProgram() {
  if (context_->make_current()) context_->driver().cuModuleUnload(module_);
}

}  // namespace kiln::runtime::cuda
