// Prelude helper functions of GPU source (conversions, math the dialect lacks, integer floor
// division, the bounds-check reporter) and the translation unit around a kernel body.
#include <fmt/format.h>

#include "codegen/gpu/dialect.h"
#include "kiln/error.h"

namespace kiln::codegen::gpu {

namespace {

// f32 -> f16 bits, round to nearest even, for GLSL (CUDA uses cvt.rn.f16.f32).
constexpr const char* kGlslF2h = R"(uint kiln_f2h_f32(float f) {
  uint u = floatBitsToUint(f);
  uint s = (u >> 16) & 0x8000u;
  uint a = u & 0x7fffffffu;
  if (a > 0x7f800000u) return s | 0x7e00u | ((a >> 13) & 0x3ffu);
  if (a >= 0x477ff000u) return s | 0x7c00u;
  if (a >= 0x38800000u) {
    uint r = a - 0x38000000u;
    return s | ((r + 0x0fffu + ((r >> 13) & 1u)) >> 13);
  }
  if (a <= 0x33000000u) return s;
  uint e = a >> 23;
  uint m = (a & 0x7fffffu) | 0x800000u;
  uint sh = 126u - e;
  uint r = m >> sh;
  uint rem = m & ((1u << sh) - 1u);
  uint half_ = 1u << (sh - 1u);
  if (rem > half_ || (rem == half_ && (r & 1u) != 0u)) r += 1u;
  return s | r;
}
)";

}  // namespace

// Memory conversions (f16, bf16) and saturating float -> int conversions.
std::string DialectText::conversion_helper(const std::string& name, DType t) {
  const std::string q = cuda() ? "__device__ __forceinline__ " : "";
  const std::string T = reg_type(t);
  const std::string U = reg_type(DType::u8);
  const std::string key = fmt::format("kiln_{}_{}", name, ir::dtype_name(t));
  if (name == "h2f")
    return fmt::format("{}float {}(unsigned short h) {{ float f; asm(\"cvt.f32.f16 %0, %1;\" : "
                       "\"=f\"(f) : \"h\"(h)); return f; }}\n", q, key);
  if (name == "f2h") {
    if (!cuda()) return kGlslF2h;
    return fmt::format("{}unsigned short {}(float f) {{ unsigned short h; asm(\"cvt.rn.f16.f32 "
                       "%0, %1;\" : \"=h\"(h) : \"f\"(f)); return h; }}\n", q, key);
  }
  if (name == "f2bf")
    return fmt::format(
        "{0}{1} {2}(float f) {{ {1} u = {3}; if ({4}) return (u >> 16) | 0x40u; "
        "return (u + 0x7fffu + ((u >> 16) & 1u)) >> 16; }}\n",
        q, U, key, float_to_bits("f"), is_nan("f"));
  if (name == "f2i32" || name == "f2i64") {  // saturating, NaN -> 0 (fptosi.sat)
    const bool w = name == "f2i64";
    const std::string R = w ? wide_i64_type() : "int";
    const std::string lim = w ? "9223372036854775808.0" : "2147483648.0";
    const std::string mx = w ? int_lit(DType::i64, INT64_MAX) : "2147483647";
    const std::string mn = w ? int_lit(DType::i64, INT64_MIN) : "(-2147483647 - 1)";
    const std::string L = t == DType::f64 ? (cuda() ? lim : lim + "LF") : (cuda() ? lim + "f" : lim);
    return fmt::format("{0}{1} {2}({3} x) {{ if ({4}) return {9}; if (x >= {5}) return {6}; if "
                       "(x <= -{5}) return {7}; return {8}; }}\n",
                       q, R, key, T, is_nan("x"), L, mx, mn, cast(R, "x"), cast(R, "0"));
  }
  return "";
}

