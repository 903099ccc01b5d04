// O3 over one module with the new pass manager and the host target machine's cost model, then the
// rewrites LLVM 19 does not make itself (exp's scaling by 2^n as AVX-512's vscalefps).
#include "codegen/cpu/llvm_optimizer.h"

#include <vector>

#include <llvm/Analysis/CGSCCPassManager.h>
#include <llvm/Analysis/LoopAnalysisManager.h>
#include <llvm/IR/DerivedTypes.h>
#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/Instructions.h>
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
