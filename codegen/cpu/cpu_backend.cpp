// The cpu backend's driver: host detection, one ORC LLJIT per backend, compile() = emit
// (llvm_emitter) -> verify -> O3 (llvm_optimizer) -> object code -> link, and load() = link only.
// Compiles run in parallel up to the link, which one mutex serializes.
#include "codegen/cpu/cpu_backend.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <fstream>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include <llvm/Config/llvm-config.h>
#include <llvm/ExecutionEngine/Orc/ExecutionUtils.h>
#include <llvm/ExecutionEngine/Orc/JITTargetMachineBuilder.h>
#include <llvm/ExecutionEngine/Orc/LLJIT.h>
#include <llvm/IR/DataLayout.h>
#include <llvm/IR/DiagnosticInfo.h>
#include <llvm/IR/DiagnosticPrinter.h>
#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/Module.h>
#include <llvm/IR/Verifier.h>
#include <llvm/Object/ELFObjectFile.h>
#include <llvm/Object/ObjectFile.h>
#include <llvm/Support/MemoryBuffer.h>
#include <llvm/Support/TargetSelect.h>
#include <llvm/Support/raw_ostream.h>
#include <llvm/Target/TargetMachine.h>
#include <llvm/TargetParser/Host.h>
#include <llvm/TargetParser/Triple.h>
#include <llvm/TargetParser/X86TargetParser.h>

#include "codegen/cpu/llvm_emitter.h"
#include "codegen/cpu/llvm_optimizer.h"
#include "codegen/cpu/streaming_stores.h"
#include "codegen/cpu/object_code.h"

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

constexpr const char* kTargetHelp =
    "expected native, x86-64-v3, x86-64-v4 or an LLVM x86-64 CPU name such as znver3";

// The "+feature" list of a named CPU with every feature they imply (x86-64-v4 lists avx512vl,
// which implies avx512f), sorted like host_features(); empty for an unknown name.
std::vector<std::string> named_cpu_features(std::string_view cpu) {
  llvm::SmallVector<llvm::StringRef, 64> names;
  llvm::X86::getFeaturesForCPU(llvm::StringRef(cpu.data(), cpu.size()), names);
  llvm::StringMap<bool> implied;
  for (llvm::StringRef f : names) {
    implied[f] = true;
    llvm::X86::updateImpliedFeatures(f, true, implied);  // sets what f implies, not f itself
  }
  std::vector<std::string> out;
  for (const auto& f : implied)
    if (f.getValue()) out.push_back("+" + f.getKey().str());
  std::ranges::sort(
      out, [](const std::string& a, const std::string& b) { return a.substr(1) < b.substr(1); });
  return out;
}

// The features `wanted` ("+name" entries) that this host's CPU reports as absent.
std::vector<std::string> missing_on_host(const std::vector<std::string>& wanted) {
  const llvm::StringMap<bool> host = llvm::sys::getHostCPUFeatures();
  std::vector<std::string> missing;
  for (const std::string& f : wanted) {
    auto it = host.find(f.substr(1));
    if (it != host.end() && !it->getValue()) missing.push_back(f.substr(1));
  }
  return missing;
}

// The symbol depends on the kernel's name only: each object links into a JITDylib of its own, so
// equal symbols never meet, and a kernel compiles to the same bytes whatever else compiled
// before it or beside it (dumps and cache entries are reproducible).
std::string symbol_for(const std::string& name) {
  std::string s = "kiln_";
  for (char c : name) s += std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
  return s;
}

// The size in bytes of the function `symbol` in the ELF object `object` (its symbol table's
// function entry: the module's file symbol has the same name); 0 where it has none.
uint64_t function_size(const std::vector<uint8_t>& object, const std::string& symbol) {
  const llvm::StringRef bytes(reinterpret_cast<const char*>(object.data()), object.size());
  auto file = llvm::object::ObjectFile::createObjectFile(llvm::MemoryBufferRef(bytes, symbol));
  if (!file) {
    llvm::consumeError(file.takeError());
    return 0;
  }
  const auto* elf = llvm::dyn_cast<llvm::object::ELFObjectFileBase>(file->get());
  if (elf == nullptr) return 0;
  for (const llvm::object::ELFSymbolRef sym : elf->symbols()) {
    if (sym.getELFType() != llvm::ELF::STT_FUNC) continue;
    auto name = sym.getName();
    if (!name) {
      llvm::consumeError(name.takeError());
      continue;
    }
    if (*name == symbol) return sym.getSize();
  }
  return 0;
}