// Float math the dialect lacks or defines differently from the cpu backend.
std::string DialectText::math_helper(const std::string& name, DType t) {
  const std::string q = cuda() ? "__device__ __forceinline__ " : "";
  const std::string T = reg_type(t);
  const std::string U = reg_type(DType::u8);
  const std::string key = fmt::format("kiln_{}_{}", name, ir::dtype_name(t));
  const std::string one = float_lit(t, 1.0), zero_ = float_lit(t, 0.0);
  if (name == "sincos" && !cuda()) {
    // GLSL's sin and cos below 8192; at and above it the cpu backend's exact reduction
    // (codegen/cpu/vector_math.cpp, reduce_large) in 32-bit integer words, then sin or cos of
    // the remainder (lavapipe gave exactly +-1 from 1e9 on). shift: 0 sin, 1 cos.
    return fmt::format(
        "float {0}(float x, int shift) {{\n"
        "  float ax = abs(x);\n"
        "  if (!(ax >= 8192.0)) return shift == 0 ? sin(x) : cos(x);\n"
        "  if (isinf(ax)) return uintBitsToFloat(0x7fc00000u);\n"
        "  const uint bits[24] = uint[24](0xa2u, 0xa2f9u, 0xa2f983u, 0xa2f9836eu, 0xf9836e4eu,\n"
        "    0x836e4e44u, 0x6e4e4415u, 0x4e441529u, 0x441529fcu, 0x1529fc27u, 0x29fc2757u,\n"
        "    0xfc2757d1u, 0x2757d1f5u, 0x57d1f534u, 0xd1f534ddu, 0xf534ddc0u, 0x34ddc0dbu,\n"
        "    0xddc0db62u, 0xc0db6295u, 0xdb629599u, 0x6295993cu, 0x95993c43u, 0x993c4390u,\n"
        "    0x3c439041u);\n"
        "  uint xi = floatBitsToUint(ax);\n"
        "  uint first = (xi >> 26) & 15u;\n"
        "  uint m = ((xi & 0xffffffu) | 0x800000u) << ((xi >> 23) & 7u);\n"
        "  uint lo0 = m * bits[first];\n"
        "  uint hi1, lo1, hi2, lo2, carry;\n"
        "  umulExtended(m, bits[first + 4u], hi1, lo1);\n"
        "  umulExtended(m, bits[first + 8u], hi2, lo2);\n"
        "  uint lo = uaddCarry(hi2, lo1, carry);\n"
        "  uint hi = lo0 + hi1 + carry;\n"
        "  uint n = (hi + 0x20000000u) >> 30;\n"
        "  hi -= n << 30;\n"
        "  bool neg = int(hi) < 0;\n"
        "  if (neg) {{ lo = ~lo + 1u; hi = ~hi + (lo == 0u ? 1u : 0u); }}\n"
        "  float r = (float(hi) * 4294967296.0 + float(lo)) * 3.4061215800865545e-19;\n"
        "  if (neg) r = -r;\n"
        "  int q = (int(n) + shift) & 3;\n"
        "  float s = sin(r), c = cos(r);\n"
        "  float v = q == 0 ? s : q == 1 ? c : q == 2 ? -s : -c;\n"
        "  return shift == 0 && x < 0.0 ? -v : v;\n"
        "}}\n",
        key);
  }
  if (name == "sigmoid")  // the cpu backend's stable form
    return fmt::format("{0}{1} {2}({1} x) {{ {1} e = {3}; return (x < {4} ? e : {5}) / ({5} + e); }}\n",
                       q, T, key, math("exp", t, "-" + math("abs", t, "x")), zero_, one);
  if (name == "gelu") {
    const std::string sig = helper("sigmoid", t);
    return fmt::format(
        "{0}{1} {2}({1} x) {{ if (x == -{6}) return -{3}; {1} u = {4} * (x + x * x * x * {5}); "
        "return x * {7}(u + u); }}\n",
        q, T, key, zero_, float_lit(t, 0.7978845608028654), float_lit(t, 0.044715),
        float_lit(t, INFINITY), sig);
  }
  if (name == "fmax" || name == "fmin") {
    // IEEE 754-2019 maximum / minimum (the cpu backend's llvm.maximum / llvm.minimum): a NaN
    // operand gives NaN; equal operands differ only as zeros, where -0 < +0, so the bits of the
    // maximum are a & b (the sign only when both have it) and of the minimum a | b.
    const bool mx = name == "fmax";
    std::string same;
    if (t == DType::f64)
      same = cuda()
                 ? fmt::format(
                       "__longlong_as_double(__double_as_longlong(a) {} __double_as_longlong(b))",
                       mx ? "&" : "|")
                 : fmt::format("packDouble2x32(unpackDouble2x32(a) {} unpackDouble2x32(b))",
                               mx ? "&" : "|");
    else
      same = bits_to_float(
          fmt::format("{} {} {}", float_to_bits("a"), mx ? "&" : "|", float_to_bits("b")));
    return fmt::format(
        "{0}{1} {2}({1} a, {1} b) {{ return ({3} || {4}) ? a + b : (a == b ? {5} : (a {6} b ? a : "
        "b)); }}\n",
        q, T, key, is_nan("a"), is_nan("b"), same, mx ? ">" : "<");
  }
  if (name == "tanh")  // GLSL: odd polynomial near 0, exp form elsewhere
    return fmt::format(
        "{0}float {1}(float x) {{ float a = abs(x); if (a < 0.125) {{ float x2 = x * x; return x "
        "+ x * x2 * (-0.333333333 + x2 * (0.133333333 - x2 * 0.0539682540)); }} if (a > 20.0) "
        "return sign(x); float e = exp(-2.0 * a); float r = (1.0 - e) / (1.0 + e); return x < "
        "0.0 ? -r : r; }}\n",
        q, key);
  if (name == "erf")  // GLSL: Taylor series near 0, Numerical Recipes' erfc elsewhere
    return fmt::format(
        "{0}float {1}(float x) {{ float z = abs(x); if (isnan(x)) return x; if (z < 0.5) {{ "
        "float x2 = x * x; return x * (1.1283791671 + x2 * (-0.3761263890 + x2 * (0.1128379167 + "
        "x2 * (-0.0268661706 + x2 * (0.0052239776 - x2 * 0.0008548327))))); }} float t = 1.0 / "
        "(1.0 + 0.5 * z); float r = t * exp(-z * z - 1.26551223 + t * (1.00002368 + t * "
        "(0.37409196 + t * (0.09678418 + t * (-0.18628806 + t * (0.27886807 + t * (-1.13520398 + "
        "t * (1.48851587 + t * (-0.82215223 + t * 0.17087277))))))))); return x >= 0.0 ? 1.0 - r "
        ": r - 1.0; }}\n",
        q, key);
  // Lavapipe's log and log2 of a subnormal are off by up to 15 (log(1e-45) gave -88.03 for
  // -103.28): one scaled into the normal range by 2^24 first. The same log2 serves pow.
  if (name == "log")
    return fmt::format(
        "{0}float {1}(float x) {{ return x > 0.0 && x < 1.17549435e-38 ? log(x * 16777216.0) - "
        "16.635532333438687 : log(x); }}\n",
        q, key);
  if (name == "log2")
    return fmt::format(
        "{0}float {1}(float x) {{ return x > 0.0 && x < 1.17549435e-38 ? log2(x * 16777216.0) - "
        "24.0 : log2(x); }}\n",
        q, key);
  // GLSL pow is undefined for x < 0 and x == 0: libm's cases by hand. pow(1, y) and pow(x, 0)
  // are 1 whatever the other is (NaN too). An integer exponent up to 64 in magnitude multiplies
  // by squaring (straight-line, no loop), a few roundings: exp2(y * log2(x)) gave 10^3 =
  // 999.99988 and FLT_MAX^1 = inf, its error y * log2(x) times log2's. Where a negative
  // exponent's product overflows or underflows, the exp2 form takes over.
  if (name == "pow") {
    const std::string log2 = helper("log2", DType::f32);
    std::string square;
    for (int bit = 0; bit < 7; ++bit)
      square += fmt::format("if ((n & {}u) != 0u) p *= b; b *= b; ", 1u << bit);
    return fmt::format(
        "{0}float {1}(float x, float y) {{ if (y == 0.0 || x == 1.0) return 1.0; if (isnan(x) || "
        "isnan(y)) return x + y; float ay = abs(y); bool yint = floor(y) == y && !isinf(y); bool "
        "yodd = yint && ay < 16777216.0 && mod(ay, 2.0) == 1.0; float ax = abs(x); float r; if "
        "(ax == 0.0) r = y < 0.0 ? uintBitsToFloat(0x7f800000u) : 0.0; else if (isinf(ax)) r = "
        "y < 0.0 ? 0.0 : uintBitsToFloat(0x7f800000u); else if (ax == 1.0 && isinf(y)) return "
        "1.0; else {{ bool done = false; if (yint && ay <= 64.0) {{ uint n = uint(ay); float p = "
        "1.0; float b = ax; {3}if (y > 0.0) {{ r = p; done = true; }} else if (!isinf(p) && p != "
        "0.0) {{ r = 1.0 / p; done = r != 0.0 && !isinf(r); }} }} if (!done) r = exp2(y * "
        "{2}(ax)); }} if (x < 0.0 || (x == 0.0 && floatBitsToUint(x) != 0u)) {{ if (!yint) "
        "return x == 0.0 || isinf(x) || isinf(y) ? r : uintBitsToFloat(0x7fc00000u); if (yodd) "
        "r = -r; }} return r; }}\n",
        q, key, log2, square);
  }
  return "";
}

