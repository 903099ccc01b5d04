// Emitting a kernel module's relocatable object, and validating cached object bytes before the
// JIT links them (the linker trusts its input; a bad cache entry must be an error, not a crash).
#include "codegen/cpu/object_code.h"

#include <fmt/format.h>

#include <bit>
#include <set>
#include <tuple>

#include <llvm/CodeGen/MachineFunction.h>
#include <llvm/CodeGen/MachineModuleInfo.h>
#include <llvm/CodeGen/Passes.h>
#include <llvm/CodeGen/TargetPassConfig.h>
#include <llvm/IR/LegacyPassManager.h>
#include <llvm/IR/Module.h>
#include <llvm/Object/ObjectFile.h>
#include <llvm/Support/MemoryBuffer.h>
#include <llvm/Support/raw_ostream.h>
#include <llvm/Target/TargetMachine.h>
#include <llvm/TargetParser/Triple.h>

namespace kiln::codegen::cpu {

namespace {

std::unexpected<Error> object_error(const std::string& symbol, const std::string& what,
                                    llvm::Error err) {
  return make_error(fmt::format("cpu backend: object code of kernel '{}' is unusable: {}: {}",
                                symbol, what, llvm::toString(std::move(err))));
}

// Every section's name and contents must lie inside the buffer (the ELF reader checks bounds
// and reports them as errors when asked for them).
Expected<bool> check_sections(const llvm::object::ObjectFile& obj, const std::string& symbol) {
  for (const llvm::object::SectionRef& section : obj.sections()) {
    if (auto name = section.getName(); !name)
      return object_error(symbol, "reading a section name", name.takeError());
    if (auto contents = section.getContents(); !contents)
      return object_error(symbol, "reading section contents", contents.takeError());
  }
  return true;
}

// Every symbol must be readable and point into a valid section; `symbol` must be defined there.
Expected<bool> check_symbols(const llvm::object::ObjectFile& obj, const std::string& symbol) {
  bool defined = false;
  for (const llvm::object::SymbolRef& sym : obj.symbols()) {
    auto name = sym.getName();
    if (!name) return object_error(symbol, "reading a symbol name", name.takeError());
    auto flags = sym.getFlags();
    if (!flags) return object_error(symbol, "reading symbol flags", flags.takeError());
    auto type = sym.getType();
    if (!type) return object_error(symbol, "reading a symbol type", type.takeError());
    auto section = sym.getSection();
    if (!section) return object_error(symbol, "reading a symbol's section", section.takeError());
    if (*name == symbol && *type == llvm::object::SymbolRef::ST_Function &&
        *section != obj.section_end() && (*flags & llvm::object::SymbolRef::SF_Global))
      defined = true;
  }
  if (!defined)
    return make_error(fmt::format(
        "cpu backend: object code does not define the kernel function '{}' (wrong cache entry?)",
        symbol));
  return true;
}

}  // namespace

// LLVMTargetMachine::addPassesToEmitFile, with the standard pipeline's passes switched as
// `options` asks (TargetPassConfig takes changes only before its passes are added, and
// addPassesToEmitFile offers no way in).
Expected<std::vector<uint8_t>> emit_object(llvm::Module& module, llvm::TargetMachine& tm,
                                           const CodegenOptions& options) {
  auto fail = [&](const std::string& why) {
    return make_error(fmt::format("cpu backend: code generation of '{}' failed: {}",
                                  module.getName().str(), why));
  };
  // Every target kiln creates (x86-64, from the host's triple) has a code generator, which is
  // what LLVMTargetMachine is: no RTTI is needed to know it.
  auto* target = static_cast<llvm::LLVMTargetMachine*>(&tm);
  llvm::SmallVector<char, 0> bytes;
  {
    llvm::raw_svector_ostream out(bytes);
    llvm::legacy::PassManager passes;
    // Both are owned by `passes` once added.
    auto* machine_info = new llvm::MachineModuleInfoWrapperPass(target);
    llvm::TargetPassConfig* config = target->createPassConfig(passes);
    config->setDisableVerify(true);
    if (!options.hoist_invariants) config->disablePass(&llvm::EarlyMachineLICMID);
    passes.add(config);
    passes.add(machine_info);
    if (config->addISelPasses()) return fail("instruction selection could not be set up");
    config->addMachinePasses();
    config->setInitialized();
    if (target->addAsmPrinter(passes, out, nullptr, llvm::CodeGenFileType::ObjectFile,
                              machine_info->getMMI().getContext()))
      return fail("the target cannot emit object files");
    passes.add(llvm::createFreeMachineFunctionPass());
    passes.run(module);
  }
  return std::vector<uint8_t>(bytes.begin(), bytes.end());
}

size_t distinct_constants(const std::vector<const kir::Expr*>& exprs) {
  std::set<std::tuple<ir::DType, uint64_t, int64_t>> seen;
  for (const kir::Expr* e : exprs)
    if (e->kind == kir::ExprKind::Const)
      seen.emplace(e->dtype, std::bit_cast<uint64_t>(e->fval), e->ival);
  return seen.size();
}

Expected<bool> check_object(const std::vector<uint8_t>& object, const std::string& symbol,
                            const llvm::Triple& triple) {
  const llvm::StringRef bytes(reinterpret_cast<const char*>(object.data()), object.size());
  auto obj = llvm::object::ObjectFile::createObjectFile(llvm::MemoryBufferRef(bytes, symbol));
  if (!obj)
    return object_error(symbol, fmt::format("parsing {} bytes", object.size()), obj.takeError());
  const llvm::object::ObjectFile& file = **obj;
  if (file.getArch() != triple.getArch())
    return make_error(fmt::format(
        "cpu backend: object code of kernel '{}' is for {}, expected {} (foreign cache entry?)",
        symbol, llvm::Triple::getArchTypeName(file.getArch()).str(),
        llvm::Triple::getArchTypeName(triple.getArch()).str()));
  if (!file.isRelocatableObject())
    return make_error(fmt::format(
        "cpu backend: object code of kernel '{}' is not a relocatable object file", symbol));
  if (auto ok = check_sections(file, symbol); !ok) return ok;
  return check_symbols(file, symbol);
}

}  // namespace kiln::codegen::cpu
