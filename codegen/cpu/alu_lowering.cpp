// Kernel IR ALU ops -> LLVM IR: per dtype class (float, signed, unsigned, bool), f32 math inline
// (codegen/cpu/vector_math.h), f64 transcendental functions through libm.
#include "codegen/cpu/alu_lowering.h"

#include <fmt/format.h>
#include <limits>

#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/Intrinsics.h>
#include <llvm/IR/Module.h>

#include "codegen/cpu/dtype_lowering.h"
#include "codegen/cpu/vector_math.h"

namespace kiln::codegen::cpu {

using ir::DType;
using kir::Alu;
using llvm::Value;

namespace {

using ir::DTypeClass;

kiln::Error unsupported(const kir::Expr& e, DType t) {
  return kiln::Error{
      fmt::format("cpu backend: alu op '{}' on {} is not supported (expected {})",
                  kir::alu_name(e.alu), ir::dtype_name(t),
                  ir::dtype_class(t) == DTypeClass::boolean ? "a numeric dtype" : "a valid dtype")};
}

Value* fconst(Value* like, double v) {
  return llvm::ConstantFP::get(like->getType(), v);
}
Value* iconst(Value* like, int64_t v) {
  return llvm::ConstantInt::get(like->getType(), static_cast<uint64_t>(v), true);
}

// f64: libm (correct rounding matters more than vector width here; libm calls do not vectorize).
Value* libm_call(llvm::IRBuilderBase& b, const char* name, Value* x) {
  llvm::Module* m = b.GetInsertBlock()->getModule();
  llvm::FunctionCallee f = m->getOrInsertFunction(name, x->getType(), x->getType());
  return b.CreateCall(f, {x});
}

// The same stable form as emit_sigmoid_f32: e = exp(-|x|), x < 0 ? e/(1+e) : 1/(1+e).
Value* sigmoid_f64(llvm::IRBuilderBase& b, Value* x) {
  Value* e = b.CreateUnaryIntrinsic(llvm::Intrinsic::exp,
                                    b.CreateFNeg(b.CreateUnaryIntrinsic(llvm::Intrinsic::fabs, x)));
  Value* num = b.CreateSelect(b.CreateFCmpOLT(x, fconst(x, 0)), e, fconst(x, 1));
  return b.CreateFDiv(num, b.CreateFAdd(e, fconst(x, 1)));
}

Value* sign_float(llvm::IRBuilderBase& b, Value* x) {
  // NaN maps to itself and both zeros to +0, as numpy.sign and torch.sign do.
  Value* r = b.CreateSelect(b.CreateFCmpOEQ(x, fconst(x, 0)), fconst(x, 0), x);
  r = b.CreateSelect(b.CreateFCmpOLT(x, fconst(x, 0)), fconst(x, -1), r);
  return b.CreateSelect(b.CreateFCmpOGT(x, fconst(x, 0)), fconst(x, 1), r);
}

// The tanh form of gelu through sigmoid_f64 (0.5 * (1 + tanh(u)) = sigmoid(2u)); gelu(-inf) = -0.
Value* gelu_f64(llvm::IRBuilderBase& b, Value* x) {
  Value* x3 = b.CreateFMul(b.CreateFMul(x, x), x);
  Value* u = b.CreateFMul(fconst(x, 0.7978845608028654),
                          b.CreateFAdd(x, b.CreateFMul(x3, fconst(x, 0.044715))));
  Value* res = b.CreateFMul(x, sigmoid_f64(b, b.CreateFAdd(u, u)));
  Value* neg_inf = b.CreateFCmpOEQ(x, fconst(x, -std::numeric_limits<double>::infinity()));
  return b.CreateSelect(neg_inf, fconst(x, -0.0), res);
}

// -1, 0 or 1 (unsigned: 0 or 1).
Value* sign_int(llvm::IRBuilderBase& b, Value* x, bool is_signed) {
  Value* pos = b.CreateZExt(b.CreateICmpSGT(x, iconst(x, 0)), x->getType());
  if (!is_signed) return b.CreateZExt(b.CreateICmpNE(x, iconst(x, 0)), x->getType());
  return b.CreateSub(pos, b.CreateZExt(b.CreateICmpSLT(x, iconst(x, 0)), x->getType()));
}

// IEEE division, correctly rounded, in every kernel. Not arcp: it let LLVM turn x / y into
// x * (1 / y) where y was loop-invariant in the kernel at hand (softmax's sum along a row) and
// keep the division elsewhere (the same sum along a strided axis, or read from a buffer), so one
// quotient had two values, 1 ulp apart, depending on the plan (RandomGraphFuzz.
// AValueIsTheSameWhicheverPlanComputesIt). The division per element costs softmax on 4096 x 4096
// f32 (memory-bound, 2 Zen 5 threads) no measurable time: medians of 5 runs 3.21 ms against 3.13
// with arcp, within the runs' spread (2.95-4.11 and 2.99-3.79). No flag on f64 division either:
// LLVM narrows fptrunc(fdiv(fpext a, fpext b)) to the narrow fdiv with the f64 one's flags, which
// without flags is exact (an f64 quotient of narrower floats rounds once when cast); the ONNX
// importer's quantization relies on it where a quotient tying at .5 is rounded to an integer.
Value* float_div(llvm::IRBuilderBase& b, Value* x, Value* y) {
  return b.CreateFDiv(x, y);
}

// numpy floor_divide on integers, with x / 0 = 0 and INT_MIN / -1 wrapping (no UB, no SIGFPE).
Value* int_floor_div(llvm::IRBuilderBase& b, Value* x, Value* y, bool is_signed) {
  Value* zero = b.CreateICmpEQ(y, iconst(y, 0));
  Value* y1 = b.CreateSelect(zero, iconst(y, 1), y);
  if (!is_signed) return b.CreateSelect(zero, iconst(x, 0), b.CreateUDiv(x, y1));
  Value* minus1 = b.CreateICmpEQ(y1, iconst(y, -1));
  Value* y2 = b.CreateSelect(minus1, iconst(y, 1), y1);
  Value* q = b.CreateSelect(minus1, b.CreateNeg(x), b.CreateSDiv(x, y2));
  Value* r = b.CreateSRem(x, y2);
  Value* signs_differ =
      b.CreateXor(b.CreateICmpSLT(r, iconst(r, 0)), b.CreateICmpSLT(y2, iconst(y, 0)));
  Value* adjust = b.CreateAnd(b.CreateICmpNE(r, iconst(r, 0)), signs_differ);
  q = b.CreateSub(q, b.CreateZExt(adjust, q->getType()));
  return b.CreateSelect(zero, iconst(x, 0), q);
}

// Index arithmetic: the contract promises operands >= 0 and a positive divisor; the guard keeps
// a broken kernel from raising SIGFPE and folds away for constant divisors.
Value* index_div_mod(llvm::IRBuilderBase& b, Alu op, Value* x, Value* y, bool is_signed) {
  Value* y1 = b.CreateSelect(b.CreateICmpEQ(y, iconst(y, 0)), iconst(y, 1), y);
  if (op == Alu::IDiv) return is_signed ? b.CreateSDiv(x, y1) : b.CreateUDiv(x, y1);
  return is_signed ? b.CreateSRem(x, y1) : b.CreateURem(x, y1);
}

Value* compare(llvm::IRBuilderBase& b, Alu op, DTypeClass cls, Value* x, Value* y) {
  using P = llvm::CmpInst::Predicate;
  if (cls == DTypeClass::floating) {
    // Ordered predicates: NaN compares false, except `ne`, which is true (numpy).
    static constexpr P kFloat[] = {P::FCMP_OEQ, P::FCMP_UNE, P::FCMP_OLT,
                                   P::FCMP_OLE, P::FCMP_OGT, P::FCMP_OGE};
    return b.CreateFCmp(kFloat[static_cast<int>(op) - static_cast<int>(Alu::Eq)], x, y);
  }
  static constexpr P kSigned[] = {P::ICMP_EQ,  P::ICMP_NE,  P::ICMP_SLT,
                                  P::ICMP_SLE, P::ICMP_SGT, P::ICMP_SGE};
  static constexpr P kUnsigned[] = {P::ICMP_EQ,  P::ICMP_NE,  P::ICMP_ULT,
                                    P::ICMP_ULE, P::ICMP_UGT, P::ICMP_UGE};
  const int k = static_cast<int>(op) - static_cast<int>(Alu::Eq);
  return b.CreateICmp(cls == DTypeClass::signed_int ? kSigned[k] : kUnsigned[k], x, y);
}

}  // namespace

namespace {

// The rule in compares and selects: x > y (x < y for min) picks x; equal values (+-0 among them)
// combine their bits, so +0 wins max and -0 wins min; an unordered pair gives NaN.
Value* spelled_out_extreme(llvm::IRBuilderBase& b, Value* x, Value* y, bool max) {
  llvm::Type* bits = b.getIntNTy(x->getType()->getScalarSizeInBits());
  Value* r = b.CreateSelect(max ? b.CreateFCmpOGT(x, y) : b.CreateFCmpOLT(x, y), x, y);
  Value* xi = b.CreateBitCast(x, bits);
  Value* yi = b.CreateBitCast(y, bits);
  Value* tie = b.CreateBitCast(max ? b.CreateAnd(xi, yi) : b.CreateOr(xi, yi), x->getType());
  r = b.CreateSelect(b.CreateFCmpOEQ(x, y), tie, r);
  return b.CreateSelect(b.CreateFCmpUNO(x, y), llvm::ConstantFP::getNaN(x->getType()), r);
}

}  // namespace

Value* emit_float_max(llvm::IRBuilderBase& b, Value* x, Value* y, DType t) {
  if (t == DType::f16) return spelled_out_extreme(b, x, y, true);
  return b.CreateBinaryIntrinsic(llvm::Intrinsic::maximum, x, y);
}
Value* emit_float_min(llvm::IRBuilderBase& b, Value* x, Value* y, DType t) {
  if (t == DType::f16) return spelled_out_extreme(b, x, y, false);
  return b.CreateBinaryIntrinsic(llvm::Intrinsic::minimum, x, y);
}

Expected<Value*> emit_alu(llvm::IRBuilderBase& b, const kir::Expr& e,
                          std::span<Value* const> args) {
  const DType operand = e.args[0]->dtype;
  const DTypeClass cls = ir::dtype_class(operand);
  const bool flt = cls == DTypeClass::floating, is_bool = cls == DTypeClass::boolean;
  const bool is_signed = cls == DTypeClass::signed_int;
  Value* x = args[0];
  Value* y = args.size() > 1 ? args[1] : nullptr;
  const bool f32 = x->getType()->isFloatTy();  // f32, f16 and bf16: inline f32 math
  switch (e.alu) {
    case Alu::Neg:
      if (flt) return b.CreateFNeg(x);
      if (is_bool) break;
      return b.CreateNeg(x);
    case Alu::Abs:
      if (flt) return b.CreateUnaryIntrinsic(llvm::Intrinsic::fabs, x);
      if (is_bool) break;
      return is_signed ? b.CreateBinaryIntrinsic(llvm::Intrinsic::abs, x, b.getFalse()) : x;
    case Alu::Exp:
      if (!flt) break;
      return f32 ? emit_exp_f32(b, x) : b.CreateUnaryIntrinsic(llvm::Intrinsic::exp, x);
    case Alu::Log:
      if (!flt) break;
      return f32 ? emit_log_f32(b, x) : b.CreateUnaryIntrinsic(llvm::Intrinsic::log, x);
    case Alu::Sqrt:
      if (!flt) break;
      return b.CreateUnaryIntrinsic(llvm::Intrinsic::sqrt, x);
    case Alu::Rsqrt:
      if (!flt) break;
      return b.CreateFDiv(fconst(x, 1), b.CreateUnaryIntrinsic(llvm::Intrinsic::sqrt, x));
    case Alu::Recip:
      if (!flt) break;
      return b.CreateFDiv(fconst(x, 1), x);
    case Alu::Sin:
      if (!flt) break;
      return f32 ? emit_sin_f32(b, x) : b.CreateUnaryIntrinsic(llvm::Intrinsic::sin, x);
    case Alu::Cos:
      if (!flt) break;
      return f32 ? emit_cos_f32(b, x) : b.CreateUnaryIntrinsic(llvm::Intrinsic::cos, x);
    case Alu::Tanh:
      if (!flt) break;
      return f32 ? emit_tanh_f32(b, x) : libm_call(b, "tanh", x);
    case Alu::Sigmoid:
      if (!flt) break;
      return f32 ? emit_sigmoid_f32(b, x) : sigmoid_f64(b, x);
    case Alu::Relu:
      if (flt) return emit_float_max(b, x, fconst(x, 0), e.dtype);
      if (is_bool) break;
      return is_signed ? b.CreateBinaryIntrinsic(llvm::Intrinsic::smax, x, iconst(x, 0)) : x;
    case Alu::Gelu:
      if (!flt) break;
      return f32 ? emit_gelu_f32(b, x) : gelu_f64(b, x);
    case Alu::Erf:
      if (!flt) break;
      return f32 ? emit_erf_f32(b, x) : libm_call(b, "erf", x);
    case Alu::Floor:
      if (!flt) break;
      return b.CreateUnaryIntrinsic(llvm::Intrinsic::floor, x);
    case Alu::Ceil:
      if (!flt) break;
      return b.CreateUnaryIntrinsic(llvm::Intrinsic::ceil, x);
    case Alu::Sign:
      if (flt) return sign_float(b, x);
      if (is_bool) break;
      return sign_int(b, x, is_signed);
    case Alu::Not:
      if (operand != DType::boolean) return std::unexpected(unsupported(e, operand));
      return b.CreateNot(x);
    case Alu::Cast:
      return emit_cast(b, x, operand, e.dtype);
    case Alu::Add:
      if (flt) return b.CreateFAdd(x, y);
      if (is_bool) break;
      return b.CreateAdd(x, y);
    case Alu::Sub:
      if (flt) return b.CreateFSub(x, y);
      if (is_bool) break;
      return b.CreateSub(x, y);
    case Alu::Mul:
      if (flt) return b.CreateFMul(x, y);
      if (is_bool) break;
      return b.CreateMul(x, y);
    case Alu::Div:
      if (flt) return float_div(b, x, y);
      if (is_bool) break;
      return int_floor_div(b, x, y, is_signed);
    // libm pow (powf for f32): exp(y*log(x)) in f32 would lose ~|y*log x| ulp.
    case Alu::Pow:
      if (!flt) break;
      return b.CreateBinaryIntrinsic(llvm::Intrinsic::pow, x, y);
    case Alu::Max:  // bool: umax, i.e. or
      if (flt) return emit_float_max(b, x, y, e.dtype);
      return b.CreateBinaryIntrinsic(is_signed ? llvm::Intrinsic::smax : llvm::Intrinsic::umax, x,
                                     y);
    case Alu::Min:  // bool: umin, i.e. and
      if (flt) return emit_float_min(b, x, y, e.dtype);
      return b.CreateBinaryIntrinsic(is_signed ? llvm::Intrinsic::smin : llvm::Intrinsic::umin, x,
                                     y);
    case Alu::Clip: {  // max then min, with their NaN rules
      if (is_bool) break;
      if (flt) return emit_float_min(b, emit_float_max(b, x, y, e.dtype), args[2], e.dtype);
      Value* lo = b.CreateBinaryIntrinsic(is_signed ? llvm::Intrinsic::smax : llvm::Intrinsic::umax,
                                          x, y);
      return b.CreateBinaryIntrinsic(is_signed ? llvm::Intrinsic::smin : llvm::Intrinsic::umin, lo,
                                     args[2]);
    }
    case Alu::Eq:
    case Alu::Ne:
    case Alu::Lt:
    case Alu::Le:
    case Alu::Gt:
    case Alu::Ge:
      return compare(b, e.alu, cls, x, y);
    case Alu::And:
      if (flt) break;
      return b.CreateAnd(x, y);
    case Alu::Or:
      if (flt) break;
      return b.CreateOr(x, y);
    case Alu::Where: {
      Value* cond = x;  // bool by contract; any other dtype counts as `!= 0`
      if (operand != DType::boolean) cond = emit_cast(b, cond, operand, DType::boolean);
      return b.CreateSelect(cond, y, args[2]);
    }
    case Alu::IDiv:
    case Alu::Mod:
      if (flt || is_bool) break;
      return index_div_mod(b, e.alu, x, y, is_signed);
  }
  // The op does not apply to the operand's dtype class. Unary ops on numbers name the expression's
  // dtype, the others the operand's (the same dtype in a well-formed kernel).
  return std::unexpected(unsupported(e, args.size() == 1 && !is_bool ? e.dtype : operand));
}

}  // namespace kiln::codegen::cpu
