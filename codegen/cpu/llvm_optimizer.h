// The new pass manager's O3 pipeline for one module on the host target machine.
#pragma once

namespace llvm {
class Module;
class TargetMachine;
}  // namespace llvm

namespace kiln::codegen::cpu {

// Runs O3 (loop and SLP vectorization on) over `module`, with the cost model of `tm`.
void optimize_module(llvm::Module& module, llvm::TargetMachine& tm);

}  // namespace kiln::codegen::cpu
