// The cpu backend's driver: host detection, one ORC LLJIT per backend, and compile() =
// emit (llvm_emitter) -> verify -> O3 (llvm_optimizer) -> add to the JIT -> look up.
#include "codegen/cpu/cpu_backend.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <algorithm>
#include <chrono>
#include <mutex>
#include <vector>

#include <llvm/ExecutionEngine/Orc/ExecutionUtils.h>
#include <llvm/ExecutionEngine/Orc/JITTargetMachineBuilder.h>
#include <llvm/ExecutionEngine/Orc/LLJIT.h>
#include <llvm/ExecutionEngine/Orc/ThreadSafeModule.h>
#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/Module.h>
#include <llvm/IR/Verifier.h>
#include <llvm/Support/TargetSelect.h>
#include <llvm/Support/raw_ostream.h>
#include <llvm/Target/TargetMachine.h>
#include <llvm/TargetParser/Host.h>

#include "codegen/cpu/llvm_emitter.h"
#include "codegen/cpu/llvm_optimizer.h"

namespace kiln::codegen {

namespace {

kiln::Error llvm_error(const std::string& what, llvm::Error err) {
  return kiln::Error{fmt::format("cpu backend: {}: {}", what, llvm::toString(std::move(err)))};
}

// "+avx2", "-avx512f", ... sorted by name, so that the string (a cache key part) is stable.
std::vector<std::string> host_features() {
  std::vector<std::string> out;
  for (const auto& f : llvm::sys::getHostCPUFeatures())
    out.push_back((f.getValue() ? "+" : "-") + f.getKey().str());
  std::ranges::sort(
      out, [](const std::string& a, const std::string& b) { return a.substr(1) < b.substr(1); });
  return out;
}

std::string symbol_for(const std::string& name, uint64_t serial) {
  std::string s = "kiln_";
  for (char c : name) s += std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
  return fmt::format("{}_{}", s, serial);
}

}  // namespace

struct CpuBackend::Impl {
  std::mutex mu;
  std::unique_ptr<llvm::orc::LLJIT> jit;
  std::unique_ptr<llvm::TargetMachine> tm;  // for the optimization pipeline's cost model
  std::string cpu;
  std::vector<std::string> features;
  uint64_t next_serial = 0;
};

CpuBackend::CpuBackend() : impl_(std::make_unique<Impl>()) {}
CpuBackend::~CpuBackend() = default;

Expected<std::unique_ptr<CpuBackend>> CpuBackend::create() {
  static std::once_flag init_once;
  std::call_once(init_once, [] {
    llvm::InitializeNativeTarget();
    llvm::InitializeNativeTargetAsmPrinter();
  });
  std::unique_ptr<CpuBackend> backend(new CpuBackend());
  Impl& impl = *backend->impl_;
  impl.cpu = llvm::sys::getHostCPUName().str();
  impl.features = host_features();

  auto jtmb = llvm::orc::JITTargetMachineBuilder::detectHost();
  if (!jtmb) return std::unexpected(llvm_error("detecting the host target", jtmb.takeError()));
  jtmb->setCPU(impl.cpu);
  jtmb->setFeatures(fmt::format("{}", fmt::join(impl.features, ",")));
  jtmb->setCodeGenOptLevel(llvm::CodeGenOptLevel::Aggressive);
  auto tm = jtmb->createTargetMachine();
  if (!tm) return std::unexpected(llvm_error("creating the host target machine", tm.takeError()));
  impl.tm = std::move(*tm);

  auto jit = llvm::orc::LLJITBuilder().setJITTargetMachineBuilder(std::move(*jtmb)).create();
  if (!jit) return std::unexpected(llvm_error("creating the ORC LLJIT", jit.takeError()));
  impl.jit = std::move(*jit);
  // Kernels call libm (f64 math, powf): resolve against everything loaded in this process.
  auto process = llvm::orc::DynamicLibrarySearchGenerator::GetForCurrentProcess(
      impl.jit->getDataLayout().getGlobalPrefix());
  if (!process)
    return std::unexpected(llvm_error("exposing process symbols to the JIT", process.takeError()));
  impl.jit->getMainJITDylib().addGenerator(std::move(*process));
  return backend;
}

std::string CpuBackend::cpu_name() const {
  return impl_->cpu;
}

std::string CpuBackend::cpu_features() const {
  return fmt::format("{}", fmt::join(impl_->features, ","));
}

Expected<std::shared_ptr<const CpuArtifact>> CpuBackend::compile(const kir::Kernel& kernel,
                                                                 const TuneParams& params) {
  std::lock_guard lock(impl_->mu);
  const auto start = std::chrono::steady_clock::now();
  auto art = std::make_shared<CpuArtifact>();
  art->symbol = symbol_for(kernel.name, impl_->next_serial++);
  art->outer_extent = kernel.outer_extent();

  auto ctx = std::make_unique<llvm::LLVMContext>();
  auto module = std::make_unique<llvm::Module>(art->symbol, *ctx);
  module->setDataLayout(impl_->jit->getDataLayout());
  module->setTargetTriple(impl_->jit->getTargetTriple().str());
  cpu::EmitOptions options{art->symbol, impl_->cpu, cpu_features(), params};
  if (Expected<llvm::Function*> fn = cpu::emit_kernel(kernel, options, *module); !fn)
    return std::unexpected(fn.error());
  std::string problems;
  llvm::raw_string_ostream problem_stream(problems);
  if (llvm::verifyModule(*module, &problem_stream))
    return make_error(fmt::format("cpu backend: invalid LLVM IR for kernel '{}': {}\n{}",
                                  kernel.name, problems, kir::print_kernel(kernel)));
  cpu::optimize_module(*module, *impl_->tm);
  llvm::raw_string_ostream ir_stream(art->llvm_ir);
  module->print(ir_stream, nullptr);
  ir_stream.flush();

  llvm::orc::ThreadSafeModule tsm(std::move(module), std::move(ctx));
  if (llvm::Error err = impl_->jit->addIRModule(std::move(tsm)))
    return std::unexpected(
        llvm_error(fmt::format("adding kernel '{}' to the JIT", kernel.name), std::move(err)));
  auto addr = impl_->jit->lookup(art->symbol);
  if (!addr)
    return std::unexpected(
        llvm_error(fmt::format("materializing kernel '{}'", kernel.name), addr.takeError()));
  art->fn = addr->toPtr<CpuKernelFn>();
  art->compile_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  return art;
}

}  // namespace kiln::codegen
