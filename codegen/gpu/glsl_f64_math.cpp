// Double-precision exp, log, sin, cos, tanh, erf and pow for GLSL, which has no double
// transcendental functions: range reduction plus polynomials, accurate to a few ulp (erf to
// about 1e-14 absolute).
#include "codegen/gpu/dialect.h"

#include <fmt/format.h>

#include <string>

namespace kiln::codegen::gpu {

namespace {

constexpr const char* kExp = R"(double kiln_exp_f64(double x) {
  if (isnan(x)) return x;
  if (x > 709.79LF) return packDouble2x32(uvec2(0u, 0x7ff00000u));
  if (x < -745.2LF) return 0.0LF;
  double n = round(x * 1.4426950408889634LF);
  double r = (x - n * 6.93147180369123816490e-01LF) - n * 1.90821492927058770002e-10LF;
  double p = 1.0LF / 6227020800.0LF;
  p = p * r + 1.0LF / 479001600.0LF;
  p = p * r + 1.0LF / 39916800.0LF;
  p = p * r + 1.0LF / 3628800.0LF;
  p = p * r + 1.0LF / 362880.0LF;
  p = p * r + 1.0LF / 40320.0LF;
  p = p * r + 1.0LF / 5040.0LF;
  p = p * r + 1.0LF / 720.0LF;
  p = p * r + 1.0LF / 120.0LF;
  p = p * r + 1.0LF / 24.0LF;
  p = p * r + 1.0LF / 6.0LF;
  p = p * r + 0.5LF;
  p = p * r + 1.0LF;
  p = p * r + 1.0LF;
  int e = int(n);
  return ldexp(ldexp(p, e / 2), e - e / 2);
}
)";

constexpr const char* kLog = R"(double kiln_log_f64(double x) {
  if (isnan(x) || x < 0.0LF) return packDouble2x32(uvec2(0u, 0x7ff80000u));
  if (x == 0.0LF) return packDouble2x32(uvec2(0u, 0xfff00000u));
  if (isinf(x)) return x;
  // A subnormal scaled into the normal range first (lavapipe's frexp of one is wrong:
  // log(5e-324) gave -709.09 for -744.44).
  int sub = 0;
  if (x < 2.2250738585072014e-308LF) { x = x * 18014398509481984.0LF; sub = 54; }
  int e;
  double m = frexp(x, e);
  e = e - sub;
  if (m < 0.70710678118654752LF) { m = m * 2.0LF; e = e - 1; }
  double f = m - 1.0LF;
  double s = f / (2.0LF + f);
  double s2 = s * s;
  double p = 1.0LF / 19.0LF;
  p = p * s2 + 1.0LF / 17.0LF;
  p = p * s2 + 1.0LF / 15.0LF;
  p = p * s2 + 1.0LF / 13.0LF;
  p = p * s2 + 1.0LF / 11.0LF;
  p = p * s2 + 1.0LF / 9.0LF;
  p = p * s2 + 1.0LF / 7.0LF;
  p = p * s2 + 1.0LF / 5.0LF;
  p = p * s2 + 1.0LF / 3.0LF;
  p = p * s2 + 1.0LF;
  double de = double(e);
  return de * 6.93147180369123816490e-01LF + (2.0LF * s * p + de * 1.90821492927058770002e-10LF);
}
)";

