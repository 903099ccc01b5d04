// The arithmetic of kernel IR reductions: initial values and one accumulation step per ReduceOp
// and dtype (the loop nest around them is built by the emitter).
#pragma once

#include "ir/kernel_ir.h"
#include "kiln/error.h"

namespace llvm {
class Constant;
class IRBuilderBase;
class LLVMContext;
class Value;
}  // namespace llvm

namespace kiln::codegen::cpu {

struct ReduceState {
  llvm::Value* acc = nullptr;    // running value, register type of the body's dtype
  llvm::Value* index = nullptr;  // ArgMax/ArgMin: i32 index of `acc`; otherwise null
};

// Sum 0, Prod 1, Max -inf / lowest, Min +inf / highest (Arg* start like Max/Min at index 0).
Expected<llvm::Constant*> reduce_init(llvm::LLVMContext& ctx, kir::ReduceOp op, ir::DType body);

// Folds `v` (the body at loop index `i`, an i64) into `state`. `in_lanes`: the loop is
// vectorized to the fixed lanes and accumulators of a reduction (llvm_emitter.cpp), and its float
// sums and products carry reassoc+contract so that LLVM may; elsewhere they add in order, with
// no flag that lets LLVM regroup them (a product of 7 equal factors, unrolled, became powers of
// it: another value than the same product of a buffer's 7 elements). NaN and inf still
// propagate. ArgMax/ArgMin keep the first extreme and count NaN as the largest (the first NaN
// wins, for both).
Expected<ReduceState> reduce_step(llvm::IRBuilderBase& b, kir::ReduceOp op, ir::DType body,
                                  ReduceState state, llvm::Value* v, llvm::Value* i, bool in_lanes);

// The top-k order (a selection scan, kir::ExprKind::Scan with ArgMax/ArgMin): whether `a` ranks
// strictly before `c`: larger first when `largest` (smaller first otherwise), NaN above every
// number; two NaNs, or equal values, rank neither way (the caller orders them by index).
llvm::Value* ranks_before(llvm::IRBuilderBase& b, bool largest, ir::DType t, llvm::Value* a,
                          llvm::Value* c);

}  // namespace kiln::codegen::cpu
