// Kernel IR ALU ops -> LLVM IR on register values, with the semantics of ir/builder.h per dtype.
#pragma once

#include <span>

#include "ir/kernel_ir.h"
#include "kiln/error.h"

namespace llvm {
class IRBuilderBase;
class Value;
}  // namespace llvm

namespace kiln::codegen::cpu {

// Emits `e` (kind Alu) applied to `args` (register values of e.args, same order). An op the
// dtype does not allow (exp on i32, and on f32, ...) is an error naming the op and dtypes.
Expected<llvm::Value*> emit_alu(llvm::IRBuilderBase& b, const kir::Expr& e,
                                std::span<llvm::Value* const> args);

// Float max/min of register values of dtype `t` with kiln's rule (ir::ieee_maximum /
// ieee_minimum: NaN propagates, -0 < +0). f32 and f64 use llvm.maximum/minimum, which the loop
// vectorizer also accepts as reduction operations. f16 (held in f32 registers) spells the rule
// out with compares and selects: InstCombine narrows llvm.maximum of two fpext'ed halves to
// llvm.maximum.vNf16, and LLVM 19's x86 lowering of that without AVX512-FP16 (Zen 3/4/5) drops
// NaNs in vector lanes, so a vector call and a scalar tail disagreed.
llvm::Value* emit_float_max(llvm::IRBuilderBase& b, llvm::Value* x, llvm::Value* y, ir::DType t);
llvm::Value* emit_float_min(llvm::IRBuilderBase& b, llvm::Value* x, llvm::Value* y, ir::DType t);

}  // namespace kiln::codegen::cpu