// |x| >= 2^20 reduced by pi/2 exactly (Payne-Hanek), where the three-part constant below runs
// out of bits (sin(1e15) was 0.889 for 0.858, sin(1e20) 2e33): |x| = m * 2^e with a 53-bit m;
// the bits of 2/pi before bit e - 1 give whole periods, so a 192-bit window of them from there on
// times m, modulo 2^192, is |x| / (pi/2) in 2.190 fixed point; n is it rounded (0..3) and r the
// rest times pi/2 (|r| <= pi/4). Straight-line 32-bit word arithmetic (no loops: the kernel's
// loop budget counts none). The table holds 2/pi's bits from bit -63 on, 32 a word.
std::string rem_pio2_large() {
  std::string out =
      "void kiln_rem_pio2_large_f64(double ax, out double r, out int n) {\n"
      "  const uint bits[39] = uint[39](\n"
      "    0x00000000u, 0x00000000u, 0xa2f9836eu, 0x4e441529u, 0xfc2757d1u, 0xf534ddc0u, \n"
      "    0xdb629599u, 0x3c439041u, 0xfe5163abu, 0xdebbc561u, 0xb7246e3au, 0x424dd2e0u, \n"
      "    0x06492eeau, 0x09d1921cu, 0xfe1deb1cu, 0xb129a73eu, 0xe88235f5u, 0x2ebb4484u, \n"
      "    0xe99c7026u, 0xb45f7e41u, 0x3991d639u, 0x835339f4u, 0x9c845f8bu, 0xbdf9283bu, \n"
      "    0x1ff897ffu, 0xde05980fu, 0xef2f118bu, 0x5a0a6d1fu, 0x6d367ecfu, 0x27cb09b7u, \n"
      "    0x4f463f66u, 0x9e5fea2du, 0x7527bac7u, 0xebe5f17bu, 0x3d0739f7u, 0x8a5292eau, \n"
      "    0x6bfb5fb1u, 0x1f8d5d08u, 0x56033046u\n"
      "  );\n"
      "  uvec2 u = unpackDouble2x32(ax);\n"
      "  uint m0 = u.x, m1 = (u.y & 0xfffffu) | 0x100000u;\n"
      "  int t = int((u.y >> 20) & 0x7ffu) - 1075 - 1 + 63;  // bit -63 is word 0's first\n"
      "  int w = t >> 5, o = t & 31;\n"
      "";
  // The window: W5 (most significant) .. W0 from seven table words shifted by o.
  for (int k = 0; k < 6; ++k)
    out += fmt::format(
        "  uint W{0} = o == 0 ? bits[w + {1}] : (bits[w + {1}] << o) | (bits[w + {2}] >> (32 - "
        "o));\n",
        5 - k, k, k + 1);
  out += "  uint a0 = 0u, a1 = 0u, a2 = 0u, a3 = 0u, a4 = 0u, a5 = 0u, hi, lo, c;\n";
  // a += m_i * W_j at word i + j, carries up to a5 (bits past 2^192 are whole periods).
  const auto add_at = [&](int word, const std::string& v) {
    out += fmt::format("  a{0} = uaddCarry(a{0}, {1}, c);\n", word, v);
    for (int up = word + 1; up < 6; ++up)
      out += fmt::format("  a{0} = uaddCarry(a{0}, c, c);\n", up);
  };
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 6 && i + j < 6; ++j) {
      out += fmt::format("  umulExtended(m{}, W{}, hi, lo);\n", i, j);
      add_at(i + j, "lo");
      if (i + j + 1 < 6) add_at(i + j + 1, "hi");
    }
  out +=
      "  uint q = (a5 + 0x20000000u) >> 30;\n"
      "  a5 -= q << 30;\n"
      "  bool neg = int(a5) < 0;\n"
      "  if (neg) {\n"
      "    a0 = ~a0; a1 = ~a1; a2 = ~a2; a3 = ~a3; a4 = ~a4; a5 = ~a5;\n"
      "    a0 = uaddCarry(a0, 1u, c); a1 = uaddCarry(a1, c, c); a2 = uaddCarry(a2, c, c);\n"
      "    a3 = uaddCarry(a3, c, c); a4 = uaddCarry(a4, c, c); a5 = a5 + c;\n"
      "  }\n"
      "  double v = double(a0) * 6.372367644529809e-58LF;  // 2^-190\n"
      "  v += double(a1) * 2.7369110631344083e-48LF;  // 2^-158\n"
      "  v += double(a2) * 1.1754943508222875e-38LF;  // 2^-126\n"
      "  v += double(a3) * 5.048709793414476e-29LF;  // 2^-94\n"
      "  v += double(a4) * 2.168404344971009e-19LF;  // 2^-62\n"
      "  v += double(a5) * 9.313225746154785e-10LF;  // 2^-30\n"
      "  r = (neg ? -v : v) * 1.5707963267948966LF;\n"
      "  n = int(q);\n"
      "}\n";
  return out;
}

