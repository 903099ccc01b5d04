// Relocatable object code of one kernel module: emitting it (what the persistent cache stores)
// and checking untrusted bytes (from the cache, possibly of another process) before linking.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "support/error.h"

namespace llvm {
class Module;
class TargetMachine;
class Triple;
}  // namespace llvm

namespace kiln::codegen::cpu {

// Runs code generation of `tm` over the (optimized) `module`; the module is changed by codegen's
// IR passes, so print it first.
Expected<std::vector<uint8_t>> emit_object(llvm::Module& module, llvm::TargetMachine& tm);

// Parses `object` fully enough that linking cannot read past it: a well-formed object file for
// `triple`'s architecture whose sections and symbols lie inside the bytes, and which defines the
// function `symbol`. Truncated, foreign or garbage bytes give an error naming what is wrong.
Expected<bool> check_object(const std::vector<uint8_t>& object, const std::string& symbol,
                            const llvm::Triple& triple);

}  // namespace kiln::codegen::cpu
