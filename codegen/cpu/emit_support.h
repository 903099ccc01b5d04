// Loop and scratch helpers shared by the emitters that build their own loop nests (the matmul and
// attention emitters), on top of ExprEmitter.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <llvm/IR/IRBuilder.h>

#include "codegen/cpu/expr_emitter.h"
#include "kiln/error.h"

namespace kiln::codegen::cpu {

using LoopBody = std::function<Expected<void>(llvm::Value*)>;

// for (iv = start; iv < end; iv += step) body(iv), at b's insertion point in `fn`; leaves the
// builder after the loop. The expression emitter's memo is dropped on entering the body and after
// the loop (values emitted in the body do not dominate what follows). `hints`: llvm.loop metadata.
Expected<void> emit_loop(llvm::IRBuilder<>& b, llvm::Function* fn, ExprEmitter& ex,
                         llvm::Value* start, llvm::Value* end, int64_t step,
                         const std::string& name, const LoopBody& body,
                         llvm::MDNode* hints = nullptr);

// Every store of `kernel`, in order, at the point the emitter's variables are bound to (with the
// kernel's reduction bound to its value): what an emitter with its own loop nest runs per point.
Expected<void> emit_stores(llvm::IRBuilder<>& b, const kir::Kernel& kernel, ExprEmitter& ex,
                           const std::vector<llvm::Value*>& buffers);

// malloc(bytes); a null result traps (the kernel signature has no way to report it).
llvm::Value* emit_malloc_or_trap(llvm::IRBuilder<>& b, llvm::Function* fn, int64_t bytes,
                                 const char* name);
// The same of a size known at run time (an i64).
llvm::Value* emit_malloc_or_trap(llvm::IRBuilder<>& b, llvm::Function* fn, llvm::Value* bytes,
                                 const char* name);
// free(p).
void emit_free(llvm::IRBuilder<>& b, llvm::Value* p);

}  // namespace kiln::codegen::cpu
