// Relocatable object code of one kernel module: emitting it (what the persistent cache stores)
// and checking untrusted bytes (from the cache, possibly of another process) before linking.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ir/kernel_ir.h"
#include "kiln/error.h"

namespace llvm {
class Module;
class TargetMachine;
class Triple;
}  // namespace llvm

namespace kiln::codegen::cpu {

// How code generation treats a kernel.
struct CodegenOptions {
  // Early machine LICM: hoists loop-invariant machine instructions (constants among them) out of
  // loops before register allocation. Worth it for a few constants; with hundreds of distinct
  // constants every hoisted value is spilled again, and register allocation over those long
  // live ranges dominated the compile of large fused kernels.
  bool hoist_invariants = true;
};

// Kernels with more operations than this (kir expressions) are large: their source text is the
// IR before optimization (CpuArtifact::llvm_ir).
inline constexpr size_t kLargeKernelOps = 256;

// Kernels with more distinct constants than this compile without early machine LICM
// (CodegenOptions::hoist_invariants): there are not that many vector registers to keep them in.
inline constexpr size_t kMaxHoistedConstants = 32;
// The distinct constants (dtype and value) among `exprs`.
size_t distinct_constants(const std::vector<const kir::Expr*>& exprs);

// Runs code generation of `tm` over the (optimized) `module`; the module is changed by codegen's
// IR passes, so print it first.
Expected<std::vector<uint8_t>> emit_object(llvm::Module& module, llvm::TargetMachine& tm,
                                           const CodegenOptions& options = {});

// Parses `object` fully enough that linking cannot read past it: a well-formed object file for
// `triple`'s architecture whose sections and symbols lie inside the bytes, and which defines the
// function `symbol`. Truncated, foreign or garbage bytes give an error naming what is wrong.
Expected<bool> check_object(const std::vector<uint8_t>& object, const std::string& symbol,
                            const llvm::Triple& triple);

}  // namespace kiln::codegen::cpu
