// exp, log, pow, sin/cos, tanh and sigmoid that give the same bits on every CPU.
//
// Why not libm: glibc's exp/log/sin/cos/tanh/pow are not correctly rounded,
// and which code computes them depends on the machine: x86 glibc picks an FMA
// or a non-FMA variant per CPU at load (ifunc), and the aarch64 build is other
// code again. Their last bits differ between machines, and a last bit in a
// logit, a RoPE angle, a softmax weight or a Gumbel score can change a
// generated token (ADR 0014). These functions use only IEEE basic operations
// (+ - * / and comparisons, each correctly rounded), exact scalings by powers
// of two and integer arithmetic, so under -ffp-contract=off (which the build
// must set on every architecture: with GCC's default, an -mfma or
// target("avx2,fma") caller fuses a * b + c into one rounding where others
// round twice, and tests/portable_math_test.cc's pinned hashes fail) they give
// the same bits on every CPU. Polynomials are Taylor series with enough terms
// that the truncation is far below double's rounding; arguments are reduced
// with Cody-Waite splits of ln 2 and pi/2. Accuracy is within about 1-2 ulp
// of double (the bounds are measured in tests/portable_math_test.cc); callers
// that want float round the double result, which then lands within 1 float ulp.
// No std::fma: where the CPU lacks FMA it is a slow software routine.
#pragma once

#include <bit>
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <limits>

// Each operation must round once, to double: no x87-style wider evaluation,
// no reassociation (RoundToInteger below relies on (x + c) - c).
static_assert(FLT_EVAL_METHOD == 0, "portable_math.h needs double arithmetic evaluated in double");
#ifdef __FAST_MATH__
#error "portable_math.h must not be compiled with -ffast-math: it changes the rounding of every operation"
#endif