// Whether KILN_PERF_MAP asks for perf's map (set, not empty, not "0").
bool perf_map_wanted() {
  const char* wanted = std::getenv("KILN_PERF_MAP");
  return wanted != nullptr && !std::string_view(wanted).empty() && std::string_view(wanted) != "0";
}

// Adds the kernel at [address, address + size) to perf_map_path() as perf reads it: "START SIZE
// NAME" in hex, one whole line per kernel whichever backend of the process links it.
void add_to_perf_map(uint64_t address, uint64_t size, const std::string& symbol) {
  if (size == 0) return;
  static std::mutex file_mu;
  std::lock_guard lock(file_mu);
  if (std::FILE* f = std::fopen(perf_map_path().c_str(), "a")) {
    fmt::print(f, "{:x} {:x} {}\n", address, size, symbol);
    std::fclose(f);
  }
}

}  // namespace

std::string perf_map_path() {
  return fmt::format("/tmp/perf-{}.map", ::getpid());
}

struct CpuBackend::Impl {
  // Guards what compiles share: the LLJIT session and the JITDylib count (link()). Everything
  // else a compile touches is its own (LLVMContext, module, TargetMachine) or set once in create().
  std::mutex mu;
  std::unique_ptr<llvm::orc::LLJIT> jit;
  // Makes each compile's TargetMachine (one may not serve two code generations at once): the
  // JIT's own settings (PIC, small code model), so that objects link the same whether compiled
  // or loaded. Creating one costs ~0.2 ms against tens of ms per compile, so there is no pool.
  llvm::orc::JITTargetMachineBuilder machine_builder{llvm::Triple()};
  llvm::DataLayout data_layout{""};
  llvm::Triple triple;
  std::string cpu;
  std::vector<std::string> features;
  int64_t llc_bytes = 0;
  uint64_t next_dylib = 0;

  Expected<std::unique_ptr<llvm::TargetMachine>> make_target_machine() const;
  // `self`: this Impl, which the linked code keeps alive (CpuArtifact::linked).
  Expected<bool> link(const std::vector<uint8_t>& object, CpuArtifact& art,
                      const std::shared_ptr<Impl>& self);
};

// Copies the builder first: createTargetMachine() is not const, and compiles call this at once.
Expected<std::unique_ptr<llvm::TargetMachine>> CpuBackend::Impl::make_target_machine() const {
  llvm::orc::JITTargetMachineBuilder builder = machine_builder;
  auto tm = builder.createTargetMachine();
  if (!tm) return std::unexpected(llvm_error("creating the host target machine", tm.takeError()));
  return std::move(*tm);
}

// Links `object` into a JITDylib of its own (so that equal symbols of several kernels, or of one
// object loaded twice, never meet) and looks up art.symbol. Caller holds mu. art.linked removes
// the JITDylib (under mu) when the last copy of the artifact goes.
Expected<bool> CpuBackend::Impl::link(const std::vector<uint8_t>& object, CpuArtifact& art,
                                      const std::shared_ptr<Impl>& self) {
  auto dylib = jit->createJITDylib(fmt::format("kiln_kernel_{}", next_dylib++));
  if (!dylib)
    return std::unexpected(
        llvm_error("creating a JITDylib for kernel '" + art.symbol + "'", dylib.takeError()));
  // Process symbols (malloc, libm) come from the main JITDylib's generator.
  dylib->addToLinkOrder(jit->getMainJITDylib());
  auto drop_dylib = [&] { llvm::consumeError(jit->getExecutionSession().removeJITDylib(*dylib)); };
  const llvm::StringRef bytes(reinterpret_cast<const char*>(object.data()), object.size());
  if (llvm::Error err =
          jit->addObjectFile(*dylib, llvm::MemoryBuffer::getMemBufferCopy(bytes, art.symbol))) {
    drop_dylib();
    return std::unexpected(
        llvm_error(fmt::format("adding kernel '{}' to the JIT", art.symbol), std::move(err)));
  }
  auto addr = jit->lookup(*dylib, art.symbol);
  if (!addr) {
    drop_dylib();
    return std::unexpected(
        llvm_error(fmt::format("linking kernel '{}'", art.symbol), addr.takeError()));
  }
  art.fn = addr->toPtr<CpuKernelFn>();
  art.linked = std::shared_ptr<const void>(&*dylib, [self](const void* code) {
    std::lock_guard lock(self->mu);
    llvm::consumeError(self->jit->getExecutionSession().removeJITDylib(
        *const_cast<llvm::orc::JITDylib*>(static_cast<const llvm::orc::JITDylib*>(code))));
  });
  // Only when asked: reading the object's symbols is work a link otherwise never does.
  if (perf_map_wanted())
    add_to_perf_map(addr->getValue(), function_size(object, art.symbol), art.symbol);
  return true;
}

