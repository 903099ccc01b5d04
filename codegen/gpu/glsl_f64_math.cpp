// Double-precision exp, log, sin, cos, tanh, erf and pow for GLSL, which has no double
// transcendental functions: range reduction plus polynomials, accurate to a few ulp (erf to
// about 1e-12 absolute).
#include "codegen/gpu/dialect.h"

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
  int e;
  double m = frexp(x, e);
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

// sin and cos share the reduction by pi/2 (fdlibm's three-part constant) and the kernels.
constexpr const char* kSinCos = R"(double kiln_sincos_f64(double x, int shift) {
  if (isnan(x) || isinf(x)) return packDouble2x32(uvec2(0u, 0x7ff80000u));
  double k = round(x * 0.63661977236758134308LF);
  double r = ((x - k * 1.57079632673412561417e+00LF) - k * 6.07710050630396597660e-11LF) -
             k * 2.02226624879595063154e-21LF;
  int q = (int(mod(k, 4.0LF)) + shift) & 3;
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

// Taylor series below 2.5, Numerical Recipes' erfc (relative 1.2e-7 of erfc < 4e-4) above. The
// series' loop runs at most 59 iterations and one failed test (kErfLoopIterations).
constexpr int64_t kErfLoopIterations = 60;
constexpr const char* kErf = R"(double kiln_erf_f64(double x) {
  if (isnan(x)) return x;
  double z = abs(x);
  if (z < 2.5LF) {
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
  double t = 1.0LF / (1.0LF + 0.5LF * z);
  double r = t * kiln_exp_f64(-z * z - 1.26551223LF + t * (1.00002368LF + t * (0.37409196LF +
             t * (0.09678418LF + t * (-0.18628806LF + t * (0.27886807LF + t * (-1.13520398LF +
             t * (1.48851587LF + t * (-0.82215223LF + t * 0.17087277LF)))))))));
  return x >= 0.0LF ? 1.0LF - r : r - 1.0LF;
}
)";

constexpr const char* kPow = R"(double kiln_pow_f64(double x, double y) {
  if (y == 0.0LF) return 1.0LF;
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
  else r = kiln_exp_f64(y * kiln_log_f64(ax));
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
  if (name == "sincos") return kSinCos;
  if (name == "tanh") return kTanh;
  if (name == "erf") return kErf;
  if (name == "pow") return kPow;
  return "";
}

}  // namespace kiln::codegen::gpu
