// Branch-free f32 math (exp, log, tanh, sigmoid, gelu, erf, sin, cos) emitted as plain LLVM IR,
// so that loops calling them still vectorize (a scalar libm call would stop the vectorizer).
#pragma once

namespace llvm {
class Value;
class IRBuilderBase;
}  // namespace llvm

namespace kiln::codegen::cpu {

// Each takes and returns a `float` value (scalar IR; the loop vectorizer widens it). Measured
// max relative error over normal ranges is <= 2.1e-7 (gelu: 7.6e-7 on [-3, 10]; below -3 it is
// ill-conditioned in f32); inf and nan behave like libm. Sweeps: tests/codegen/cpu_vector_math_test.
llvm::Value* emit_exp_f32(llvm::IRBuilderBase& b, llvm::Value* x);
// exp for x <= 0 (softmax's x - max) with a shorter dependency chain than emit_exp_f32: within
// 1.2e-7 relative of exp down to -86.5, 0 below (where exp is under 2^-124), NaN for NaN.
// Positive x is out of its domain.
llvm::Value* emit_exp_nonpositive_f32(llvm::IRBuilderBase& b, llvm::Value* x);
llvm::Value* emit_log_f32(llvm::IRBuilderBase& b, llvm::Value* x);
llvm::Value* emit_tanh_f32(llvm::IRBuilderBase& b, llvm::Value* x);
llvm::Value* emit_sigmoid_f32(llvm::IRBuilderBase& b, llvm::Value* x);
// The tanh form 0.5*x*(1 + tanh(u)), u = sqrt(2/pi)*(x + 0.044715*x^3), evaluated as
// x * sigmoid(2u), which is the same function without the cancellation for negative x.
llvm::Value* emit_gelu_f32(llvm::IRBuilderBase& b, llvm::Value* x);
llvm::Value* emit_erf_f32(llvm::IRBuilderBase& b, llvm::Value* x);
// sin and cos reduce |x| >= 8192 exactly (Payne-Hanek), so they hold that error at every finite x.
llvm::Value* emit_sin_f32(llvm::IRBuilderBase& b, llvm::Value* x);
llvm::Value* emit_cos_f32(llvm::IRBuilderBase& b, llvm::Value* x);

}  // namespace kiln::codegen::cpu