namespace {

double ms_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
      .count();
}

}  // namespace

CpuBackend::CpuBackend() : impl_(std::make_shared<Impl>()) {}
CpuBackend::~CpuBackend() = default;

std::string CpuBackend::cpu_target_problem(std::string_view cpu_target) {
  if (cpu_target == "native") return "";
  if (llvm::X86::parseArchX86(llvm::StringRef(cpu_target.data(), cpu_target.size()),
                              /*Only64Bit=*/true) == llvm::X86::CK_None)
    return fmt::format("unknown CPU '{}' ({})", cpu_target, kTargetHelp);
  return "";
}

int64_t CpuBackend::host_llc_bytes() {
  int level = 0;
  int64_t bytes = 0;
  for (int index = 0; index < 16; ++index) {
    const std::string dir = fmt::format("/sys/devices/system/cpu/cpu0/cache/index{}/", index);
    std::ifstream level_file(dir + "level"), size_file(dir + "size"), type_file(dir + "type");
    int l = 0;
    std::string size, type;
    if (!(level_file >> l) || !(size_file >> size) || !(type_file >> type)) break;
    if (type == "Instruction" || l < level || size.empty()) continue;
    // "491520K", "32768K", "2M"
    int64_t n = 0;
    size_t used = 0;
    try {
      n = std::stoll(size, &used);
    } catch (const std::exception&) {
      continue;
    }
    const std::string unit = size.substr(used);
    const int64_t scale = unit == "K" ? 1024 : unit == "M" ? 1024 * 1024 : unit.empty() ? 1 : 0;
    if (n <= 0 || scale == 0) continue;
    level = l;
    bytes = n * scale;
  }
  return bytes;
}

