// Initial values and accumulation steps of kernel IR reductions in LLVM IR.
#include "codegen/cpu/reduce_lowering.h"

#include <fmt/format.h>
#include <limits>

#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/Intrinsics.h>

#include "codegen/cpu/alu_lowering.h"
#include "codegen/cpu/dtype_lowering.h"

namespace kiln::codegen::cpu {

using ir::DType;
using kir::ReduceOp;
using llvm::Value;

namespace {

kiln::Error unsupported(ReduceOp op, DType t) {
  return kiln::Error{
      fmt::format("cpu backend: reduce.{} on {} is not supported (expected a "
                  "numeric dtype)",
                  kir::reduce_op_name(op), ir::dtype_name(t))};
}

bool is_max_like(ReduceOp op) {
  return op == ReduceOp::Max || op == ReduceOp::ArgMax;
}

llvm::Constant* extreme(llvm::LLVMContext& ctx, DType t, bool lowest) {
  llvm::Type* ty = register_type(ctx, t);
  if (ir::is_float(t)) return llvm::ConstantFP::getInfinity(ty, /*Negative=*/lowest);
  const unsigned bits = ty->getIntegerBitWidth();
  if (!ir::is_signed(t))  // u8, bool
    return llvm::ConstantInt::get(
        ctx, lowest ? llvm::APInt::getMinValue(bits) : llvm::APInt::getMaxValue(bits));
  return llvm::ConstantInt::get(
      ctx, lowest ? llvm::APInt::getSignedMinValue(bits) : llvm::APInt::getSignedMaxValue(bits));
}

Value* int_extreme(llvm::IRBuilderBase& b, bool max, bool is_signed, Value* x, Value* y) {
  llvm::Intrinsic::ID id = max ? (is_signed ? llvm::Intrinsic::smax : llvm::Intrinsic::umax)
                               : (is_signed ? llvm::Intrinsic::smin : llvm::Intrinsic::umin);
  return b.CreateBinaryIntrinsic(id, x, y);
}

ReduceState arg_step(llvm::IRBuilderBase& b, bool max, DType t, ReduceState s, Value* v, Value* i) {
  Value* take;
  if (ir::is_float(t)) {
    // v wins when it is larger (smaller), or it is the first NaN: (v > acc) | (v is NaN and acc
    // is not). Written as !(acc >= v) & (acc is not NaN), with one unordered compare (true for a
    // NaN on either side) standing for the two: two compares per step instead of three, which
    // vector code pays per element (argmax over an outer axis: one step per plane).
    Value* unordered_or_wins = max ? b.CreateFCmpULT(s.acc, v) : b.CreateFCmpUGT(s.acc, v);
    take = b.CreateAnd(unordered_or_wins, b.CreateFCmpORD(s.acc, s.acc));
  } else if (ir::is_signed(t)) {
    take = max ? b.CreateICmpSGT(v, s.acc) : b.CreateICmpSLT(v, s.acc);
  } else {
    take = max ? b.CreateICmpUGT(v, s.acc) : b.CreateICmpULT(v, s.acc);
  }
  Value* i32 = b.CreateTrunc(i, b.getInt32Ty());
  return {b.CreateSelect(take, v, s.acc), b.CreateSelect(take, i32, s.index)};
}

}  // namespace

Expected<llvm::Constant*> reduce_init(llvm::LLVMContext& ctx, ReduceOp op, DType body) {
  const bool is_bool = body == DType::boolean;
  switch (op) {
    case ReduceOp::Sum:
    case ReduceOp::Prod:
      if (is_bool) return std::unexpected(unsupported(op, body));
      return register_constant(ctx, body, op == ReduceOp::Sum ? 0.0 : 1.0,
                               op == ReduceOp::Sum ? 0 : 1);
    case ReduceOp::Max:
    case ReduceOp::ArgMax:
    case ReduceOp::Min:
    case ReduceOp::ArgMin:
      return extreme(ctx, body, is_max_like(op));
  }
  return std::unexpected(unsupported(op, body));
}

Expected<ReduceState> reduce_step(llvm::IRBuilderBase& b, ReduceOp op, DType body, ReduceState s,
                                  Value* v, Value* i, bool in_lanes) {
  const bool is_float = ir::is_float(body);
  auto fast = [in_lanes](Value* v) {
    if (!in_lanes) return v;
    llvm::FastMathFlags fmf;
    fmf.setAllowReassoc();
    fmf.setAllowContract();
    if (auto* inst = llvm::dyn_cast<llvm::Instruction>(v)) inst->setFastMathFlags(fmf);
    return v;
  };
  switch (op) {
    case ReduceOp::Sum:
      if (!is_float) return ReduceState{b.CreateAdd(s.acc, v)};
      return ReduceState{fast(b.CreateFAdd(s.acc, v))};
    case ReduceOp::Prod:
      if (!is_float) return ReduceState{b.CreateMul(s.acc, v)};
      return ReduceState{fast(b.CreateFMul(s.acc, v))};
    case ReduceOp::Max:
      if (is_float) return ReduceState{emit_float_max(b, s.acc, v, body)};
      return ReduceState{int_extreme(b, true, ir::is_signed(body), s.acc, v)};
    case ReduceOp::Min:
      if (is_float) return ReduceState{emit_float_min(b, s.acc, v, body)};
      return ReduceState{int_extreme(b, false, ir::is_signed(body), s.acc, v)};
    case ReduceOp::ArgMax:
    case ReduceOp::ArgMin:
      return arg_step(b, op == ReduceOp::ArgMax, body, s, v, i);
  }
  return std::unexpected(unsupported(op, body));
}

Value* ranks_before(llvm::IRBuilderBase& b, bool largest, DType t, Value* a, Value* c) {
  if (ir::is_float(t)) {
    Value* ordered = largest ? b.CreateFCmpOGT(a, c) : b.CreateFCmpOLT(a, c);
    Value* a_nan = b.CreateFCmpUNO(a, a);
    Value* c_nan = b.CreateFCmpUNO(c, c);
    Value* by_nan =
        largest ? b.CreateAnd(a_nan, b.CreateNot(c_nan)) : b.CreateAnd(c_nan, b.CreateNot(a_nan));
    return b.CreateOr(ordered, by_nan);
  }
  if (ir::is_signed(t)) return largest ? b.CreateICmpSGT(a, c) : b.CreateICmpSLT(a, c);
  return largest ? b.CreateICmpUGT(a, c) : b.CreateICmpULT(a, c);
}

}  // namespace kiln::codegen::cpu
