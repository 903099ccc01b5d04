// Index clamps, range tests and the error-slot report routine of checked kernels.
#include "codegen/cpu/bounds_checks.h"

#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/Intrinsics.h>
#include <llvm/IR/Module.h>

#include "codegen/check_mode.h"

namespace kiln::codegen::cpu {

namespace {
constexpr const char* kReportName = "kiln.check.report";
}  // namespace

llvm::Value* clamp_index(llvm::IRBuilderBase& b, llvm::Value* index, int64_t length) {
  llvm::Value* lo = b.CreateBinaryIntrinsic(llvm::Intrinsic::smax, index, b.getInt64(0));
  return b.CreateBinaryIntrinsic(llvm::Intrinsic::smin, lo, b.getInt64(length - 1));
}

llvm::Value* index_out_of_range(llvm::IRBuilderBase& b, llvm::Value* index, int64_t length) {
  return b.CreateICmpUGE(index, b.getInt64(length), "oob");
}

llvm::Function* check_report_function(llvm::Module& module) {
  if (llvm::Function* f = module.getFunction(kReportName)) return f;
  llvm::LLVMContext& ctx = module.getContext();
  llvm::Type* i64 = llvm::Type::getInt64Ty(ctx);
  auto* fty = llvm::FunctionType::get(llvm::Type::getVoidTy(ctx),
                                      {llvm::PointerType::get(ctx, 0), i64, i64, i64}, false);
  auto* fn = llvm::Function::Create(fty, llvm::Function::PrivateLinkage, kReportName, module);
  fn->addFnAttr(llvm::Attribute::NoUnwind);
  fn->addFnAttr(llvm::Attribute::NoInline);
  fn->addFnAttr(llvm::Attribute::Cold);
  llvm::BasicBlock* entry = llvm::BasicBlock::Create(ctx, "entry", fn);
  llvm::BasicBlock* claim = llvm::BasicBlock::Create(ctx, "claim", fn);
  llvm::BasicBlock* done = llvm::BasicBlock::Create(ctx, "done", fn);
  llvm::IRBuilder<> b(entry);
  llvm::Value* slot = fn->getArg(0);
  // Chunks of one launch run concurrently: exactly one bad access may fill the slot.
  llvm::Value* won = b.CreateExtractValue(
      b.CreateAtomicCmpXchg(slot, b.getInt64(0), b.getInt64(1), llvm::MaybeAlign(8),
                            llvm::AtomicOrdering::Monotonic, llvm::AtomicOrdering::Monotonic),
      1);
  b.CreateCondBr(won, claim, done);
  b.SetInsertPoint(claim);
  const int words[] = {kCheckKind, kCheckBuf, kCheckIndex};
  for (int w = 0; w < 3; ++w)
    b.CreateStore(fn->getArg(w + 1), b.CreateConstInBoundsGEP1_64(i64, slot, words[w]));
  b.CreateBr(done);
  b.SetInsertPoint(done);
  b.CreateRetVoid();
  return fn;
}

}  // namespace kiln::codegen::cpu
