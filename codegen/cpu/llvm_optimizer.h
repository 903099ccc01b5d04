// The new pass manager's O3 pipeline for one module on the host target machine.
#pragma once

namespace llvm {
class Function;
class Module;
class TargetMachine;
}  // namespace llvm

namespace kiln::codegen::cpu {

// Runs O3 (loop and SLP vectorization on) over `module`, with the cost model of `tm`, then
// scale_exp_with_vscalef over each function.
void optimize_module(llvm::Module& module, llvm::TargetMachine& tm);

// emit_exp_f32 scales its polynomial p by 2^n in two exact steps, p * 2^h * 2^(n - h) with
// h = n >> 1, so that results near overflow and in the subnormal range round once. AVX-512's
// vscalefps computes p * 2^n with that one rounding in one instruction (instead of nine: the
// conversion, the halves, the two exponents' bits and two multiplies), so the results are the same
// bits. LLVM 19 neither vectorizes llvm.ldexp nor lowers it to vscalefps, so this rewrites the
// (vectorized) two-step form of `fn` where its target features allow: vectors of 16 floats with
// AVX-512F, of 8 and 4 with AVX-512VL. Returns whether it rewrote any.
bool scale_exp_with_vscalef(llvm::Function& fn);

}  // namespace kiln::codegen::cpu