// sin and cos share the reduction by pi/2 (fdlibm's three-part constant below 2^20, the exact
// one above) and the kernels.
const std::string& sin_cos() {
  static const std::string text =
      rem_pio2_large() + R"(double kiln_sincos_f64(double x, int shift) {
  if (isnan(x) || isinf(x)) return packDouble2x32(uvec2(0u, 0x7ff80000u));
  double r;
  int n;
  if (abs(x) < 1048576.0LF) {
    double k = round(x * 0.63661977236758134308LF);
    r = ((x - k * 1.57079632673412561417e+00LF) - k * 6.07710050630396597660e-11LF) -
        k * 2.02226624879595063154e-21LF;
    n = int(mod(k, 4.0LF));
  } else {
    kiln_rem_pio2_large_f64(abs(x), r, n);
    if (x < 0.0LF) {  // -|x| = (-n) * pi/2 + (-r)
      r = -r;
      n = (4 - n) & 3;
    }
  }
  int q = (n + shift) & 3;
  double r2 = r * r;
  double s = -1.0LF / 355687428096000.0LF;
  s = s * r2 + 1.0LF / 1307674368000.0LF;
  s = s * r2 - 1.0LF / 6227020800.0LF;
  s = s * r2 + 1.0LF / 39916800.0LF;
  s = s * r2 - 1.0LF / 362880.0LF;
  s = s * r2 + 1.0LF / 5040.0LF;
  s = s * r2 - 1.0LF / 120.0LF;
  s = s * r2 + 1.0LF / 6.0LF;
  double sn = r - r * r2 * s;
  double c = 1.0LF / 6402373705728000.0LF;
  c = c * r2 - 1.0LF / 20922789888000.0LF;
  c = c * r2 + 1.0LF / 87178291200.0LF;
  c = c * r2 - 1.0LF / 479001600.0LF;
  c = c * r2 + 1.0LF / 3628800.0LF;
  c = c * r2 - 1.0LF / 40320.0LF;
  c = c * r2 + 1.0LF / 720.0LF;
  c = c * r2 - 1.0LF / 24.0LF;
  c = c * r2 + 0.5LF;
  double cs = 1.0LF - r2 * c;
  if (q == 0) return sn;
  if (q == 1) return cs;
  if (q == 2) return -sn;
  return -cs;
}
)";
  return text;
}

constexpr const char* kTanh = R"(double kiln_tanh_f64(double x) {
  double a = abs(x);
  if (isnan(x)) return x;
  if (a > 22.0LF) return x < 0.0LF ? -1.0LF : 1.0LF;
  if (a < 0.125LF) {
    double x2 = x * x;
    double p = -929569.0LF / 638512875.0LF;
    p = p * x2 + 21844.0LF / 6081075.0LF;
    p = p * x2 - 1382.0LF / 155925.0LF;
    p = p * x2 + 62.0LF / 2835.0LF;
    p = p * x2 - 17.0LF / 315.0LF;
    p = p * x2 + 2.0LF / 15.0LF;
    p = p * x2 - 1.0LF / 3.0LF;
    return x + x * x2 * p;
  }
  double e = kiln_exp_f64(-2.0LF * a);
  double r = (1.0LF - e) / (1.0LF + e);
  return x < 0.0LF ? -r : r;
}
)";

