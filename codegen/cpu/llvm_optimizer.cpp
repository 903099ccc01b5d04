// O3 over one module with the new pass manager and the host target machine's cost model, then the
// rewrites LLVM 19 does not make itself (exp's scaling by 2^n as AVX-512's vscalefps).
#include "codegen/cpu/llvm_optimizer.h"

#include <vector>

#include <llvm/ADT/DenseMap.h>
#include <llvm/ADT/SmallVector.h>
#include <llvm/Analysis/CGSCCPassManager.h>
#include <llvm/Analysis/LoopAnalysisManager.h>
#include <llvm/IR/Constants.h>
#include <llvm/IR/DerivedTypes.h>
#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/Instructions.h>
#include <llvm/IR/IntrinsicInst.h>
#include <llvm/IR/IntrinsicsX86.h>
#include <llvm/IR/Module.h>
#include <llvm/IR/PassManager.h>
#include <llvm/IR/PatternMatch.h>
#include <llvm/Passes/PassBuilder.h>
#include <llvm/Target/TargetMachine.h>
#include <llvm/Transforms/Utils/Local.h>

namespace kiln::codegen::cpu {

namespace {

namespace pm = llvm::PatternMatch;

// k of 2^k built from its bits, bitcast((k + 127) << 23) to float, as emit_exp_f32's pow2i writes
// it or as instcombine leaves it ((k << 23) + (127 << 23)); null for anything else.
llvm::Value* pow2_exponent(llvm::Value* v) {
  llvm::Value* k = nullptr;
  if (pm::match(v, pm::m_BitCast(pm::m_c_Add(pm::m_Shl(pm::m_Value(k), pm::m_SpecificInt(23)),
                                             pm::m_SpecificInt(127u << 23)))))
    return k;
  if (pm::match(v, pm::m_BitCast(pm::m_Shl(pm::m_c_Add(pm::m_Value(k), pm::m_SpecificInt(127)),
                                           pm::m_SpecificInt(23)))))
    return k;
  return nullptr;
}

// n when {a, b} are its halves h = n >> 1 and n - h (in either order); null otherwise.
llvm::Value* halves_of(llvm::Value* a, llvm::Value* b) {
  for (int swap = 0; swap < 2; ++swap, std::swap(a, b)) {
    llvm::Value* n = nullptr;
    if (pm::match(a, pm::m_AShr(pm::m_Value(n), pm::m_SpecificInt(1))) &&
        pm::match(b, pm::m_Sub(pm::m_Specific(n), pm::m_Specific(a))))
      return n;
  }
  return nullptr;
}

// Whether `v` is NaN whenever `x` is: v is x, or an IEEE operation (no nnan flag) with an operand
// that is, or a select whose condition compares such a value (so that a NaN decides it: false for
// an ordered predicate, true for an unordered one) and whose arm so chosen is such a value. Looks
// through at most `depth` steps. `known` holds each value's answer once found, so that a value
// shared by several paths is looked at once (a false found with less depth left is only
// conservative: the rewrite is skipped).
using NanFacts = llvm::SmallDenseMap<const llvm::Value*, bool, 32>;
bool nan_follows_uncached(const llvm::Value* v, const llvm::Value* x, int depth, NanFacts& known);
bool nan_follows(const llvm::Value* v, const llvm::Value* x, int depth, NanFacts& known) {
  if (v == x) return true;
  if (depth == 0) return false;
  if (const auto found = known.find(v); found != known.end()) return found->second;
  const bool follows = nan_follows_uncached(v, x, depth, known);
  known[v] = follows;
  return follows;
}
bool nan_follows(const llvm::Value* v, const llvm::Value* x) {
  NanFacts known;
  return nan_follows(v, x, 24, known);
}
bool nan_follows_uncached(const llvm::Value* v, const llvm::Value* x, int depth, NanFacts& known) {
  const auto follows = [&](const llvm::Value* u) { return nan_follows(u, x, depth - 1, known); };
  const auto* inst = llvm::dyn_cast<llvm::Instruction>(v);
  if (!inst) return false;
  if (llvm::isa<llvm::FPMathOperator>(inst) && inst->hasNoNaNs()) return false;
  switch (inst->getOpcode()) {
    case llvm::Instruction::FAdd:
    case llvm::Instruction::FSub:
    case llvm::Instruction::FMul:
    case llvm::Instruction::FDiv:
      return follows(inst->getOperand(0)) || follows(inst->getOperand(1));
    case llvm::Instruction::FNeg:
      return follows(inst->getOperand(0));
    case llvm::Instruction::Select: {
      const auto* cmp = llvm::dyn_cast<llvm::FCmpInst>(inst->getOperand(0));
      if (!cmp || !(follows(cmp->getOperand(0)) || follows(cmp->getOperand(1)))) return false;
      const bool nan_picks_true = llvm::FCmpInst::isUnordered(cmp->getPredicate());
      if (!nan_picks_true && !llvm::FCmpInst::isOrdered(cmp->getPredicate())) return false;
      return follows(inst->getOperand(nan_picks_true ? 1 : 2));
    }
    default:
      break;
  }
  if (const auto* call = llvm::dyn_cast<llvm::IntrinsicInst>(inst))
    switch (call->getIntrinsicID()) {
      case llvm::Intrinsic::fma:
      case llvm::Intrinsic::fmuladd:
        return follows(call->getArgOperand(0)) || follows(call->getArgOperand(1)) ||
               follows(call->getArgOperand(2));
      case llvm::Intrinsic::floor:
      case llvm::Intrinsic::ceil:
      case llvm::Intrinsic::trunc:
      case llvm::Intrinsic::rint:
      case llvm::Intrinsic::nearbyint:
      case llvm::Intrinsic::roundeven:
      case llvm::Intrinsic::fabs:
        return follows(call->getArgOperand(0));
      default:
        break;
    }
  return false;
}

// emit_exp_f32's last step, select(x is NaN, p, scaled), once scaled is vscalefps(p, n): a NaN p
// gives p (quieted, and p is an arithmetic result, so already quiet) from vscalefps itself, so
// where x's NaN provably reaches p, the select is scaled.
void drop_nan_select(llvm::CallInst* scaled, std::vector<llvm::Instruction*>& dead) {
  llvm::Value* p = scaled->getArgOperand(0);
  for (llvm::User* user : llvm::SmallVector<llvm::User*, 4>(scaled->users())) {
    auto* sel = llvm::dyn_cast<llvm::SelectInst>(user);
    if (!sel || sel->getTrueValue() != p || sel->getFalseValue() != scaled) continue;
    const auto* cmp = llvm::dyn_cast<llvm::FCmpInst>(sel->getCondition());
    if (!cmp || cmp->getPredicate() != llvm::FCmpInst::FCMP_UNO) continue;
    // uno(x, x), or uno(x, c) with a constant c that is not NaN (instcombine's form).
    llvm::Value* x = cmp->getOperand(0);
    const llvm::Value* other = cmp->getOperand(1);
    if (other != x) {
      const auto* c = llvm::dyn_cast<llvm::Constant>(other);
      const llvm::Constant* splat = c && c->getType()->isVectorTy() ? c->getSplatValue() : c;
      const auto* cf = llvm::dyn_cast_or_null<llvm::ConstantFP>(splat);
      if (!cf || cf->isNaN()) continue;
    }
    if (!nan_follows(p, x)) continue;
    sel->replaceAllUsesWith(scaled);
    dead.push_back(sel);
  }
}

}  // namespace

bool scale_exp_with_vscalef(llvm::Function& fn) {
  const std::string features = fn.getFnAttribute("target-features").getValueAsString().str();
  const auto has = [&](const char* f) { return ("," + features + ",").find(f) != std::string::npos; };
  const bool f512 = has(",+avx512f,"), vl = f512 && has(",+avx512vl,");
  if (!f512) return false;
  std::vector<llvm::Instruction*> dead;
  for (llvm::BasicBlock& bb : fn)
    for (llvm::Instruction& inst : bb) {
      auto* ty = llvm::dyn_cast<llvm::FixedVectorType>(inst.getType());
      if (inst.getOpcode() != llvm::Instruction::FMul || !ty || !ty->getElementType()->isFloatTy())
        continue;
      const unsigned lanes = ty->getNumElements();
      if (!(lanes == 16 || (vl && (lanes == 8 || lanes == 4)))) continue;
      llvm::Value *p = nullptr, *n = nullptr;
      for (int outer = 0; outer < 2 && !n; ++outer) {
        llvm::Value* k2 = pow2_exponent(inst.getOperand(1 - outer));
        auto* first = llvm::dyn_cast<llvm::BinaryOperator>(inst.getOperand(outer));
        if (!k2 || !first || first->getOpcode() != llvm::Instruction::FMul) continue;
        for (int inner = 0; inner < 2 && !n; ++inner)
          if (llvm::Value* k1 = pow2_exponent(first->getOperand(1 - inner))) {
            n = halves_of(k1, k2);
            p = first->getOperand(inner);
          }
      }
      if (!n) continue;
      llvm::IRBuilder<> b(&inst);
      llvm::Value* nf = nullptr;  // n as floats: the rounded value it was converted from
      if (!pm::match(n, pm::m_FPToSI(pm::m_Value(nf))) || nf->getType() != ty)
        nf = b.CreateSIToFP(n, ty);
      llvm::CallInst* scaled =
          lanes == 16
              ? b.CreateIntrinsic(llvm::Intrinsic::x86_avx512_mask_scalef_ps_512, {},
                                  {p, nf, p, b.getInt16(0xffff), b.getInt32(4)})  // 4: MXCSR rounding
              : b.CreateIntrinsic(lanes == 8 ? llvm::Intrinsic::x86_avx512_mask_scalef_ps_256
                                             : llvm::Intrinsic::x86_avx512_mask_scalef_ps_128,
                                  {}, {p, nf, p, b.getInt8(0xff)});
      inst.replaceAllUsesWith(scaled);
      dead.push_back(&inst);
      drop_nan_select(scaled, dead);
    }
  for (llvm::Instruction* inst : dead) llvm::RecursivelyDeleteTriviallyDeadInstructions(inst);
  return !dead.empty();
}

void optimize_module(llvm::Module& module, llvm::TargetMachine& tm) {
  llvm::LoopAnalysisManager lam;
  llvm::FunctionAnalysisManager fam;
  llvm::CGSCCAnalysisManager cgam;
  llvm::ModuleAnalysisManager mam;
  llvm::PipelineTuningOptions pto;
  pto.LoopVectorization = true;
  pto.SLPVectorization = true;
  pto.LoopInterleaving = true;
  llvm::PassBuilder pb(&tm, pto);
  pb.registerModuleAnalyses(mam);
  pb.registerCGSCCAnalyses(cgam);
  pb.registerFunctionAnalyses(fam);
  pb.registerLoopAnalyses(lam);
  pb.crossRegisterProxies(lam, fam, cgam, mam);
  llvm::ModulePassManager mpm = pb.buildPerModuleDefaultPipeline(llvm::OptimizationLevel::O3);
  mpm.run(module, mam);
  for (llvm::Function& fn : module)
    if (!fn.isDeclaration()) scale_exp_with_vscalef(fn);
}

}  // namespace kiln::codegen::cpu
