// Kernel IR ALU ops -> LLVM IR on register values, with the semantics of ir/builder.h per dtype.
#pragma once

#include <span>

#include "ir/error.h"
#include "ir/kernel_ir.h"

namespace llvm {
class IRBuilderBase;
class Value;
}  // namespace llvm

namespace kiln::codegen::cpu {

// Emits `e` (kind Alu) applied to `args` (register values of e.args, same order). An op the
// dtype does not allow (exp on i32, and on f32, ...) is an error naming the op and dtypes.
Expected<llvm::Value*> emit_alu(llvm::IRBuilderBase& b, const kir::Expr& e,
                                std::span<llvm::Value* const> args);

// Float max/min that propagate NaN like numpy.maximum/minimum (llvm.maximum/minimum, which the
// loop vectorizer also accepts as reduction operations).
llvm::Value* emit_float_max(llvm::IRBuilderBase& b, llvm::Value* x, llvm::Value* y);
llvm::Value* emit_float_min(llvm::IRBuilderBase& b, llvm::Value* x, llvm::Value* y);

}  // namespace kiln::codegen::cpu
