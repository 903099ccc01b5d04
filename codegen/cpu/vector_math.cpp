// Branch-free f32 elementary functions as LLVM IR: Cody-Waite range reduction plus minimax
// polynomials (Cephes-style for exp/log/sin/cos; tanh and erf fitted for this file), specials by
// select.
#include "codegen/cpu/vector_math.h"

#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <limits>
#include <span>

#include <llvm/IR/Constants.h>
#include <llvm/IR/GlobalVariable.h>
#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/Intrinsics.h>
#include <llvm/IR/Module.h>

namespace kiln::codegen::cpu {

namespace {

using llvm::Value;

Value* f32(llvm::IRBuilderBase& b, double v) {
  return llvm::ConstantFP::get(b.getFloatTy(), v);
}
Value* i32(llvm::IRBuilderBase& b, int32_t v) {
  return b.getInt32(static_cast<uint32_t>(v));
}

Value* fma(llvm::IRBuilderBase& b, Value* x, Value* y, Value* z) {
  // fmuladd fuses where the target has FMA and never becomes a libm call where it does not.
  return b.CreateIntrinsic(llvm::Intrinsic::fmuladd, {x->getType()}, {x, y, z});
}

// Horner evaluation, coefficients from the highest degree down.
Value* poly(llvm::IRBuilderBase& b, Value* x, std::span<const double> coeffs) {
  Value* acc = f32(b, coeffs.front());
  for (double c : coeffs.subspan(1)) acc = fma(b, acc, x, f32(b, c));
  return acc;
}
Value* poly(llvm::IRBuilderBase& b, Value* x, std::initializer_list<double> coeffs) {
  return poly(b, x, std::span<const double>(coeffs.begin(), coeffs.size()));
}

Value* fabs(llvm::IRBuilderBase& b, Value* x) {
  return b.CreateUnaryIntrinsic(llvm::Intrinsic::fabs, x);
}

Value* is_nan(llvm::IRBuilderBase& b, Value* x) {
  return b.CreateFCmpUNO(x, x);
}

// max/min written as compare+select so that a NaN operand x yields `lo`/`hi` (this is exactly the
// x86 maxps/minps semantics, one instruction each); callers restore NaN at the end.
Value* clamp(llvm::IRBuilderBase& b, Value* x, double lo, double hi) {
  Value* y = b.CreateSelect(b.CreateFCmpOGT(x, f32(b, lo)), x, f32(b, lo));
  return b.CreateSelect(b.CreateFCmpOLT(y, f32(b, hi)), y, f32(b, hi));
}

// The same clamp with a NaN x kept: x < lo ? lo : x, then y > hi ? hi : y (maxps(lo, x) and
// minps(hi, y) on x86, one instruction each).
Value* clamp_keeping_nan(llvm::IRBuilderBase& b, Value* x, double lo, double hi) {
  Value* y = b.CreateSelect(b.CreateFCmpOLT(x, f32(b, lo)), f32(b, lo), x);
  return b.CreateSelect(b.CreateFCmpOGT(y, f32(b, hi)), f32(b, hi), y);
}

// 2^k for an i32 k in [-126, 127], built in the exponent field.
Value* pow2i(llvm::IRBuilderBase& b, Value* k) {
  Value* bits = b.CreateShl(b.CreateAdd(k, i32(b, 127)), i32(b, 23));
  return b.CreateBitCast(bits, b.getFloatTy());
}

// exp's pieces, shared by emit_exp_f32 and emit_exp_nonpositive_f32: 1/ln2, ln2 split in two so
// that n * kLn2Hi is exact, and Cephes' minimax coefficients of (exp(r) - 1 - r) / r^2 on
// |r| <= ln2/2, highest degree first.
constexpr double kLog2e = 1.44269504088896341;
constexpr double kLn2Hi = 0.693359375;
constexpr double kLn2Lo = -2.12194440e-4;
constexpr double kExpPoly[6] = {1.9875691500E-4, 1.3981999507E-3, 8.3334519073E-3,
                                4.1665795894E-2, 1.6666665459E-1, 5.0000001201E-1};

// r = x - n * ln2, in two steps.
Value* exp_reduce(llvm::IRBuilderBase& b, Value* x, Value* n) {
  Value* r = fma(b, n, f32(b, -kLn2Hi), x);
  return fma(b, n, f32(b, -kLn2Lo), r);
}

// exp(r) = 1 + r + r^2 * p(r), p the polynomial of kExpPoly evaluated already.
Value* exp_finish(llvm::IRBuilderBase& b, Value* r, Value* r2, Value* p) {
  return fma(b, p, r2, b.CreateFAdd(r, f32(b, 1.0)));
}

}  // namespace

Value* emit_exp_f32(llvm::IRBuilderBase& b, Value* x) {
  // exp(x) = 2^n * exp(r), n = round(x / ln2), |r| <= ln2/2, ln2 split in two for exact n*C1.
  // A NaN x passes the clamp, so p below is NaN too: the result for it is p (x's sign and payload,
  // quieted, as glibc's expf gives). n's conversion to an integer is poison then, and so is the
  // two-step scaling of p, so the final select stays, unless scale_exp_with_vscalef
  // (llvm_optimizer.h) scales by n as a float: vscalefps returns a NaN p itself, and the rewrite
  // drops the select.
  Value* xc = clamp_keeping_nan(b, x, -104.0, 89.0);
  Value* n =
      b.CreateUnaryIntrinsic(llvm::Intrinsic::floor, fma(b, xc, f32(b, kLog2e), f32(b, 0.5)));
  Value* r = exp_reduce(b, xc, n);
  Value* r2 = b.CreateFMul(r, r);
  Value* p = exp_finish(b, r, r2, poly(b, r, kExpPoly));
  // Scale in two steps so that results in the subnormal range and just below overflow are exact
  // (n is in [-150, 129] after the clamp; each half stays a normal power of two).
  Value* ni = b.CreateFPToSI(n, b.getInt32Ty());
  Value* n1 = b.CreateAShr(ni, i32(b, 1));
  Value* n2 = b.CreateSub(ni, n1);
  Value* res = b.CreateFMul(b.CreateFMul(p, pow2i(b, n1)), pow2i(b, n2));
  return b.CreateSelect(is_nan(b, x), p, res);
}

Value* emit_exp_nonpositive_f32(llvm::IRBuilderBase& b, Value* x) {
  // As emit_exp_f32, with a shorter chain of dependent steps for x <= 0 only: n = round(x / ln2)
  // by the 1.5 * 2^23 shift (its integer value read off the bits, no floor or conversion), the
  // polynomial by Estrin's scheme, one scaling step (2^n stays normal for x >= kLow, and below
  // kLow the result, under 2^-124, is flushed to 0). -inf gives 0; NaN stays NaN.
  constexpr double kLow = -86.5;
  constexpr double kShift = 12582912.0;  // 1.5 * 2^23
  Value* xc = b.CreateSelect(b.CreateFCmpOGT(x, f32(b, kLow)), x, f32(b, kLow));
  Value* t = fma(b, xc, f32(b, kLog2e), f32(b, kShift));
  Value* n = b.CreateFSub(t, f32(b, kShift));
  Value* r = exp_reduce(b, xc, n);
  Value* r2 = b.CreateFMul(r, r);
  // kExpPoly by Estrin's scheme: (c0 r + c1) r^4 + (c2 r + c3) r^2 + (c4 r + c5).
  const double* c = kExpPoly;
  Value* hi = fma(b, f32(b, c[0]), r, f32(b, c[1]));
  Value* mid = fma(b, f32(b, c[2]), r, f32(b, c[3]));
  Value* lo = fma(b, f32(b, c[4]), r, f32(b, c[5]));
  Value* p = exp_finish(b, r, r2, fma(b, fma(b, hi, r2, mid), r2, lo));
  // t's bits hold 0x4b400000 + n for the n in reach here (|n| < 2^22).
  Value* ni = b.CreateSub(b.CreateBitCast(t, b.getInt32Ty()), i32(b, 0x4b400000));
  Value* res = b.CreateFMul(p, pow2i(b, ni));
  res = b.CreateSelect(b.CreateFCmpOLT(x, f32(b, kLow)), f32(b, 0.0), res);
  return b.CreateSelect(is_nan(b, x), x, res);
}

Value* emit_log_f32(llvm::IRBuilderBase& b, Value* x) {
  // log(x) = e*ln2 + log(m), m in [sqrt(1/2), sqrt(2)); subnormals are scaled by 2^23 first.
  Value* subnormal = b.CreateFCmpOLT(x, f32(b, std::numeric_limits<float>::min()));
  Value* xs = b.CreateSelect(subnormal, b.CreateFMul(x, f32(b, 8388608.0)), x);
  Value* bits = b.CreateBitCast(xs, b.getInt32Ty());
  Value* e = b.CreateSub(b.CreateLShr(bits, i32(b, 23)), i32(b, 126));
  e = b.CreateSub(e, b.CreateSelect(subnormal, i32(b, 23), i32(b, 0)));
  Value* mbits = b.CreateOr(b.CreateAnd(bits, i32(b, 0x007fffff)), i32(b, 0x3f000000));
  Value* m = b.CreateBitCast(mbits, b.getFloatTy());  // in [0.5, 1)
  Value* small = b.CreateFCmpOLT(m, f32(b, 0.707106781186547524));
  e = b.CreateSub(e, b.CreateZExt(small, b.getInt32Ty()));
  Value* t = b.CreateFSub(b.CreateSelect(small, b.CreateFAdd(m, m), m), f32(b, 1.0));
  Value* ef = b.CreateSIToFP(e, b.getFloatTy());
  Value* z = b.CreateFMul(t, t);
  Value* p =
      poly(b, t,
           {7.0376836292E-2, -1.1514610310E-1, 1.1676998740E-1, -1.2420140846E-1, 1.4249322787E-1,
            -1.6668057665E-1, 2.0000714765E-1, -2.4999993993E-1, 3.3333331174E-1});
  Value* y = b.CreateFMul(b.CreateFMul(t, z), p);
  y = fma(b, ef, f32(b, -2.12194440e-4), y);
  y = fma(b, z, f32(b, -0.5), y);
  Value* res = fma(b, ef, f32(b, 0.693359375), b.CreateFAdd(t, y));
  const double inf = std::numeric_limits<double>::infinity();
  res = b.CreateSelect(b.CreateFCmpOEQ(x, f32(b, inf)), f32(b, inf), res);
  res = b.CreateSelect(b.CreateFCmpOEQ(x, f32(b, 0.0)), f32(b, -inf), res);
  res = b.CreateSelect(b.CreateFCmpOLT(x, f32(b, 0.0)), f32(b, std::nan("")), res);
  return b.CreateSelect(is_nan(b, x), x, res);
}

Value* emit_tanh_f32(llvm::IRBuilderBase& b, Value* x) {
  // Small |x|: x + x^3*P(x^2) (no cancellation); otherwise 1 - 2/(exp(2|x|) + 1), which
  // saturates to 1 once exp overflows. The sign is copied back at the end.
  Value* ax = fabs(b, x);
  Value* s = b.CreateFMul(x, x);
  Value* p = poly(b, s,
                  {-0.006113132600916459, 0.021010036450450232, -0.05385405922933959,
                   0.13332794472496215, -0.3333332924905142});
  Value* small = fma(b, b.CreateFMul(p, s), ax, ax);
  Value* e = emit_exp_f32(b, b.CreateFAdd(ax, ax));
  Value* large = b.CreateFSub(f32(b, 1.0), b.CreateFDiv(f32(b, 2.0), b.CreateFAdd(e, f32(b, 1.0))));
  Value* res = b.CreateSelect(b.CreateFCmpOLT(ax, f32(b, 0.625)), small, large);
  res = b.CreateBinaryIntrinsic(llvm::Intrinsic::copysign, res, x);
  return b.CreateSelect(is_nan(b, x), x, res);
}

Value* emit_sigmoid_f32(llvm::IRBuilderBase& b, Value* x) {
  // With e = exp(-|x|) (never overflows): 1/(1+e) for x >= 0 and e/(1+e) for x < 0, which keeps
  // full relative accuracy down to the subnormal results of very negative x.
  Value* e = emit_exp_f32(b, b.CreateFNeg(fabs(b, x)));
  Value* num = b.CreateSelect(b.CreateFCmpOLT(x, f32(b, 0.0)), e, f32(b, 1.0));
  return b.CreateFDiv(num, b.CreateFAdd(e, f32(b, 1.0)));
}

Value* emit_gelu_f32(llvm::IRBuilderBase& b, Value* x) {
  Value* x3 = b.CreateFMul(b.CreateFMul(x, x), x);
  Value* u = b.CreateFMul(f32(b, 0.7978845608028654), fma(b, x3, f32(b, 0.044715), x));
  Value* res = b.CreateFMul(x, emit_sigmoid_f32(b, b.CreateFAdd(u, u)));
  // -inf * 0 would be NaN; the limit is 0.
  Value* neg_inf = b.CreateFCmpOEQ(x, f32(b, -std::numeric_limits<double>::infinity()));
  return b.CreateSelect(neg_inf, f32(b, -0.0), res);
}

Value* emit_erf_f32(llvm::IRBuilderBase& b, Value* x) {
  // |x| < 1: x*P(x^2). 1 <= |x| < 4: 1 - exp(Q(|x| - 2.5)) with Q fitting log(erfc). Beyond: 1.
  Value* ax = fabs(b, x);
  Value* t = b.CreateFMul(x, x);
  Value* ps =
      poly(b, t,
           {7.889067984991729e-05, -0.000802082585333231, 0.0051895336090699426,
            -0.026854443698137987, 0.11283600155414372, -0.3761262713419182, 1.128379165913508});
  Value* small = b.CreateFMul(ps, x);
  Value* u = b.CreateFSub(clamp(b, ax, 1.0, 4.0), f32(b, 2.5));
  Value* q = poly(b, u,
                  {1.599871886298054e-06, -1.3301744227379043e-05, 7.74546993655746e-05,
                   -0.00042017299232839373, 0.002165081800055364, -0.010858487486504191,
                   -0.9438936084618538, -5.352680688478832, -7.806815278977015});
  Value* large = b.CreateFSub(f32(b, 1.0), emit_exp_f32(b, q));
  large = b.CreateSelect(b.CreateFCmpOLT(ax, f32(b, 4.0)), large, f32(b, 1.0));
  large = b.CreateBinaryIntrinsic(llvm::Intrinsic::copysign, large, x);
  Value* res = b.CreateSelect(b.CreateFCmpOLT(ax, f32(b, 1.0)), small, large);
  return b.CreateSelect(is_nan(b, x), x, res);
}

namespace {

// Bits of 4/pi, 32 at a time from bit 0 (the integer part) on, each entry starting 8 bits after
// the one before: entry k holds bits 8k-24 .. 8k+7 (the first three zero-padded). reduce_large
// reads the three entries a quarter-period's worth of an exponent's product needs.
constexpr uint32_t kFourOverPiBits[24] = {
    0x000000a2, 0x0000a2f9, 0x00a2f983, 0xa2f9836e, 0xf9836e4e, 0x836e4e44, 0x6e4e4415, 0x4e441529,
    0x441529fc, 0x1529fc27, 0x29fc2757, 0xfc2757d1, 0x2757d1f5, 0x57d1f534, 0xd1f534dd, 0xf534ddc0,
    0x34ddc0db, 0xddc0db62, 0xc0db6295, 0xdb629599, 0x6295993c, 0x95993c43, 0x993c4390, 0x3c439041};

// Below this |x| the three-part Cody-Waite reduction is accurate (~1.5e-7 up to 1e5); at and
// above it the exact reduction takes over.
constexpr double kExactReductionFrom = 8192.0;

struct Quadrant {
  Value* j;  // octant (even), i32
  Value* r;  // |x| - j*pi/4, in [-pi/4, pi/4], f32
};

// |x| = j*pi/4 + r with pi/4 split in three parts (Cody-Waite), for |x| < kExactReductionFrom.
Quadrant reduce_cody_waite(llvm::IRBuilderBase& b, Value* ax) {
  Value* j = b.CreateIntrinsic(llvm::Intrinsic::fptosi_sat, {b.getInt32Ty(), b.getFloatTy()},
                               {b.CreateFMul(ax, f32(b, 1.27323954473516))});
  j = b.CreateAnd(b.CreateAdd(j, i32(b, 1)), i32(b, ~1));
  Value* y = b.CreateSIToFP(j, b.getFloatTy());
  Value* r = fma(b, y, f32(b, -0.78515625), ax);
  r = fma(b, y, f32(b, -2.4187564849853515625e-4), r);
  r = fma(b, y, f32(b, -3.77489497744594108e-8), r);
  return {j, r};
}

// The same for any finite |x| >= 2 exactly (Payne-Hanek): |x| = m * 2^e with a 24-bit m; the
// product m * 4/pi needs only the bits of 4/pi from e on (those before give whole periods), 96 of
// them, so three 32-bit entries and integer multiplies give |x| / (pi/2) as a 2.62 fixed-point
// number, rounded to the nearest quadrant n; the remainder goes to f64 and times pi/2 is r.
// Every lane computes it (no branch keeps the loop vectorizable); its table index stays in range
// for every input.
Quadrant reduce_large(llvm::IRBuilderBase& b, Value* ax) {
  llvm::Module* m = b.GetInsertBlock()->getModule();
  llvm::LLVMContext& ctx = b.getContext();
  llvm::GlobalVariable* table = m->getNamedGlobal("kiln_four_over_pi_bits");
  if (!table) {
    llvm::Constant* bits =
        llvm::ConstantDataArray::get(ctx, llvm::ArrayRef<uint32_t>(kFourOverPiBits));
    table =
        new llvm::GlobalVariable(*m, bits->getType(), /*isConstant=*/true,
                                 llvm::GlobalValue::PrivateLinkage, bits, "kiln_four_over_pi_bits");
  }
  llvm::Type* i32t = b.getInt32Ty();
  llvm::Type* i64t = b.getInt64Ty();
  Value* xi = b.CreateBitCast(ax, i32t);
  Value* first = b.CreateAnd(b.CreateLShr(xi, 26), i32(b, 15));  // by the exponent's top bits
  Value* shift = b.CreateAnd(b.CreateLShr(xi, 23), i32(b, 7));   // and its low three
  Value* mant = b.CreateOr(b.CreateAnd(xi, i32(b, 0xffffff)), i32(b, 0x800000));
  mant = b.CreateShl(mant, shift);  // < 2^31
  auto entry = [&](int offset) {
    Value* at = b.CreateZExt(b.CreateAdd(first, i32(b, offset)), i64t);
    Value* p = b.CreateInBoundsGEP(table->getValueType(), table, {b.getInt64(0), at});
    return b.CreateLoad(i32t, p);
  };
  Value* m64 = b.CreateZExt(mant, i64t);
  Value* lo32 = b.CreateZExt(b.CreateMul(mant, entry(0)), i64t);  // only its low 32 bits count
  Value* mid = b.CreateMul(m64, b.CreateZExt(entry(4), i64t));
  Value* low = b.CreateMul(m64, b.CreateZExt(entry(8), i64t));
  Value* fixed = b.CreateAdd(b.CreateOr(b.CreateLShr(low, 32), b.CreateShl(lo32, 32)), mid);
  Value* n = b.CreateLShr(b.CreateAdd(fixed, b.getInt64(uint64_t{1} << 61)), 62);  // 0..3
  Value* rest = b.CreateSub(fixed, b.CreateShl(n, 62));  // in [-2^61, 2^61): +-pi/4
  Value* rd = b.CreateFMul(b.CreateSIToFP(rest, b.getDoubleTy()),
                           llvm::ConstantFP::get(b.getDoubleTy(), 0x1.921FB54442D18p-62));
  return {b.CreateShl(b.CreateTrunc(n, i32t), 1), b.CreateFPTrunc(rd, b.getFloatTy())};
}

struct Reduced {
  Value* j;      // octant (even), i32
  Value* sin_r;  // sin of the reduced argument
  Value* cos_r;  // cos of the reduced argument
};

// |x| = j*pi/4 + r, |r| <= pi/4: Cody-Waite below kExactReductionFrom, exact above, so sin and cos
// stay within ~1.5e-7 (relative to max(|result|, 1e-3)) at every finite x, 3e38 as well.
Reduced reduce_quarter_pi(llvm::IRBuilderBase& b, Value* ax) {
  const Quadrant near = reduce_cody_waite(b, ax);
  const Quadrant far = reduce_large(b, ax);
  Value* large = b.CreateFCmpOGE(ax, f32(b, kExactReductionFrom));
  Value* j = b.CreateSelect(large, far.j, near.j);
  Value* r = b.CreateSelect(large, far.r, near.r);
  Value* z = b.CreateFMul(r, r);
  Value* ps = poly(b, z, {-1.9515295891E-4, 8.3321608736E-3, -1.6666654611E-1});
  Value* sin_r = fma(b, b.CreateFMul(ps, z), r, r);
  Value* pc = poly(b, z, {2.443315711809948E-005, -1.388731625493765E-003, 4.166664568298827E-002});
  Value* cos_r = fma(b, b.CreateFMul(pc, z), z, fma(b, z, f32(b, -0.5), f32(b, 1.0)));
  return {j, sin_r, cos_r};
}

Value* bit_set(llvm::IRBuilderBase& b, Value* j, int32_t mask) {
  return b.CreateICmpNE(b.CreateAnd(j, i32(b, mask)), i32(b, 0));
}

Value* finish_trig(llvm::IRBuilderBase& b, Value* x, Value* res) {
  Value* is_inf = b.CreateFCmpOEQ(fabs(b, x), f32(b, std::numeric_limits<double>::infinity()));
  res = b.CreateSelect(is_inf, f32(b, std::nan("")), res);
  return b.CreateSelect(is_nan(b, x), x, res);
}

}  // namespace

Value* emit_sin_f32(llvm::IRBuilderBase& b, Value* x) {
  // Octants 0,2,4,6 of |x|: sin r, cos r, -sin r, -cos r; sin is odd: a negative x flips it.
  Reduced red = reduce_quarter_pi(b, fabs(b, x));
  Value* res = b.CreateSelect(bit_set(b, red.j, 2), red.cos_r, red.sin_r);
  // The sign bit, not x < 0: sin(-0) is -0.
  Value* bits = b.CreateBitCast(x, x->getType()->getWithNewType(b.getInt32Ty()));
  Value* negative = b.CreateICmpSLT(bits, llvm::Constant::getNullValue(bits->getType()));
  Value* negate = b.CreateXor(bit_set(b, red.j, 4), negative);
  res = b.CreateSelect(negate, b.CreateFNeg(res), res);
  return finish_trig(b, x, res);
}

Value* emit_cos_f32(llvm::IRBuilderBase& b, Value* x) {
  // Octants 0,2,4,6: cos r, -sin r, -cos r, sin r.
  Reduced red = reduce_quarter_pi(b, fabs(b, x));
  Value* res = b.CreateSelect(bit_set(b, red.j, 2), red.sin_r, red.cos_r);
  Value* negate = bit_set(b, b.CreateAdd(red.j, i32(b, 2)), 4);
  res = b.CreateSelect(negate, b.CreateFNeg(res), res);
  return finish_trig(b, x, res);
}

}  // namespace kiln::codegen::cpu