std::string DialectText::helper_text(const std::string& name, DType t) {
  if (!cuda() && t == DType::f64 && !glsl_f64_math(name).empty()) {
    if (name == "tanh" || name == "erf" || name == "pow") helper("exp", t);
    if (name == "pow") helper("log", t);
    return glsl_f64_math(name);
  }
  if (std::string h = conversion_helper(name, t); !h.empty()) return h;
  if (std::string h = math_helper(name, t); !h.empty()) return h;
  const std::string q = cuda() ? "__device__ __forceinline__ " : "";
  const std::string T = reg_type(t);
  const std::string key = fmt::format("kiln_{}_{}", name, ir::dtype_name(t));
  if (name == "floordiv") {  // numpy floor_divide with x / 0 = 0 and MIN / -1 wrapping
    const bool wide = T != "int";
    const std::string UT = wide ? (cuda() ? "unsigned long long" : "uint64_t") : reg_type(DType::u8);
    const std::string z = int_lit(t, 0), m1 = int_lit(t, -1), o = int_lit(t, 1);
    return fmt::format(
        "{0}{1} {2}({1} a, {1} b) {{ if (b == {3}) return {3}; if (b == {4}) return {5}; {1} q "
        "= a / b; {1} r = a - q * b; if (r != {3} && ((r < {3}) != (b < {3}))) q = q - {6}; "
        "return q; }}\n",
        q, T, key, z, m1, cast(T, fmt::format("{} - {}", cast(UT, "0"), cast(UT, "a"))), o);
  }
  KILN_CHECK(false) << "unknown gpu helper " << name;
  return "";
}