namespace kakeya {
namespace portable_math_internal {

// ln 2 = kLn2Hi + kLn2Lo, kLn2Hi with 32 significant bits, so n * kLn2Hi is
// exact for |n| < 2^21 (exponents of doubles need 11 bits).
inline constexpr double kLn2Hi = 0x1.62e42feep-1;
inline constexpr double kLn2Lo = 0x1.a39ef35793c76p-33;
inline constexpr double kLog2E = 0x1.71547652b82fep+0;  // 1 / ln 2; only picks n

// pi / 2 = kPio2_1 + kPio2_2 + kPio2_3 + kPio2_4: the first three with 24
// significant bits each, so k * kPio2_i is exact for |k| < 2^29, the last the
// rest rounded to double (about 125 bits of pi / 2 in all).
inline constexpr double kPio2_1 = 0x1.921fb4p+0;
inline constexpr double kPio2_2 = 0x1.4442d0p-24;
inline constexpr double kPio2_3 = 0x1.846988p-48;
inline constexpr double kPio2_4 = 0x1.8cc51701b839ap-72;
inline constexpr double k2OverPi = 0x1.45f306dc9c883p-1;  // only picks k

// Adding and subtracting 1.5 * 2^52 rounds a double of magnitude < 2^51 to
// the nearest integer (ties to even), in the default rounding mode.
inline constexpr double kRoundShifter = 0x1.8p52;

inline double RoundToInteger(double x) { return (x + kRoundShifter) - kRoundShifter; }

// 2^n for -1022 <= n <= 1023, from the exponent bits.
inline double TwoToThe(int n) { return std::bit_cast<double>(static_cast<uint64_t>(n + 1023) << 52); }

// e^r - 1 - r for |r| <= 0.35: Taylor to r^13 (the r^14 term is below
// 5e-18 of the result), by Estrin's scheme (pairs of terms, then pairs of
// pairs): a 4-deep chain instead of Horner's 12, which the vocabulary-wide
// loops (softmax weights) feel.
inline double ExpTail(double r) {
  const double r2 = r * r, r4 = r2 * r2, r8 = r4 * r4;
  const double p23 = 1.0 / 2.0 + r * (1.0 / 6.0);  // the terms of r^2 and r^3
  const double p45 = 1.0 / 24.0 + r * (1.0 / 120.0);
  const double p67 = 1.0 / 720.0 + r * (1.0 / 5040.0);
  const double p89 = 1.0 / 40320.0 + r * (1.0 / 362880.0);
  const double p1011 = 1.0 / 3628800.0 + r * (1.0 / 39916800.0);
  const double p1213 = 1.0 / 479001600.0 + r * (1.0 / 6227020800.0);
  return r2 * (((p23 + r2 * p45) + r4 * (p67 + r2 * p89)) + r8 * (p1011 + r2 * p1213));
}

// sin(r + lo) and cos(r + lo) for |r| <= pi/4 (a little over is fine), lo a
// correction below ulp(r). Taylor to r^17 and r^18: the next terms are below
// 1e-19 and 4e-21 of the results.
inline double SinKernel(double r, double lo) {
  const double z = r * r;
  double p = 1.0 / 355687428096000.0;  // 1/17!
  p = -1.0 / 1307674368000.0 + z * p;
  p = 1.0 / 6227020800.0 + z * p;
  p = -1.0 / 39916800.0 + z * p;
  p = 1.0 / 362880.0 + z * p;
  p = -1.0 / 5040.0 + z * p;
  p = 1.0 / 120.0 + z * p;
  p = -1.0 / 6.0 + z * p;
  // sin(r + lo) = sin(r) + lo cos(r), cos(r) ~ 1 - z/2 (lo is tiny).
  return r + ((z * r) * p + lo * (1.0 - 0.5 * z));
}

inline double CosKernel(double r, double lo) {
  const double z = r * r;
  double p = 1.0 / 6402373705728000.0;  // 1/18!
  p = -1.0 / 20922789888000.0 + z * p;
  p = 1.0 / 87178291200.0 + z * p;
  p = -1.0 / 479001600.0 + z * p;
  p = 1.0 / 3628800.0 + z * p;
  p = -1.0 / 40320.0 + z * p;
  p = 1.0 / 720.0 + z * p;
  p = -1.0 / 24.0 + z * p;
  // 1 - z/2 as w plus its rounding error, so that the large terms are exact;
  // cos(r + lo) = cos(r) - lo sin(r), sin(r) ~ r.
  const double hz = 0.5 * z;
  const double w = 1.0 - hz;
  return w + (((1.0 - w) - hz) + ((z * z) * (-p) - r * lo));
}

}  // namespace portable_math_internal

// e^x. NaN -> NaN, +inf (and x above the largest double whose e^x is finite,
// 709.78...) -> +inf, -inf (and x below ln 2^-1075 = -745.13..., where e^x
// rounds to 0) -> 0; results below DBL_MIN are rounded to denormals once, by
// the last multiplication.
inline double PortableExp(double x) {
  using namespace portable_math_internal;
  if (!(x <= 0x1.62e42fefa39efp+9)) return x != x ? x : std::numeric_limits<double>::infinity();
  if (x < -0x1.74910d52d3052p+9) return 0.0;
  // x = k ln2 + r, |r| <= ln2/2 (+ rounding); x - k * kLn2Hi is exact.
  const double k = RoundToInteger(x * kLog2E);
  const double r = (x - k * kLn2Hi) - k * kLn2Lo;
  const double p = 1.0 + (r + ExpTail(r));
  const int n = static_cast<int>(k);
  if (n >= -1022 && n <= 1023) return p * TwoToThe(n);
  // Near overflow or underflow: scale in two exact-or-once-rounded steps.
  return n > 0 ? (p * 2.0) * TwoToThe(n - 1) : (p * TwoToThe(n + 600)) * TwoToThe(-600);
}

// Natural logarithm. 0 -> -inf, x < 0 -> NaN, +inf -> +inf, NaN -> NaN;
// denormals are handled.
inline double PortableLog(double x) {
  using namespace portable_math_internal;
  int e = 0;
  if (!(x >= 0x1p-1022 && x <= std::numeric_limits<double>::max())) {  // one test on the common path
    if (x == 0.0) return -std::numeric_limits<double>::infinity();
    if (!(x > 0.0) || x == std::numeric_limits<double>::infinity()) {
      return x < 0.0 ? std::numeric_limits<double>::quiet_NaN() : x;  // NaN or +inf as is
    }
    x *= 0x1p54, e = -54;  // denormal: scale exactly into the normals
  }
  const uint64_t bits = std::bit_cast<uint64_t>(x);
  uint64_t mantissa = bits & 0x000FFFFFFFFFFFFFull;
  // x = 2^e m with m in [sqrt(1/2), sqrt(2)): mantissas of sqrt(2) and above
  // take exponent -1 (m / 2) and e one higher.
  const int high = mantissa >= 0x6A09E667F3BCDull ? 1 : 0;
  e += static_cast<int>(bits >> 52) - 1023 + high;
  const double m = std::bit_cast<double>(mantissa | static_cast<uint64_t>(1023 - high) << 52);
  // log(1 + f) = 2 atanh(s), s = f / (2 + f), |s| <= 0.1716: 2 atanh(s) =
  // 2s + s R(s^2), R = 2z/3 + 2z^2/5 + ... (to z^10, the next term below 1e-18
  // of the result), and 2s = f - s f = f - (f^2/2 - s f^2/2), which keeps the
  // exact f apart from the small corrections (fdlibm's arrangement of e_log.c).
  const double f = m - 1.0;  // exact
  const double s = f / (2.0 + f);
  const double z = s * s, z2 = z * z, z4 = z2 * z2, z8 = z4 * z4;
  // R / z = 2/3 + 2z/5 + ... + 2z^9/21, by Estrin's scheme as in ExpTail.
  const double p01 = 2.0 / 3.0 + z * (2.0 / 5.0);
  const double p23 = 2.0 / 7.0 + z * (2.0 / 9.0);
  const double p45 = 2.0 / 11.0 + z * (2.0 / 13.0);
  const double p67 = 2.0 / 15.0 + z * (2.0 / 17.0);
  const double p89 = 2.0 / 19.0 + z * (2.0 / 21.0);
  const double p = ((p01 + z2 * p23) + z4 * (p45 + z2 * p67)) + z8 * p89;
  const double R = z * p;
  const double hfsq = 0.5 * f * f;
  const double de = static_cast<double>(e);
  return de * kLn2Hi - ((hfsq - (s * (hfsq + R) + de * kLn2Lo)) - f);
}

// base^exponent for base > 0 (base <= 0 -> NaN), as exp(exponent log base):
// the errors of log and of the product, together under 1.5 * 2^-52 relative,
// are multiplied by L = |exponent log base|, so the result is within
// (2 + 3L) ulp of double: within 2^-44 relative while it is within float's
// range (L < 89), far below float's ulp (2^-24) when the caller rounds to float.
inline double PortablePow(double base, double exponent) {
  if (base == 1.0 || exponent == 0.0) return 1.0;
  return PortableExp(exponent * PortableLog(base));
}

// sin(x) and cos(x) for |x| < 2^29 (5.4e8; RoPE angles are positions times
// at most 1, ~1e6 for a million-token context): within ~2 ulp, and within
// ~1e-16 * max(1, |x|) absolute next to their zeros. Beyond 2^29, k * pi/2
// would no longer be exact in the reduction (that needs Payne-Hanek's), so
// the results are NaN, as for +-inf and NaN: a misuse shows instead of
// silently losing accuracy.
inline void PortableSinCos(double x, double* sin_out, double* cos_out) {
  using namespace portable_math_internal;
  if (!(std::fabs(x) < 0x1p29)) {
    *sin_out = *cos_out = std::numeric_limits<double>::quiet_NaN();
    return;
  }
  if (std::fabs(x) < 0x1p-27) {  // x - x^3/6 rounds to x and 1 - x^2/2 to 1; keeps -0
    *sin_out = x, *cos_out = 1.0;
    return;
  }
  // x = k pi/2 + r, |r| <= pi/4 (+ rounding). x - k kPio2_1 is exact; each
  // later step subtracts an exact product; r + lo carries the last rounding.
  const double k = RoundToInteger(x * k2OverPi);
  const double a = x - k * kPio2_1;
  const double b = a - k * kPio2_2;
  const double c = b - k * kPio2_3;
  const double w = k * kPio2_4;
  const double r = c - w;
  const double lo = (c - r) - w;
  const double s = SinKernel(r, lo);
  const double co = CosKernel(r, lo);
  switch (static_cast<int64_t>(k) & 3) {
    case 0: *sin_out = s, *cos_out = co; break;
    case 1: *sin_out = co, *cos_out = -s; break;
    case 2: *sin_out = -s, *cos_out = -co; break;
    default: *sin_out = -co, *cos_out = s; break;
  }
}

// tanh(x). |x| < 0.5: the odd Taylor series (to x^35, the next term below
// 2e-18 of the result), no cancellation; above: (1 - e) / (1 + e) with
// e = e^(-2|x|) <= e^-1, which never overflows and goes to +-1. NaN -> NaN.
inline double PortableTanh(double x) {
  const double a = std::fabs(x);
  if (a < 0x1p-27) return x;  // tanh x = x - x^3/3 rounds to x; keeps -0 (the sum below gives +0)
  if (a < 0.5) {
    // Coefficients 2^2n (2^2n - 1) B_2n / (2n)! of x^(2n-1), rounded to double.
    const double z = x * x;
    double p = -0x1.75cde6563fed9p-23;  // x^35: -418781231495293038913922/2405873491984360136479756640625
    p = 0x1.cd299de4ae6bbp-22 + z * p;  // x^33: 1736640792209901647222/4043484860477916195764296875
    p = -0x1.1c77df95c1c0dp-20 + z * p;  // x^31: -129848163681107301953/122529844256906551386796875
    p = 0x1.5ef2da474e5b7p-19 + z * p;  // x^29: 689005380505609448/263505041412702261046875
    p = -0x1.b0f72d3ee24e9p-18 + z * p;  // x^27: -8374643517010684/1298054391195577640625
    p = 0x1.0b132d39a6050p-16 + z * p;  // x^25: 58870668456604/3698160658676859375
    p = -0x1.497d8eea25259p-15 + z * p;  // x^23: -113927491862/2900518163668125
    p = 0x1.967e18afcafadp-14 + z * p;  // x^21: 18888466084/194896477400625
    p = -0x1.f57d7734d1664p-13 + z * p;  // x^19: -443861162/1856156927625
    p = 0x1.3558248036744p-11 + z * p;  // x^17: 6404582/10854718875
    p = -0x1.7da36452b75e3p-10 + z * p;  // x^15: -929569/638512875
    p = 0x1.d6d3d0e157de0p-9 + z * p;  // x^13: 21844/6081075
    p = -0x1.226e355e6c23dp-7 + z * p;  // x^11: -1382/155925
    p = 0x1.664f4882c10fap-6 + z * p;  // x^9: 62/2835
    p = -17.0 / 315.0 + z * p;
    p = 2.0 / 15.0 + z * p;
    p = -1.0 / 3.0 + z * p;
    return x + (x * z) * p;
  }
  const double e = PortableExp(-2.0 * a);
  const double t = (1.0 - e) / (1.0 + e);
  return x < 0.0 ? -t : t;  // NaN stays NaN
}

// 1 / (1 + e^-x), through e = e^-|x| so that it never overflows.
inline double PortableSigmoid(double x) {
  const double e = PortableExp(-std::fabs(x));
  return (x >= 0.0 ? 1.0 : e) / (1.0 + e);
}

}  // namespace kakeya