Expected<std::unique_ptr<CpuBackend>> CpuBackend::create(std::string_view cpu_target,
                                                        std::optional<int64_t> llc_bytes) {
  if (std::string problem = cpu_target_problem(cpu_target); !problem.empty())
    return make_error("compilation.cpu_target: " + problem);
  static std::once_flag init_once;
  std::call_once(init_once, [] {
    llvm::InitializeNativeTarget();
    llvm::InitializeNativeTargetAsmPrinter();
  });
  std::unique_ptr<CpuBackend> backend(new CpuBackend());
  Impl& impl = *backend->impl_;
  if (cpu_target == "native") {
    impl.cpu = llvm::sys::getHostCPUName().str();
    impl.features = host_features();
    impl.llc_bytes = llc_bytes.value_or(host_llc_bytes());
  } else {
    impl.llc_bytes = llc_bytes.value_or(0);
    impl.cpu = std::string(cpu_target);
    impl.features = named_cpu_features(cpu_target);
    if (auto missing = missing_on_host(impl.features); !missing.empty())
      return make_error(fmt::format(
          "compilation.cpu_target: '{}' needs {}, which this CPU ({}) lacks: its kernels could "
          "not run here",
          cpu_target, fmt::join(missing, ", "), llvm::sys::getHostCPUName().str()));
  }

  auto jtmb = llvm::orc::JITTargetMachineBuilder::detectHost();
  if (!jtmb) return std::unexpected(llvm_error("detecting the host target", jtmb.takeError()));
  jtmb->setCPU(impl.cpu);
  jtmb->setFeatures(fmt::format("{}", fmt::join(impl.features, ",")));
  jtmb->setCodeGenOptLevel(llvm::CodeGenOptLevel::Aggressive);
  // What LLJITBuilder picks for JITLink on its own; set before the builder is copied so that
  // the compiles' target machines and the JIT's agree.
  jtmb->setRelocationModel(llvm::Reloc::PIC_);
  jtmb->setCodeModel(llvm::CodeModel::Small);
  impl.machine_builder = *jtmb;
  // Fail here, not in the first compile, when the host has no usable target machine.
  if (auto tm = impl.make_target_machine(); !tm) return std::unexpected(tm.error());

  auto jit = llvm::orc::LLJITBuilder().setJITTargetMachineBuilder(std::move(*jtmb)).create();
  if (!jit) return std::unexpected(llvm_error("creating the ORC LLJIT", jit.takeError()));
  impl.jit = std::move(*jit);
  impl.data_layout = impl.jit->getDataLayout();
  impl.triple = impl.jit->getTargetTriple();
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

int64_t CpuBackend::llc_bytes() const {
  return impl_->llc_bytes;
}

Expected<std::shared_ptr<const CpuArtifact>> CpuBackend::compile(const kir::Kernel& kernel,
                                                                 const TuneParams& params,
                                                                 CheckMode mode,
                                                                 const kir::KernelFacts* facts) {
  compiles_.fetch_add(1, std::memory_order_relaxed);
  const auto start = std::chrono::steady_clock::now();
  std::optional<kir::KernelFacts> computed;
  if (!facts) facts = &computed.emplace(kir::analyze_kernel(kernel));
  auto art = std::make_shared<CpuArtifact>();
  art->symbol = symbol_for(kernel.name);

  // Emission, optimization and code generation run unlocked: this compile owns its context,
  // module and target machine, and reads only what create() set.
  auto tm = impl_->make_target_machine();
  if (!tm) return std::unexpected(tm.error());
  auto ctx = std::make_unique<llvm::LLVMContext>();
  // LLVM's own diagnostics: remarks and warnings (a loop the emitter asked to vectorize that the
  // vectorizer left scalar) are the optimizer's business and were printed to the user's stderr by
  // every compile; errors fail the compile with their text.
  std::string llvm_errors;
  ctx->setDiagnosticHandlerCallBack(
      [](const llvm::DiagnosticInfo* info, void* errors) {
        if (info->getSeverity() != llvm::DS_Error) return;
        std::string text;
        llvm::raw_string_ostream os(text);
        llvm::DiagnosticPrinterRawOStream printer(os);
        info->print(printer);
        os.flush();
        *static_cast<std::string*>(errors) += text + "\n";
      },
      &llvm_errors);
  auto module = std::make_unique<llvm::Module>(art->symbol, *ctx);
  module->setDataLayout(impl_->data_layout);
  module->setTargetTriple(impl_->triple.str());
  cpu::EmitOptions options{art->symbol, impl_->cpu, cpu_features(), params, mode, facts,
                           impl_->llc_bytes};
  art->outer_extent = cpu::parallel_extent(kernel, options);
  art->unit_rows = kernel.has_sizes() ? cpu::unit_rows(kernel, options) : 0;
  art->dynamic_outer = kernel.dynamic_outer;
  art->size_slots = static_cast<int32_t>(kernel.sizes.size());
  art->size_limits = cpu::size_limits(kernel, *facts);
  art->chunks_per_thread = cpu::chunks_per_thread(kernel, *facts, mode);
  art->chunk_align = cpu::chunk_alignment(kernel, options);
  if (Expected<llvm::Function*> fn = cpu::emit_kernel(kernel, options, *module); !fn)
    return std::unexpected(fn.error());
  std::string problems;
  llvm::raw_string_ostream problem_stream(problems);
  if (llvm::verifyModule(*module, &problem_stream))
    return make_error(fmt::format("cpu backend: invalid LLVM IR for kernel '{}': {}\n{}",
                                  kernel.name, problems, kir::print_kernel(kernel)));
  // A large kernel keeps its IR as emitted: optimized, each of its hundreds of constants is a
  // vector splat in up to three copies of the loop body, megabytes of text whose printing cost
  // more than its optimization.
  const std::vector<const kir::Expr*> exprs = kir::kernel_exprs(kernel);
  const size_t ops = exprs.size();
  const bool large = ops > cpu::kLargeKernelOps;
  llvm::raw_string_ostream ir_stream(art->llvm_ir);
  if (large) {
    ir_stream << fmt::format(
        "; kiln: a kernel of {} operations (more than {}): its LLVM IR before optimization\n", ops,
        cpu::kLargeKernelOps);
    module->print(ir_stream, nullptr);
  }
  cpu::optimize_module(*module, **tm);
  if (mode == CheckMode::none && impl_->triple.isX86())
    if (llvm::Function* fn = module->getFunction(art->symbol))
      cpu::stream_stores(*fn, cpu::streaming_buffers(kernel, impl_->llc_bytes, params.stores));
  if (!large) module->print(ir_stream, nullptr);
  ir_stream.flush();

  cpu::CodegenOptions codegen;
  codegen.hoist_invariants = cpu::distinct_constants(exprs) <= cpu::kMaxHoistedConstants;
  auto object = cpu::emit_object(*module, **tm, codegen);
  if (!object) return std::unexpected(object.error());
  if (!llvm_errors.empty())
    return make_error(fmt::format("cpu backend: LLVM failed to compile kernel '{}': {}",
                                  kernel.name, llvm_errors));
  art->object = std::move(*object);
  {
    std::lock_guard lock(impl_->mu);
    if (auto linked = impl_->link(art->object, *art, impl_); !linked)
      return std::unexpected(linked.error());
  }
  art->compile_ms = ms_since(start);
  return art;
}

Expected<std::shared_ptr<const CpuArtifact>> CpuBackend::load(const std::vector<uint8_t>& object,
                                                              const std::string& symbol,
                                                              int64_t outer_extent) {
  const auto start = std::chrono::steady_clock::now();
  if (auto valid = cpu::check_object(object, symbol, impl_->triple); !valid)
    return std::unexpected(valid.error());
  auto art = std::make_shared<CpuArtifact>();
  art->symbol = symbol;
  art->outer_extent = outer_extent;
  art->object = object;
  {
    std::lock_guard lock(impl_->mu);
    if (auto linked = impl_->link(art->object, *art, impl_); !linked)
      return std::unexpected(linked.error());
  }
  art->compile_ms = ms_since(start);
  return art;
}

int CpuBackend::chunks_per_thread(const kir::Kernel& kernel, const kir::KernelFacts& facts,
                                  CheckMode check) {
  return cpu::chunks_per_thread(kernel, facts, check);
}

bool CpuBackend::serves_any_sizes(const kir::Kernel& kernel, const kir::KernelFacts& facts,
                                  CheckMode check, int64_t llc_bytes) {
  return cpu::serves_any_sizes(kernel, facts, check, llc_bytes);
}

int64_t CpuBackend::instance_range(const CpuArtifact& code, const kir::Kernel& instance) {
  if (instance.domain_slot(0) >= 0) return instance.outer_extent();
  const size_t rank = instance.domain.size();
  if (code.unit_rows <= 0 || rank < 2) return code.outer_extent;
  // Attention's units: (batch point, block of query rows); none where a row is empty.
  if (instance.domain.back() == 0) return 0;
  int64_t points = 1;
  for (size_t a = 0; a + 2 < rank; ++a) points *= instance.domain[a];
  return points * ((instance.domain[rank - 2] + code.unit_rows - 1) / code.unit_rows);
}

bool CpuBackend::serves_sizes_instance(const kir::KernelFacts& general, const kir::Kernel& special,
                                       const kir::KernelFacts& special_facts, int64_t llc_bytes) {
  return cpu::serves_sizes_instance(general, special, special_facts, llc_bytes);
}

bool CpuBackend::serves_any_outer_extent(const kir::Kernel& kernel, const kir::KernelFacts& facts,
                                         CheckMode check, int64_t llc_bytes) {
  return cpu::serves_any_outer_extent(kernel, facts, check, llc_bytes);
}

bool CpuBackend::serves_instance(const kir::Kernel& kernel, const std::vector<bool>& written_only,
                                 int64_t llc_bytes) {
  return !cpu::streams_at_its_size(kernel, written_only, llc_bytes);
}

std::string CpuBackend::llvm_version() const {
  return LLVM_VERSION_STRING;
}

}  // namespace kiln::codegen