std::string DialectText::translation_unit(const kir::Kernel& k, CheckMode check,
                                          const std::string& entry, int group_size,
                                          const std::string& shared,
                                          const std::string& body) const {
  std::string out;
  const auto n = static_cast<int>(k.params.size());
  if (cuda()) {
    out += "// kiln gpu kernel " + k.name + "\ntypedef unsigned int uint;\n";
    if (check == CheckMode::validate)
      out +=
          "__device__ __noinline__ void kiln_report(long long* s, long long kind, long long buf, "
          "long long idx) { if (atomicCAS((unsigned long long*)s, 0ull, 1ull) == 0ull) { s[1] = "
          "kind; s[2] = buf; s[3] = idx; } }\n";
    for (const std::string& h : helper_order_) out += h;
    out += fmt::format("extern \"C\" __global__ void __launch_bounds__({}) {}(", group_size, entry);
    for (int i = 0; i < n; ++i)
      out += fmt::format("{}{}{}* p{}", i ? ", " : "", k.params[i].output ? "" : "const ",
                         mem_type(k.params[i].dtype), i);
    if (check == CheckMode::validate) out += fmt::format("{}long long* kiln_chk", n ? ", " : "");
    std::string views;
    if (!scratch_.empty()) {
      out += fmt::format("{}unsigned char* kiln_scratch", n || check == CheckMode::validate ? ", " : "");
      int64_t offset = 0;
      for (const ScratchArray& a : scratch_) {
        views += fmt::format("  {0}* kiln_{1} = ({0}*)(kiln_scratch + {2});\n", a.type, a.name, offset);
        offset += a.count * a.elem_bytes;
      }
    }
    if (dynamic_outer_)
      out += fmt::format("{}int kiln_extent",
                         n || check == CheckMode::validate || !scratch_.empty() ? ", " : "");
    return out + ") {\n" + shared + views + body + "}\n";
  }
  out += "#version 450\n";
  bool b8 = false, b16 = false, b64 = !narrow_ || check == CheckMode::validate;
  for (const kir::Param& p : k.params) {
    b8 = b8 || ir::dtype_size(p.dtype) == 1;
    b16 = b16 || ir::dtype_size(p.dtype) == 2;
    b64 = b64 || p.dtype == DType::i64;
  }
  if (b64) out += "#extension GL_EXT_shader_explicit_arithmetic_types_int64 : require\n";
  if (b8)
    out += "#extension GL_EXT_shader_8bit_storage : require\n"
           "#extension GL_EXT_shader_explicit_arithmetic_types_int8 : require\n";
  if (b16)
    out += "#extension GL_EXT_shader_16bit_storage : require\n"
           "#extension GL_EXT_shader_explicit_arithmetic_types_int16 : require\n";
  out += "// kiln gpu kernel " + k.name + "\n";
  out += fmt::format("layout(local_size_x = {}, local_size_y = 1, local_size_z = 1) in;\n",
                     group_size);
  for (int i = 0; i < n; ++i)
    out += fmt::format("layout(std430, set = 0, binding = {0}) {1}buffer B{0} {{ {2} d[]; }} b{0};\n",
                       i, k.params[i].output ? "" : "readonly ", mem_type(k.params[i].dtype));
  for (int i : vec4_views_)  // the same buffer again, as vectors (descriptor aliasing)
    out += fmt::format("layout(std430, set = 0, binding = {0}) {1}buffer B{0}v {{ {2} d[]; }} b{0}v;\n",
                       i, k.params[i].output ? "" : "readonly ", vec4_type(k.params[i].dtype));
  if (check == CheckMode::validate)
    out += fmt::format(
        "layout(std430, set = 0, binding = {}) buffer KilnCheck {{ uint w[]; }} kiln_chk;\n"
        "void kiln_report(int64_t kind, int64_t buf, int64_t idx) {{ if "
        "(atomicCompSwap(kiln_chk.w[0], 0u, 1u) == 0u) {{ kiln_chk.w[2] = uint(kind); "
        "kiln_chk.w[3] = 0u; kiln_chk.w[4] = uint(buf); kiln_chk.w[5] = 0u; kiln_chk.w[6] = "
        "uint(idx & 0xffffffffL); kiln_chk.w[7] = uint(idx >> 32); }} }}\n",
        n);
  if (!scratch_.empty()) {
    out += fmt::format("layout(std430, set = 0, binding = {}) coherent buffer KilnScratch {{",
                       n + (check == CheckMode::validate ? 1 : 0));
    for (const ScratchArray& a : scratch_) out += fmt::format(" {} {}[{}];", a.type, a.name, a.count);
    out += " } kiln_sc;\n";
  }
  if (dynamic_outer_) out += "layout(push_constant) uniform KilnSizes { int outer; } kiln_sizes;\n";
  out += shared;
  for (const std::string& h : helper_order_) out += h;
  return out + "void main() {\n" + body + "}\n";
}

}  // namespace kiln::codegen::gpu
