// Non-temporal stores into large outputs, after optimization (see streaming_stores.h).
#include "codegen/cpu/streaming_stores.h"

#include <algorithm>
#include <bit>

#include <llvm/ADT/APInt.h>
#include <llvm/Analysis/ValueTracking.h>
#include <llvm/IR/Constants.h>
#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/Instructions.h>
#include <llvm/IR/IntrinsicsX86.h>
#include <llvm/IR/MDBuilder.h>
#include <llvm/IR/Module.h>
#include <llvm/Transforms/Utils/BasicBlockUtils.h>
#include <llvm/Transforms/Utils/Local.h>

#include "ir/graph.h"

namespace kiln::codegen::cpu {

namespace {

// Non-temporal vector stores need their address aligned to the store's size, at most a cache
// line: a wider store is split into aligned halves.
constexpr uint64_t kLine = 64;

// The parameter whose pointer `fn` loaded into `base` (the entry point's first argument is the
// array of buffer pointers), or -1.
int64_t buffer_of(const llvm::Function& fn, const llvm::Value* base) {
  const auto* load = llvm::dyn_cast<llvm::LoadInst>(base);
  if (!load) return -1;
  const llvm::DataLayout& dl = fn.getParent()->getDataLayout();
  llvm::APInt offset(dl.getIndexTypeSizeInBits(load->getPointerOperand()->getType()), 0);
  const llvm::Value* slots = load->getPointerOperand()->stripAndAccumulateInBoundsConstantOffsets(dl, offset);
  if (slots != fn.getArg(0)) return -1;
  const uint64_t slot = dl.getPointerSize();
  if (offset.isNegative() || offset.getZExtValue() % slot != 0) return -1;
  return static_cast<int64_t>(offset.getZExtValue() / slot);
}

}  // namespace

namespace {
int64_t bytes_of(const kir::Param& p) {
  return ir::shape_numel(p.shape) * ir::dtype_size(p.dtype);
}

// The kernel's buffers together.
int64_t footprint_of(const kir::Kernel& kernel) {
  int64_t footprint = 0;
  for (const kir::Param& p : kernel.params) footprint += bytes_of(p);
  return footprint;
}

// The outputs of `written_only` of at least `min_bytes`.
std::vector<bool> outputs_of_at_least(const kir::Kernel& kernel,
                                      const std::vector<bool>& written_only, int64_t min_bytes) {
  std::vector<bool> out(kernel.params.size(), false);
  for (size_t i = 0; i < kernel.params.size() && i < written_only.size(); ++i)
    out[i] = written_only[i] && bytes_of(kernel.params[i]) >= min_bytes;
  return out;
}

// The outputs of `written_only` large enough to stream at the parameters' sizes: of at least
// kStreamingStoreBytes, or of kStreamingMinBytes in a footprint of kStreamingFootprintCaches
// last-level caches (`llc_bytes` > 0).
std::vector<bool> large_outputs(const kir::Kernel& kernel, const std::vector<bool>& written_only,
                                int64_t llc_bytes) {
  const bool evicts_its_output =
      llc_bytes > 0 && footprint_of(kernel) >= kStreamingFootprintCaches * llc_bytes;
  return outputs_of_at_least(kernel, written_only,
                             evicts_its_output ? kStreamingMinBytes : kStreamingStoreBytes);
}
}  // namespace

std::vector<bool> streaming_buffers(const kir::Kernel& kernel, int64_t llc_bytes,
                                    CpuStores stores) {
  // A dynamic kernel's sizes are those of one instance: it streams nothing (a kernel whose
  // outputs stream at its size is not made dynamic: serves_any_outer_extent).
  if (kernel.dynamic_outer || stores == CpuStores::cached)
    return std::vector<bool>(kernel.params.size(), false);
  if (stores == CpuStores::streaming) {
    if (kernel.has_sizes()) return std::vector<bool>(kernel.params.size(), false);
    return outputs_of_at_least(kernel, kir::written_only(kernel), kStreamingMinBytes);
  }
  if (llc_bytes > 0 && footprint_of(kernel) < llc_bytes / kStreamingCacheFraction)
    return std::vector<bool>(kernel.params.size(), false);
  return large_outputs(kernel, kir::written_only(kernel), llc_bytes);
}

std::optional<CpuStores> other_store_kind(const kir::Kernel& kernel, int64_t llc_bytes) {
  if (kernel.dynamic_outer || kernel.has_sizes()) return std::nullopt;
  const auto any = [](const std::vector<bool>& flags) {
    return std::ranges::any_of(flags, [](bool b) { return b; });
  };
  if (any(streaming_buffers(kernel, llc_bytes))) return CpuStores::cached;
  // Streaming where the rule does not can pay only where the kernel's buffers outgrow the cache.
  if (llc_bytes > 0 && footprint_of(kernel) >= llc_bytes &&
      any(streaming_buffers(kernel, llc_bytes, CpuStores::streaming)))
    return CpuStores::streaming;
  return std::nullopt;
}

bool streams_at_its_size(const kir::Kernel& kernel, const std::vector<bool>& written_only,
                         int64_t llc_bytes) {
  return std::ranges::any_of(large_outputs(kernel, written_only, llc_bytes),
                             [](bool b) { return b; });
}

int stream_stores(llvm::Function& fn, const std::vector<bool>& streaming) {
  llvm::LLVMContext& ctx = fn.getContext();
  const llvm::DataLayout& dl = fn.getParent()->getDataLayout();
  std::vector<llvm::StoreInst*> candidates;
  for (llvm::BasicBlock& bb : fn)
    for (llvm::Instruction& inst : bb) {
      auto* st = llvm::dyn_cast<llvm::StoreInst>(&inst);
      if (!st || st->isVolatile() || !st->getValueOperand()->getType()->isVectorTy()) continue;
      const uint64_t bytes = dl.getTypeStoreSize(st->getValueOperand()->getType()).getFixedValue();
      if (bytes < 16 || !std::has_single_bit(bytes)) continue;
      const int64_t buf = buffer_of(fn, llvm::getUnderlyingObject(st->getPointerOperand(), 0));
      if (buf < 0 || static_cast<size_t>(buf) >= streaming.size() || !streaming[buf]) continue;
      candidates.push_back(st);
    }
  if (candidates.empty()) return 0;
  llvm::MDNode* nontemporal = llvm::MDNode::get(
      ctx, llvm::ConstantAsMetadata::get(llvm::ConstantInt::get(llvm::Type::getInt32Ty(ctx), 1)));
  for (llvm::StoreInst* st : candidates) {
    const uint64_t bytes = dl.getTypeStoreSize(st->getValueOperand()->getType()).getFixedValue();
    const llvm::Align need(std::min(bytes, kLine));
    llvm::Value* ptr = st->getPointerOperand();
    if (std::max(st->getAlign(), llvm::getKnownAlignment(ptr, dl, st)) >= need) {
      st->setAlignment(need);
      st->setMetadata(llvm::LLVMContext::MD_nontemporal, nontemporal);
      continue;
    }
    // if (address % need == 0) non-temporal store, else the store as it was.
    llvm::IRBuilder<> b(st);
    llvm::Value* misaligned =
        b.CreateAnd(b.CreatePtrToInt(ptr, b.getInt64Ty()), b.getInt64(need.value() - 1));
    llvm::Instruction* then_term = nullptr;
    llvm::Instruction* else_term = nullptr;
    llvm::SplitBlockAndInsertIfThenElse(b.CreateICmpEQ(misaligned, b.getInt64(0)), st, &then_term,
                                        &else_term,
                                        llvm::MDBuilder(ctx).createLikelyBranchWeights());
    auto* nt = llvm::cast<llvm::StoreInst>(st->clone());
    nt->insertBefore(then_term);
    nt->setAlignment(need);
    nt->setMetadata(llvm::LLVMContext::MD_nontemporal, nontemporal);
    st->moveBefore(else_term);
  }
  // Non-temporal stores are weakly ordered: drain them before the kernel reports that it is done.
  std::vector<llvm::ReturnInst*> returns;
  for (llvm::BasicBlock& bb : fn)
    if (auto* ret = llvm::dyn_cast<llvm::ReturnInst>(bb.getTerminator())) returns.push_back(ret);
  for (llvm::ReturnInst* ret : returns)
    llvm::IRBuilder<>(ret).CreateIntrinsic(llvm::Intrinsic::x86_sse_sfence, {}, {});
  return static_cast<int>(candidates.size());
}

}  // namespace kiln::codegen::cpu
