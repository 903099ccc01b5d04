// How kiln dtypes live in LLVM: register types (f16/bf16 computed as float, bool as i1), memory
// types, constants, load/store conversions and casts between dtypes.
#pragma once

#include "kiln/dtype.h"

namespace llvm {
class Constant;
class IRBuilderBase;
class LLVMContext;
class Type;
class Value;
}  // namespace llvm

namespace kiln::codegen::cpu {

// The type a value of `t` has in registers: f16/bf16 -> float, bool -> i1.
llvm::Type* register_type(llvm::LLVMContext& ctx, ir::DType t);
// The element type of a buffer of `t`: f16 -> half, bf16 -> i16 (converted by hand, so that no
// compiler-rt helper is needed), bool -> i8 holding 0/1.
llvm::Type* memory_type(llvm::LLVMContext& ctx, ir::DType t);

// A constant of dtype `t` in register form. Floats are rounded to `t` first (an f16 constant
// holds an f16 value); integers wrap to the width of `t`.
llvm::Constant* register_constant(llvm::LLVMContext& ctx, ir::DType t, double fval, int64_t ival);

// Memory value -> register value and back.
llvm::Value* from_memory(llvm::IRBuilderBase& b, llvm::Value* v, ir::DType t);
llvm::Value* to_memory(llvm::IRBuilderBase& b, llvm::Value* v, ir::DType t);

// Rounds a register float to the precision of f16 or bf16 (a no-op for the other dtypes).
llvm::Value* round_to_storage_precision(llvm::IRBuilderBase& b, llvm::Value* v, ir::DType t);

// Converts a register value of dtype `from` to dtype `to`: float -> int truncates toward zero
// and saturates (i8/u8 wrap like C on x86: saturate to i32, then truncate), -> bool is x != 0.
llvm::Value* emit_cast(llvm::IRBuilderBase& b, llvm::Value* v, ir::DType from, ir::DType to);

}  // namespace kiln::codegen::cpu
