// kiln dtypes in LLVM IR: register and memory types, constants, conversions and casts.
#include "codegen/cpu/dtype_lowering.h"

#include <llvm/ADT/APFloat.h>
#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/Intrinsics.h>

#include "kiln/error.h"

namespace kiln::codegen::cpu {

using ir::DType;
using llvm::Value;

llvm::Type* register_type(llvm::LLVMContext& ctx, DType t) {
  switch (t) {
    case DType::f32:
    case DType::f16:
    case DType::bf16:
      return llvm::Type::getFloatTy(ctx);
    case DType::f64:
      return llvm::Type::getDoubleTy(ctx);
    case DType::i32:
      return llvm::Type::getInt32Ty(ctx);
    case DType::i64:
      return llvm::Type::getInt64Ty(ctx);
    case DType::i8:
    case DType::u8:
      return llvm::Type::getInt8Ty(ctx);
    case DType::boolean:
      return llvm::Type::getInt1Ty(ctx);
  }
  KILN_CHECK(false) << "unknown dtype " << static_cast<int>(t);
  return nullptr;
}

llvm::Type* memory_type(llvm::LLVMContext& ctx, DType t) {
  switch (t) {
    case DType::f16:
      return llvm::Type::getHalfTy(ctx);
    case DType::bf16:
      return llvm::Type::getInt16Ty(ctx);
    case DType::boolean:
      return llvm::Type::getInt8Ty(ctx);
    case DType::f32:
    case DType::f64:
    case DType::i32:
    case DType::i64:
    case DType::i8:
    case DType::u8:
      break;  // stored as held in registers
  }
  return register_type(ctx, t);
}

llvm::Constant* register_constant(llvm::LLVMContext& ctx, DType t, double fval, int64_t ival) {
  llvm::Type* ty = register_type(ctx, t);
  if (t == DType::f16 || t == DType::bf16) {
    llvm::APFloat v(fval);
    bool lost = false;
    v.convert(t == DType::f16 ? llvm::APFloat::IEEEhalf() : llvm::APFloat::BFloat(),
              llvm::APFloat::rmNearestTiesToEven, &lost);
    v.convert(llvm::APFloat::IEEEsingle(), llvm::APFloat::rmNearestTiesToEven, &lost);
    return llvm::ConstantFP::get(ctx, v);
  }
  if (ir::is_float(t)) return llvm::ConstantFP::get(ty, fval);
  return llvm::ConstantInt::get(ty, static_cast<uint64_t>(ival), /*isSigned=*/true);
}

namespace {

// float -> bf16 bits with round-to-nearest-even; NaN stays a (quiet) NaN.
Value* float_to_bf16_bits(llvm::IRBuilderBase& b, Value* v) {
  Value* bits = b.CreateBitCast(v, b.getInt32Ty());
  Value* lsb = b.CreateAnd(b.CreateLShr(bits, 16), b.getInt32(1));
  Value* rounded = b.CreateLShr(b.CreateAdd(b.CreateAdd(bits, b.getInt32(0x7fff)), lsb), 16);
  Value* quiet_nan = b.CreateOr(b.CreateLShr(bits, 16), b.getInt32(0x40));
  Value* out = b.CreateSelect(b.CreateFCmpUNO(v, v), quiet_nan, rounded);
  return b.CreateTrunc(out, b.getInt16Ty());
}

Value* bf16_bits_to_float(llvm::IRBuilderBase& b, Value* bits16) {
  Value* bits = b.CreateShl(b.CreateZExt(bits16, b.getInt32Ty()), 16);
  return b.CreateBitCast(bits, b.getFloatTy());
}

}  // namespace

Value* from_memory(llvm::IRBuilderBase& b, Value* v, DType t) {
  switch (t) {
    case DType::f16:
      return b.CreateFPExt(v, b.getFloatTy());
    case DType::bf16:
      return bf16_bits_to_float(b, v);
    case DType::boolean:
      return b.CreateICmpNE(v, b.getInt8(0));
    case DType::f32:
    case DType::f64:
    case DType::i32:
    case DType::i64:
    case DType::i8:
    case DType::u8:
      break;  // the register value is the memory value
  }
  return v;
}

Value* to_memory(llvm::IRBuilderBase& b, Value* v, DType t) {
  switch (t) {
    case DType::f16:
      return b.CreateFPTrunc(v, b.getHalfTy());
    case DType::bf16:
      return float_to_bf16_bits(b, v);
    case DType::boolean:
      return b.CreateZExt(v, b.getInt8Ty());
    case DType::f32:
    case DType::f64:
    case DType::i32:
    case DType::i64:
    case DType::i8:
    case DType::u8:
      break;  // the register value is the memory value
  }
  return v;
}

Value* round_to_storage_precision(llvm::IRBuilderBase& b, Value* v, DType t) {
  if (t != DType::f16 && t != DType::bf16) return v;
  return from_memory(b, to_memory(b, v, t), t);
}

namespace {

Value* float_to_int(llvm::IRBuilderBase& b, Value* v, DType to) {
  // Saturating conversions have no undefined cases; narrow types wrap from i32 as C does on x86.
  llvm::Type* wide = to == DType::i64 ? b.getInt64Ty() : b.getInt32Ty();
  Value* i = b.CreateIntrinsic(llvm::Intrinsic::fptosi_sat, {wide, v->getType()}, {v});
  return b.CreateTrunc(i, register_type(b.getContext(), to));
}

Value* int_to_float(llvm::IRBuilderBase& b, Value* v, DType from, DType to) {
  llvm::Type* ty = register_type(b.getContext(), to);
  Value* f = ir::is_signed(from) ? b.CreateSIToFP(v, ty) : b.CreateUIToFP(v, ty);
  return round_to_storage_precision(b, f, to);
}

}  // namespace

Value* emit_cast(llvm::IRBuilderBase& b, Value* v, DType from, DType to) {
  if (from == to) return v;
  llvm::Type* ty = register_type(b.getContext(), to);
  if (to == DType::boolean) {
    if (ir::is_float(from)) return b.CreateFCmpUNE(v, llvm::ConstantFP::get(v->getType(), 0.0));
    return b.CreateICmpNE(v, llvm::ConstantInt::get(v->getType(), 0));
  }
  if (ir::is_float(from) && ir::is_float(to)) {
    // f64 -> f16/bf16 rounds through f32 (double rounding can differ from a direct rounding by
    // one ulp in rare halfway cases; x86 has no direct instruction for it).
    if (v->getType() != ty) v = b.CreateFPCast(v, ty);
    return round_to_storage_precision(b, v, to);
  }
  if (ir::is_float(from)) return float_to_int(b, v, to);
  if (ir::is_float(to)) return int_to_float(b, v, from, to);
  return b.CreateIntCast(v, ty, /*isSigned=*/ir::is_signed(from));
}

}  // namespace kiln::codegen::cpu
