// Loops and scratch for the emitters with their own loop nests.
#include "codegen/cpu/emit_support.h"

#include "codegen/cpu/dtype_lowering.h"

#include <llvm/IR/Intrinsics.h>
#include <llvm/IR/Module.h>

namespace kiln::codegen::cpu {

Expected<void> emit_loop(llvm::IRBuilder<>& b, llvm::Function* fn, ExprEmitter& ex,
                         llvm::Value* start, llvm::Value* end, int64_t step,
                         const std::string& name, const LoopBody& body, llvm::MDNode* hints) {
  llvm::LLVMContext& ctx = fn->getContext();
  llvm::BasicBlock* pre = b.GetInsertBlock();
  llvm::BasicBlock* header = llvm::BasicBlock::Create(ctx, name + ".header", fn);
  llvm::BasicBlock* inside = llvm::BasicBlock::Create(ctx, name + ".body", fn);
  llvm::BasicBlock* exit = llvm::BasicBlock::Create(ctx, name + ".exit", fn);
  b.CreateBr(header);
  b.SetInsertPoint(header);
  llvm::PHINode* iv = b.CreatePHI(b.getInt64Ty(), 2, name);
  iv->addIncoming(start, pre);
  b.CreateCondBr(b.CreateICmpSLT(iv, end), inside, exit);
  b.SetInsertPoint(inside);
  ex.forget();
  if (Expected<void> ok = body(iv); !ok) return ok;
  llvm::Value* next =
      b.CreateAdd(iv, b.getInt64(step), name + ".next", /*HasNUW=*/false, /*HasNSW=*/true);
  iv->addIncoming(next, b.GetInsertBlock());
  llvm::BranchInst* latch = b.CreateBr(header);
  if (hints) latch->setMetadata(llvm::LLVMContext::MD_loop, hints);
  b.SetInsertPoint(exit);
  ex.forget();
  return {};
}

Expected<void> emit_stores(llvm::IRBuilder<>& b, const kir::Kernel& kernel, ExprEmitter& ex,
                           const std::vector<llvm::Value*>& buffers) {
  for (const kir::Store& st : kernel.stores) {
    Expected<llvm::Value*> index = ex.emit(st.index);
    if (!index) return std::unexpected(index.error());
    Expected<llvm::Value*> value = ex.emit(st.value);
    if (!value) return std::unexpected(value.error());
    const ir::DType t = kernel.params[static_cast<size_t>(st.buf)].dtype;
    llvm::Type* mt = memory_type(b.getContext(), t);
    b.CreateStore(to_memory(b, *value, t),
                  b.CreateInBoundsGEP(mt, buffers[static_cast<size_t>(st.buf)], *index));
  }
  return {};
}

llvm::Value* emit_malloc_or_trap(llvm::IRBuilder<>& b, llvm::Function* fn, int64_t bytes,
                                 const char* name) {
  return emit_malloc_or_trap(b, fn, b.getInt64(bytes), name);
}

llvm::Value* emit_malloc_or_trap(llvm::IRBuilder<>& b, llvm::Function* fn, llvm::Value* bytes,
                                 const char* name) {
  llvm::LLVMContext& ctx = fn->getContext();
  llvm::FunctionCallee malloc_fn =
      fn->getParent()->getOrInsertFunction("malloc", b.getPtrTy(), b.getInt64Ty());
  llvm::Value* p = b.CreateCall(malloc_fn, {bytes}, name);
  llvm::BasicBlock* fail = llvm::BasicBlock::Create(ctx, "scratch.fail", fn);
  llvm::BasicBlock* ok = llvm::BasicBlock::Create(ctx, "scratch.ok", fn);
  b.CreateCondBr(b.CreateIsNull(p), fail, ok);
  b.SetInsertPoint(fail);
  b.CreateIntrinsic(llvm::Intrinsic::trap, {}, {});
  b.CreateUnreachable();
  b.SetInsertPoint(ok);
  return p;
}

void emit_free(llvm::IRBuilder<>& b, llvm::Value* p) {
  llvm::Module* m = b.GetInsertBlock()->getModule();
  llvm::FunctionCallee free_fn = m->getOrInsertFunction("free", b.getVoidTy(), b.getPtrTy());
  b.CreateCall(free_fn, {p});
}

}  // namespace kiln::codegen::cpu
