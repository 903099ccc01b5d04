// The LLVM side of check modes (codegen/check_mode.h): index clamping for `enforce`, range tests
// for `validate`, and the out-of-line routine that records a bad access in the error slot.
#pragma once

#include <cstdint>

namespace llvm {
class Function;
class IRBuilderBase;
class Module;
class Value;
}  // namespace llvm

namespace kiln::codegen::cpu {

// `index` clamped into [0, length - 1] (length > 0).
llvm::Value* clamp_index(llvm::IRBuilderBase& b, llvm::Value* index, int64_t length);

// i1: `index` lies outside [0, length) (one unsigned compare covers negative indices).
llvm::Value* index_out_of_range(llvm::IRBuilderBase& b, llvm::Value* index, int64_t length);

// `void (ptr slot, i64 kind, i64 buf, i64 index)`, private to `module` (created on first use):
// claims the slot atomically and fills it, or does nothing when another access claimed it first.
// Marked cold so that the checked fast path stays straight-line.
llvm::Function* check_report_function(llvm::Module& module);

}  // namespace kiln::codegen::cpu