// Taylor series below 2 (the terms' cancellation costs at most e^4 ulp: within 1e-14), and
// above it erfc's continued fraction, exp(-z^2) / sqrt(pi) / (z + (1/2) / (z + (2/2) / (z + ...))),
// evaluated from 60 terms back (to double precision from z = 2 on: 1.9e-16 relative at 2, where
// Numerical Recipes' erfc, 1.2e-7 relative, left erf(2.5) 3.5e-11 off). Each loop runs at most 60
// iterations (kErfLoopIterations).
constexpr int64_t kErfLoopIterations = 60;
constexpr const char* kErf = R"(double kiln_erf_f64(double x) {
  if (isnan(x)) return x;
  double z = abs(x);
  if (z < 2.0LF) {
    double x2 = x * x;
    double term = x;
    double sum = x;
    for (int n = 1; n < 60; ++n) {
      term = -term * x2 / double(n);
      double t = term / double(2 * n + 1);
      sum += t;
      if (abs(t) < 1e-17LF * abs(sum)) break;
    }
    return 1.1283791670955126LF * sum;
  }
  if (z > 6.0LF) return x < 0.0LF ? -1.0LF : 1.0LF;
  double f = z;
  for (int k = 60; k >= 1; --k) f = z + 0.5LF * double(k) / f;
  double r = kiln_exp_f64(-z * z) * 0.5641895835477563LF / f;
  return x >= 0.0LF ? 1.0LF - r : r - 1.0LF;
}
)";

// pow(1, y) and pow(x, 0) are 1 (NaN too). An integer exponent up to 64 in magnitude multiplies
// by squaring (straight-line): exp(y * log(x)) gave 2^52 = 4503599627370484.5 and 10^15 off by
// 5.9; a negative exponent whose product overflows or underflows takes the exp form.
constexpr const char* kPow = R"(double kiln_pow_f64(double x, double y) {
  if (y == 0.0LF || x == 1.0LF) return 1.0LF;
  if (isnan(x) || isnan(y)) return x + y;
  double inf = packDouble2x32(uvec2(0u, 0x7ff00000u));
  double ay = abs(y);
  bool yint = floor(y) == y && !isinf(y);
  bool yodd = yint && ay < 9007199254740992.0LF && mod(ay, 2.0LF) == 1.0LF;
  double ax = abs(x);
  double r;
  if (ax == 0.0LF) r = y < 0.0LF ? inf : 0.0LF;
  else if (isinf(ax)) r = y < 0.0LF ? 0.0LF : inf;
  else if (ax == 1.0LF && isinf(y)) return 1.0LF;
  else if (isinf(y)) r = (ax > 1.0LF) == (y > 0.0LF) ? inf : 0.0LF;
  else {
    bool done = false;
    if (yint && ay <= 64.0LF) {
      uint n = uint(ay);
      double p = 1.0LF;
      double b = ax;
      if ((n & 1u) != 0u) p *= b; b *= b;
      if ((n & 2u) != 0u) p *= b; b *= b;
      if ((n & 4u) != 0u) p *= b; b *= b;
      if ((n & 8u) != 0u) p *= b; b *= b;
      if ((n & 16u) != 0u) p *= b; b *= b;
      if ((n & 32u) != 0u) p *= b; b *= b;
      if ((n & 64u) != 0u) p *= b;
      if (y > 0.0LF) { r = p; done = true; }
      else if (!isinf(p) && p != 0.0LF) { r = 1.0LF / p; done = r != 0.0LF && !isinf(r); }
    }
    if (!done) r = kiln_exp_f64(y * kiln_log_f64(ax));
  }
  bool neg = x < 0.0LF || (x == 0.0LF && unpackDouble2x32(x).y != 0u);
  if (neg) {
    if (!yint) return x == 0.0LF || isinf(x) || isinf(y) ? r : packDouble2x32(uvec2(0u, 0x7ff80000u));
    if (yodd) r = -r;
  }
  return r;
}
)";

}  // namespace

int64_t glsl_f64_math_loop_iterations(const std::string& name) {
  return name == "erf" ? kErfLoopIterations : 0;
}

std::string glsl_f64_math(const std::string& name) {
  if (name == "exp") return kExp;
  if (name == "log") return kLog;
  if (name == "sincos") return sin_cos();
  if (name == "tanh") return kTanh;
  if (name == "erf") return kErf;
  if (name == "pow") return kPow;
  return "";
}

}  // namespace kiln::codegen::gpu
