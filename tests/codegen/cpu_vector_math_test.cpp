// Accuracy of the inline f32 math (codegen/cpu/vector_math.cpp) through compiled kernels: sweeps
// of 100k points against the double-precision libm result, and the special values.
#include <gtest/gtest.h>

#include <fmt/format.h>
#include <llvm/AsmParser/Parser.h>
#include <llvm/ExecutionEngine/Orc/LLJIT.h>
#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/Instructions.h>
#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/Module.h>
#include <llvm/Support/SourceMgr.h>
#include <llvm/Support/raw_ostream.h>
#include <bit>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <limits>

#include "codegen/cpu/llvm_optimizer.h"
#include "codegen/cpu/vector_math.h"
#include "tests/codegen/cpu_test_support.h"

namespace kiln::codegen::testing {
namespace {

using kir::Alu;
constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// out = op(x) over f32 inputs.
std::vector<double> apply(Alu op, const std::vector<double>& x) {
  const int64_t n = static_cast<int64_t>(x.size());
  auto arena = std::make_shared<kir::ExprArena>();
  const kir::Expr* i = arena->var(0);
  kir::Kernel k =
      make_kernel(fmt::format("math_{}", kir::alu_name(op)),
                  {in_param(DType::f32, {n}), out_param(DType::f32, {n})}, {n}, arena,
                  {{1, i, arena->alu(op, DType::f32, {arena->load(0, DType::f32, i)})}});
  std::vector<Buffer> res = run_kernel(k, {Buffer(DType::f32, x)});
  std::vector<double> out;
  if (res.size() == 2)
    for (size_t j = 0; j < x.size(); ++j) out.push_back(res[1].get(j));
  return out;
}

std::vector<double> linspace(double lo, double hi, int n) {
  std::vector<double> v;
  for (int j = 0; j < n; ++j) v.push_back(static_cast<float>(lo + (hi - lo) * j / (n - 1)));
  return v;
}

double gelu_ref(double x) {
  const long double lx = x;
  const long double u =
      std::sqrt(2 / static_cast<long double>(M_PI)) * (lx + 0.044715L * lx * lx * lx);
  return static_cast<double>(lx / (1 + std::exp(-2 * u)));
}

struct Sweep {
  Alu op;
  std::function<double(double)> ref;
  double lo, hi;
  double floor;  // errors are relative to max(|ref|, floor)
  double max_rel;
};

class CpuVectorMathSweep : public ::testing::TestWithParam<Sweep> {};

TEST_P(CpuVectorMathSweep, MaxRelativeErrorOver100kPoints) {
  const Sweep& s = GetParam();
  const std::vector<double> x = linspace(s.lo, s.hi, 100000);
  const std::vector<double> got = apply(s.op, x);
  ASSERT_EQ(got.size(), x.size());
  double worst = 0, worst_x = 0, sum = 0;
  for (size_t j = 0; j < x.size(); ++j) {
    const double e = rel_error(got[j], s.ref(x[j]), std::max(s.floor, 1.1754943508222875e-38));
    sum += e;
    if (e > worst) worst = e, worst_x = x[j];
  }
  EXPECT_LE(worst, s.max_rel) << kir::alu_name(s.op) << " worst at x=" << worst_x;
  RecordProperty("max_rel_error", fmt::format("{:.3g}", worst));
  std::printf("%s on [%g, %g]: max rel error %.3g at x=%.9g, mean %.3g\n",
              std::string(kir::alu_name(s.op)).c_str(), s.lo, s.hi, worst, worst_x, sum / x.size());
  EXPECT_LE(sum / x.size(), s.max_rel <= 1e-6 ? 2e-7 : s.max_rel)
      << kir::alu_name(s.op) << " mean relative error";
}

INSTANTIATE_TEST_SUITE_P(
    Functions, CpuVectorMathSweep,
    ::testing::Values(
        Sweep{Alu::Exp, [](double x) { return std::exp(x); }, -103, 88.7, 0, 1e-6},
        Sweep{Alu::Exp, [](double x) { return std::exp(x); }, -1, 1, 0, 1e-6},
        Sweep{Alu::Log, [](double x) { return std::log(x); }, 1e-6, 10, 0, 1e-6},
        Sweep{Alu::Log, [](double x) { return std::log(x); }, 0.5, 2, 0, 1e-6},
        Sweep{Alu::Log, [](double x) { return std::log(x); }, 1, 3e38, 0, 1e-6},
        Sweep{Alu::Tanh, [](double x) { return std::tanh(x); }, -10, 10, 0, 1e-6},
        Sweep{Alu::Tanh, [](double x) { return std::tanh(x); }, -1, 1, 0, 1e-6},
        Sweep{Alu::Sigmoid, [](double x) { return 1 / (1 + std::exp(-x)); }, -87, 30, 0, 1e-6},
        Sweep{Alu::Gelu, gelu_ref, -3, 10, 0, 1e-6},
        // Below -3 gelu(x) ~ x*exp(2u) is ill-conditioned (d log gelu / d log x ~ 2u*3 > 50):
        // one f32 rounding of u alone costs |2u| ulp, so the bound grows with |2u| (66 at -9).
        Sweep{Alu::Gelu, gelu_ref, -9, -3, 0, 1.5e-5}, Sweep{Alu::Gelu, gelu_ref, -1, 1, 0, 1e-6},
        Sweep{Alu::Erf, [](double x) { return std::erf(x); }, -5, 5, 0, 1e-6},
        Sweep{Alu::Erf, [](double x) { return std::erf(x); }, -0.01, 0.01, 0, 1e-6},
        // sin/cos: near their zeros the f32 argument reduction limits the relative error, so it
        // is measured against max(|ref|, 1e-3) (an absolute error of 1e-9 there).
        Sweep{Alu::Sin, [](double x) { return std::sin(x); }, -100, 100, 1e-3, 1e-6},
        Sweep{Alu::Sin, [](double x) { return std::sin(x); }, -0.5, 0.5, 0, 1e-6},
        Sweep{Alu::Sin, [](double x) { return std::sin(x); }, -1e4, 1e4, 1e-3, 1e-6},
        Sweep{Alu::Cos, [](double x) { return std::cos(x); }, -100, 100, 1e-3, 1e-6},
        Sweep{Alu::Cos, [](double x) { return std::cos(x); }, -1.5, 1.5, 0, 1e-6},
        // Past 8192 the reduction is exact (Payne-Hanek): the same bound up to f32's largest
        // value (sin(1e9) was 13.3, and sin(1e10) inf).
        Sweep{Alu::Sin, [](double x) { return std::sin(x); }, 8000, 9000, 1e-3, 1e-6},
        Sweep{Alu::Sin, [](double x) { return std::sin(x); }, -1e9, 1e9, 1e-3, 1e-6},
        Sweep{Alu::Sin, [](double x) { return std::sin(x); }, -3.4e38, 3.4e38, 1e-3, 1e-6},
        Sweep{Alu::Cos, [](double x) { return std::cos(x); }, -1e9, 1e9, 1e-3, 1e-6},
        Sweep{Alu::Cos, [](double x) { return std::cos(x); }, 1e20, 3.4e38, 1e-3, 1e-6}),
    [](const ::testing::TestParamInfo<Sweep>& info) {
      return fmt::format("{}_{}", kir::alu_name(info.param.op), info.index);
    });

struct Special {
  Alu op;
  double x, want;
};

TEST(CpuVectorMath, SpecialValues) {
  const Special cases[] = {
      {Alu::Exp, -kInf, 0},
      {Alu::Exp, kInf, kInf},
      {Alu::Exp, 89, kInf},
      {Alu::Exp, 1000, kInf},
      {Alu::Exp, -200, 0},
      {Alu::Exp, kNaN, kNaN},
      {Alu::Exp, 0, 1},
      {Alu::Exp, -0.0, 1},
      {Alu::Log, 0, -kInf},
      {Alu::Log, -0.0, -kInf},
      {Alu::Log, -1, kNaN},
      {Alu::Log, -kInf, kNaN},
      {Alu::Log, kInf, kInf},
      {Alu::Log, kNaN, kNaN},
      {Alu::Log, 1, 0},
      {Alu::Log, 1e-45, std::log(1.401298464324817e-45)},
      {Alu::Log, 1e-40, std::log(static_cast<double>(1e-40f))},
      {Alu::Tanh, kInf, 1},
      {Alu::Tanh, -kInf, -1},
      {Alu::Tanh, 20, 1},
      {Alu::Tanh, -50, -1},
      {Alu::Tanh, kNaN, kNaN},
      {Alu::Tanh, -0.0, -0.0},
      {Alu::Sigmoid, kInf, 1},
      {Alu::Sigmoid, -kInf, 0},
      {Alu::Sigmoid, kNaN, kNaN},
      {Alu::Sigmoid, -100, 1 / (1 + std::exp(100.0))},
      {Alu::Gelu, kInf, kInf},
      {Alu::Gelu, -kInf, 0},
      {Alu::Gelu, kNaN, kNaN},
      {Alu::Gelu, -1e20, 0},
      {Alu::Gelu, 1e20, 1e20},
      {Alu::Erf, kInf, 1},
      {Alu::Erf, -kInf, -1},
      {Alu::Erf, 10, 1},
      {Alu::Erf, kNaN, kNaN},
      {Alu::Erf, 0, 0},
      {Alu::Sin, kInf, kNaN},
      {Alu::Sin, -kInf, kNaN},
      {Alu::Sin, kNaN, kNaN},
      {Alu::Sin, 0, 0},
      {Alu::Cos, kInf, kNaN},
      {Alu::Cos, kNaN, kNaN},
      {Alu::Cos, 0, 1},
  };
  std::vector<double> x;
  for (const Special& c : cases) x.push_back(c.x);
  for (const Special& c : cases) {
    const std::vector<double> got = apply(c.op, {c.x});
    ASSERT_EQ(got.size(), 1u);
    EXPECT_LE(rel_error(got[0], static_cast<float>(c.want)), 1e-6)
        << kir::alu_name(c.op) << "(" << c.x << ") = " << got[0] << ", want " << c.want;
  }
}

// `value` splat over `lanes` lanes: "<i32 1, i32 1, ...>".
std::string splat(unsigned lanes, const std::string& value) {
  std::vector<std::string> e(lanes, value);
  return fmt::format("<{}>", fmt::join(e, ", "));
}

// The instructions of the scaling p * 2^h * 2^(n - h) (h = n >> 1) of a vectorized exp, as O3
// leaves it, with n converted from the floored float %f, its result %m2. `lanes` wide.
std::string two_step_scaling(unsigned lanes) {
  const std::string f = fmt::format("<{} x float>", lanes), i = fmt::format("<{} x i32>", lanes);
  return fmt::format(
      "  %n = fptosi {0} %f to {1}\n"
      "  %h = ashr {1} %n, {2}\n"
      "  %r = sub {1} %n, %h\n"
      "  %s1 = shl {1} %h, {3}\n"
      "  %b1 = add {1} %s1, {4}\n"
      "  %e1 = bitcast {1} %b1 to {0}\n"
      "  %s2 = shl {1} %r, {3}\n"
      "  %b2 = add {1} %s2, {4}\n"
      "  %e2 = bitcast {1} %b2 to {0}\n"
      "  %m1 = fmul {0} %p, %e1\n"
      "  %m2 = fmul {0} %m1, %e2\n",
      f, i, splat(lanes, "i32 1"), splat(lanes, "i32 23"),
      splat(lanes, fmt::format("i32 {}", 127 << 23)));
}

// That scaling as a function of %p and %f.
std::string two_step_scaling_ir(unsigned lanes, const std::string& features) {
  const std::string f = fmt::format("<{} x float>", lanes);
  return fmt::format(
      "define {0} @scale({0} %p, {0} %f) #0 {{\n"
      "{1}"
      "  ret {0} %m2\n"
      "}}\n"
      "attributes #0 = {{ \"target-features\"=\"{2}\" }}\n",
      f, two_step_scaling(lanes), features);
}

// exp's scaling by 2^n becomes one vscalefps where the target features have it: 16 lanes with
// AVX-512F, 8 with AVX-512VL too; nothing changes for AVX2 or for 8 lanes without VL. The IR is
// only rewritten, never run, so this holds on every host.
TEST(CpuVectorMath, ExpScalesWithVscalefWhereTheTargetHasIt) {
  struct Case {
    unsigned lanes;
    const char* features;
    const char* want;  // the intrinsic, or null for none
  };
  for (const Case& c : {Case{16, "+avx2,+fma,+avx512f,+avx512vl", "llvm.x86.avx512.mask.scalef.ps.512"},
                        Case{8, "+avx2,+fma,+avx512f,+avx512vl", "llvm.x86.avx512.mask.scalef.ps.256"},
                        Case{8, "+avx2,+fma,+avx512f", nullptr}, Case{8, "+avx2,+fma", nullptr},
                        Case{16, "+avx2,+fma", nullptr}}) {
    llvm::LLVMContext ctx;
    llvm::SMDiagnostic diag;
    const std::string text = two_step_scaling_ir(c.lanes, c.features);
    std::unique_ptr<llvm::Module> m = llvm::parseAssemblyString(text, diag, ctx);
    ASSERT_TRUE(m) << diag.getMessage().str() << "\n" << text;
    llvm::Function* fn = m->getFunction("scale");
    const bool rewrote = cpu::scale_exp_with_vscalef(*fn);
    std::string ir;
    llvm::raw_string_ostream os(ir);
    fn->print(os);
    const std::string what = fmt::format("{} lanes, {}\n{}", c.lanes, c.features, ir);
    EXPECT_EQ(rewrote, c.want != nullptr) << what;
    if (c.want) {
      EXPECT_NE(ir.find(c.want), std::string::npos) << what;
      // Scaled by the floored float itself; the halves and the multiplies are gone.
      EXPECT_NE(ir.find("(<" + std::to_string(c.lanes) + " x float> %p, <" +
                        std::to_string(c.lanes) + " x float> %f"),
                std::string::npos)
          << what;
      EXPECT_EQ(ir.find("ashr"), std::string::npos) << what;
      EXPECT_EQ(ir.find("fmul"), std::string::npos) << what;
    } else {
      EXPECT_EQ(ir.find("scalef"), std::string::npos) << what;
      EXPECT_NE(ir.find("%m2 = fmul"), std::string::npos) << what;
    }
  }
}

// exp's whole tail over 16 lanes of x as O3 leaves it: xc = `clamp` of x (a select), f its floored
// fma, p = `p_op` of xc, the two-step scaling of p by 2^f, then select(uno(x, `uno_rhs`),
// `nan_arm`, scaled).
std::string exp_tail_ir(const std::string& clamp, const std::string& p_op,
                        const std::string& uno_rhs, const std::string& nan_arm) {
  const std::string f = "<16 x float>";
  return fmt::format(
      "define {0} @tail({0} %x) #0 {{\n"
      "  {1}\n"
      "  %t = call {0} @llvm.fmuladd.v16f32({0} %xc, {0} {2}, {0} {3})\n"
      "  %f = call {0} @llvm.floor.v16f32({0} %t)\n"
      "  %p = {4}\n"
      "{5}"
      "  %nan = fcmp uno {0} %x, {6}\n"
      "  %res = select <16 x i1> %nan, {0} {7}, {0} %m2\n"
      "  ret {0} %res\n"
      "}}\n"
      "declare {0} @llvm.fmuladd.v16f32({0}, {0}, {0})\n"
      "declare {0} @llvm.floor.v16f32({0})\n"
      "attributes #0 = {{ \"target-features\"=\"+avx2,+fma,+avx512f,+avx512vl\" }}\n",
      f, clamp, splat(16, "float 0x3FF7154760000000"), splat(16, "float 5.000000e-01"), p_op,
      two_step_scaling(16), uno_rhs, nan_arm);
}

// The rewrite to vscalefps also drops exp's NaN select, select(x is NaN, p, scaled), where a NaN x
// provably makes p NaN, since vscalefps returns a NaN p itself: through a clamp that keeps a NaN
// (an ordered compare that a NaN makes false, or an unordered one that it makes true, choosing the
// NaN) and arithmetic without nnan. Where a NaN may not reach p, or the select's NaN arm is not p,
// the select stays.
TEST(CpuVectorMath, VscalefDropsExpsNanSelectOnlyWhereANanXReachesP) {
  const std::string lo =
      "<float -1.040000e+02, float -1.040000e+02, float -1.040000e+02, "
      "float -1.040000e+02, float -1.040000e+02, float -1.040000e+02, "
      "float -1.040000e+02, float -1.040000e+02, float -1.040000e+02, "
      "float -1.040000e+02, float -1.040000e+02, float -1.040000e+02, "
      "float -1.040000e+02, float -1.040000e+02, float -1.040000e+02, "
      "float -1.040000e+02>";
  const auto clamp = [&](const char* pred, bool x_first) {
    return fmt::format(
        "%c = fcmp {} <16 x float> %x, {}\n  %xc = select <16 x i1> %c, <16 x float> {}", pred, lo,
        x_first ? "%x, <16 x float> " + lo : lo + ", <16 x float> %x");
  };
  const std::string keep = clamp("olt", false);   // x < lo ? lo : x: a NaN x stays
  const std::string drop = clamp("ogt", true);    // x > lo ? x : lo: a NaN x becomes lo
  const std::string keep_u = clamp("uge", true);  // x >= lo or NaN ? x : lo: a NaN x stays
  const std::string p = "fadd <16 x float> %xc, %f";
  struct Case {
    std::string clamp, p_op, uno_rhs, nan_arm;
    bool dropped;
    const char* what;
  };
  for (const Case& c : {
           Case{keep, p, "%x", "%p", true, "NaN-keeping clamp, uno(x, x)"},
           Case{keep, p, "zeroinitializer", "%p", true, "uno(x, 0) as instcombine writes it"},
           Case{keep_u, p, "%x", "%p", true, "the clamp with its compare inverted to unordered"},
           Case{keep,
                "call <16 x float> @llvm.fmuladd.v16f32(<16 x float> %f, <16 x float> %f, "
                "<16 x float> %xc)",
                "%x", "%p", true, "p an fma of the clamped x"},
           Case{drop, p, "%x", "%p", false, "a clamp that turns a NaN into lo"},
           Case{keep, "fadd nnan <16 x float> %xc, %f", "%x", "%p", false, "p computed nnan"},
           Case{keep, "fadd <16 x float> zeroinitializer, zeroinitializer", "%x", "%p", false,
                "p not computed from x"},
           Case{keep, p, "%x", "%x", false, "the NaN arm x itself, not p"},
       }) {
    llvm::LLVMContext ctx;
    llvm::SMDiagnostic diag;
    const std::string text = exp_tail_ir(c.clamp, c.p_op, c.uno_rhs, c.nan_arm);
    std::unique_ptr<llvm::Module> m = llvm::parseAssemblyString(text, diag, ctx);
    ASSERT_TRUE(m) << diag.getMessage().str() << "\n" << text;
    llvm::Function* fn = m->getFunction("tail");
    ASSERT_TRUE(cpu::scale_exp_with_vscalef(*fn)) << c.what;
    std::string ir;
    llvm::raw_string_ostream os(ir);
    fn->print(os);
    const std::string what = fmt::format("{}\n{}", c.what, ir);
    EXPECT_NE(ir.find("scalef.ps.512"), std::string::npos) << what;
    const auto* ret = llvm::cast<llvm::ReturnInst>(fn->back().getTerminator());
    const auto* call = llvm::dyn_cast<llvm::CallInst>(ret->getReturnValue());
    const bool returns_scaled = call && call->getCalledFunction() &&
                                call->getCalledFunction()->getName().contains("scalef");
    EXPECT_EQ(returns_scaled, c.dropped) << what;
    EXPECT_EQ(ir.find("%res = select <16 x i1> %nan") != std::string::npos, !c.dropped) << what;
  }
}

// With vscalefps (the host's AVX-512 code) and without it (x86-64-v3), exp gives the same bits at
// every input, across the subnormal results below -87.3, the overflow near 88.72 and the special
// values: the one rounding of p * 2^n is the same either way.
TEST(CpuVectorMath, ExpIsTheSameBitsWithAndWithoutVscalef) {
  auto native = CpuBackend::create("native");
  ASSERT_TRUE(native.has_value()) << native.error().message;
  if ((*native)->cpu_features().find("+avx512f") == std::string::npos)
    GTEST_SKIP() << "this host has no AVX-512: only the two-step scaling runs here";
  auto v3 = CpuBackend::create("x86-64-v3");
  ASSERT_TRUE(v3.has_value()) << v3.error().message;
  std::vector<float> x;
  for (double v = -105; v < 90; v += 0.0009765625 * 3.1) x.push_back(static_cast<float>(v));
  for (float v = -87.5f; v > -104.f; v = std::nextafter(v, -200.f) - 1e-4f) x.push_back(v);
  for (float v = 88.5f; v < 88.8f; v = std::nextafter(v, 100.f) + 1e-5f) x.push_back(v);
  for (float v : {0.f, -0.f, std::numeric_limits<float>::infinity(),
                  -std::numeric_limits<float>::infinity(), std::numeric_limits<float>::quiet_NaN(),
                  std::numeric_limits<float>::denorm_min(), -1e-30f, 1e-30f})
    x.push_back(v);
  // NaNs of either sign, quiet and signaling, with payloads: exp gives x quieted (as glibc's expf).
  const std::vector<uint32_t> nans = {0x7fc00000u, 0xffc00000u, 0x7fc12345u, 0xffd54321u,
                                      0x7f812345u, 0xff800001u, 0x7fbfffffu};
  for (uint32_t bits : nans) x.push_back(std::bit_cast<float>(bits));
  const int64_t n = static_cast<int64_t>(x.size());
  auto arena = std::make_shared<kir::ExprArena>();
  const kir::Expr* i = arena->var(0);
  kir::Kernel k = make_kernel("exp_bits", {in_param(DType::f32, {n}), out_param(DType::f32, {n})},
                              {n}, arena,
                              {{1, i, arena->alu(Alu::Exp, DType::f32, {arena->load(0, DType::f32, i)})}});
  auto run = [&](CpuBackend& backend, std::string* ir) {
    std::vector<float> out(x.size());
    auto art = backend.compile(k, {});
    EXPECT_TRUE(art.has_value()) << (art ? "" : art.error().message);
    if (!art) return out;
    *ir = (*art)->llvm_ir;
    void* args[] = {x.data(), out.data()};
    (*art)->fn(args, 0, (*art)->outer_extent);
    return out;
  };
  std::string ir_native, ir_v3;
  const std::vector<float> a = run(**native, &ir_native), b = run(**v3, &ir_v3);
  EXPECT_NE(ir_native.find("scalef"), std::string::npos) << "no vscalefps in the AVX-512 code";
  EXPECT_EQ(ir_v3.find("scalef"), std::string::npos);
  int subnormal = 0;
  for (size_t j = 0; j < x.size(); ++j) {
    ASSERT_EQ(std::bit_cast<uint32_t>(a[j]), std::bit_cast<uint32_t>(b[j]))
        << "exp(" << x[j] << "): " << a[j] << " with vscalefps, " << b[j] << " without";
    subnormal += std::fpclassify(a[j]) == FP_SUBNORMAL;
  }
  for (size_t j = x.size() - nans.size(); j < x.size(); ++j)
    EXPECT_EQ(std::bit_cast<uint32_t>(a[j]), nans[j - (x.size() - nans.size())] | 0x00400000u)
        << "exp of the NaN " << std::hex << nans[j - (x.size() - nans.size())];
  EXPECT_GT(subnormal, 1000) << "the sweep should reach the subnormal results";
}

// exp for x <= 0 (attention's softmax, codegen/cpu/vector_math.h): within 1e-6 of exp from -86.5
// to 0 (the results down to 2^-124, all normal), 0 below -86.5 and at -inf, NaN for NaN, exactly
// 1 at both zeros. A scalar function of its IR alone, jitted for this host.
TEST(CpuVectorMath, ExpOfNonPositiveArgumentsMatchesExp) {
  ASSERT_TRUE(CpuBackend::create("native").has_value());  // initializes the native target
  auto ctx = std::make_unique<llvm::LLVMContext>();
  auto m = std::make_unique<llvm::Module>("exp_nonpositive", *ctx);
  llvm::IRBuilder<> b(*ctx);
  auto* fn =
      llvm::Function::Create(llvm::FunctionType::get(b.getFloatTy(), {b.getFloatTy()}, false),
                             llvm::Function::ExternalLinkage, "exp_nonpositive", *m);
  b.SetInsertPoint(llvm::BasicBlock::Create(*ctx, "entry", fn));
  b.CreateRet(cpu::emit_exp_nonpositive_f32(b, fn->getArg(0)));
  auto jit = llvm::orc::LLJITBuilder().create();
  ASSERT_TRUE(static_cast<bool>(jit)) << llvm::toString(jit.takeError());
  ASSERT_FALSE((*jit)->addIRModule(llvm::orc::ThreadSafeModule(std::move(m), std::move(ctx))));
  auto sym = (*jit)->lookup("exp_nonpositive");
  ASSERT_TRUE(static_cast<bool>(sym)) << llvm::toString(sym.takeError());
  auto* f = sym->toPtr<float(float)>();
  double worst = 0, worst_x = 0;
  for (const double v : linspace(-86.5, 0, 200000)) {
    const float x = static_cast<float>(v);
    const double e = rel_error(f(x), std::exp(static_cast<double>(x)));
    if (e > worst) worst = e, worst_x = x;
  }
  EXPECT_LE(worst, 1e-6) << "worst at x=" << worst_x;
  std::printf("exp on [-86.5, 0] (x <= 0 only): max rel error %.3g at x=%.9g\n", worst, worst_x);
  for (float x : {-86.6f, -100.f, -1e30f, -std::numeric_limits<float>::infinity()})
    EXPECT_EQ(std::bit_cast<uint32_t>(f(x)), 0u) << x;
  EXPECT_TRUE(std::isnan(f(std::numeric_limits<float>::quiet_NaN())));
  EXPECT_EQ(f(0.f), 1.f);
  EXPECT_EQ(f(-0.f), 1.f);
  EXPECT_EQ(f(-std::numeric_limits<float>::denorm_min()), 1.f);
}

}  // namespace
}  // namespace kiln::codegen::testing
