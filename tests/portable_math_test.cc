// base/portable_math.h against the C library's long double functions (expl,
// logl, sinl, ...): an independent implementation with 11 more bits than
// double, so its own error (well under 1 ulp of long double) is about 1/2000
// of a double ulp and the measured error is the function's. Each function is
// swept densely, at random (fixed seeds) and at its edges; its error in ulps
// of double must stay within the bound below, and its result rounded to float
// within 1 float ulp. The last test pins the bits themselves: a hash of many
// results, the same on every CPU and build (x86 with and without FMA, ARM),
// which is the point of these functions (ADR 0014).
#include "base/portable_math.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <vector>

namespace kakeya {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// |got - ref| in units of the last place of double at ref (denormals: 2^-1074).
long double UlpError(double got, long double ref) {
  if (std::isnan(ref)) return std::isnan(got) ? 0 : INFINITY;
  if (std::isinf(static_cast<double>(ref))) return got == static_cast<double>(ref) ? 0 : INFINITY;
  if (!std::isfinite(got)) return INFINITY;
  const int e = ref == 0 ? -1074 : std::max(std::ilogb(ref) - 52, -1074);
  return std::fabs(static_cast<long double>(got) - ref) / std::ldexp(1.0L, e);
}

// The same for float: ulp of float at ref (denormals: 2^-149).
long double FloatUlpError(float got, long double ref) {
  if (std::isnan(ref)) return std::isnan(got) ? 0 : INFINITY;
  if (std::isinf(ref) || std::fabs(ref) > std::numeric_limits<float>::max()) {
    return std::isinf(got) || std::fabs(got) == std::numeric_limits<float>::max() ? 0 : INFINITY;
  }
  if (!std::isfinite(got)) return INFINITY;
  const int e = ref == 0 ? -149 : std::max(std::ilogb(ref) - 23, -149);
  return std::fabs(static_cast<long double>(got) - ref) / std::ldexp(1.0L, e);
}

// Worst errors over a set of inputs; reports the worst input.
struct Worst {
  long double ulp = 0, float_ulp = 0;
  double at = 0, float_at = 0;
  void Add(double x, double got, long double ref) {
    const long double u = UlpError(got, ref), f = FloatUlpError(static_cast<float>(got), ref);
    if (!(u <= ulp)) ulp = u, at = x;
    if (!(f <= float_ulp)) float_ulp = f, float_at = x;
  }
  void Expect(long double max_ulp, const std::string& what) const {
    std::printf("%s: worst %.3Lf ulp of double (bound %.1Lf), %.3Lf ulp of float\n", what.c_str(), ulp, max_ulp,
                float_ulp);
    EXPECT_LE(ulp, max_ulp) << what << " at x = " << at << " (" << std::hexfloat << at << ")";
    EXPECT_LE(float_ulp, 1.0L) << what << " rounded to float, at x = " << float_at << " (" << std::hexfloat
                               << float_at << ")";
  }
};

// Inputs: a dense sweep of [lo, hi], uniform random ones there, and `extra`.
std::vector<double> Inputs(double lo, double hi, int dense, int random, uint64_t seed,
                           std::vector<double> extra = {}) {
  std::vector<double> xs = std::move(extra);
  for (int i = 0; i <= dense; ++i) xs.push_back(lo + (hi - lo) * i / dense);
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(lo, hi);
  for (int i = 0; i < random; ++i) xs.push_back(u(rng));
  return xs;
}

// Random doubles with uniformly random bits in [2^lo_exp, 2^hi_exp), both signs.
std::vector<double> LogUniform(int lo_exp, int hi_exp, int n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int> e(lo_exp, hi_exp - 1);
  std::vector<double> xs;
  for (int i = 0; i < n; ++i) {
    const double m = 1.0 + static_cast<double>(rng() >> 12) * 0x1p-52;
    const double sign = rng() & 1 ? -1 : 1;
    xs.push_back(sign * std::ldexp(m, e(rng)));
  }
  return xs;
}

TEST(PortableMathTest, Exp) {
  std::vector<double> edges = {0.0, -0.0, 1.0, -1.0, 0x1p-1074, -0x1p-1074, 0x1p-60, -0x1p-60,
                               0x1.62e42fefa39efp+9, -708.39, -708.4, -745.13, -745.1332191019411,
                               -0x1.74910d52d3052p+9, 88.72283905206835, -103.97208000934918};
  for (int k = -1075; k <= 1024; ++k) {  // k ln 2 and its neighbours: the reduction's boundaries
    const double x = static_cast<double>(k * 0.69314718055994530942L);
    edges.insert(edges.end(), {x, std::nextafter(x, -kInf), std::nextafter(x, kInf), x + 0.3465735902799726,
                               x - 0.3465735902799726});
  }
  Worst w;
  for (double x : Inputs(-745.2, 709.78, 2'000'000, 1'000'000, 1, edges)) w.Add(x, PortableExp(x), std::exp(static_cast<long double>(x)));
  for (double x : Inputs(-1, 1, 200'000, 200'000, 2)) w.Add(x, PortableExp(x), std::exp(static_cast<long double>(x)));
  for (double x : LogUniform(-1074, -1, 200'000, 3)) w.Add(x, PortableExp(x), std::exp(static_cast<long double>(x)));
  w.Expect(1.5L, "exp");
}

TEST(PortableMathTest, Log) {
  std::vector<double> edges = {0x1p-1074, 0x1p-1022, std::nextafter(0x1p-1022, 0.0), 0x1.fffffffffffffp+1023,
                               1.0, std::nextafter(1.0, 0.0), std::nextafter(1.0, 2.0), 2.0, 0.5,
                               0x1.6a09e667f3bccp+0, 0x1.6a09e667f3bcdp+0, 0x1.6a09e667f3bcdp-1,
                               0x1.6a09e667f3bccp-1, 1e-16, 37.0};
  for (int e = -1074; e <= 1023; ++e) edges.push_back(std::ldexp(1.0, e));
  for (int i = 1; i < 2000; ++i) edges.insert(edges.end(), {1.0 + i * 0x1p-52, 1.0 - i * 0x1p-53});
  Worst w;
  auto check = [&](double x) { w.Add(x, PortableLog(x), std::log(static_cast<long double>(x))); };
  for (double x : Inputs(0, 10, 1'000'000, 1'000'000, 4, edges)) {
    if (x > 0) check(x);
  }
  for (double x : Inputs(0.5, 2, 500'000, 500'000, 5)) check(x);
  for (double x : LogUniform(-1074, 1024, 1'000'000, 6)) check(std::fabs(x));
  // The sampler's Gumbel noise: log(-log u), u in (0, 1) as KeyedUniform makes it.
  std::mt19937_64 rng(7);
  for (int i = 0; i < 1'000'000; ++i) {
    const double u = (static_cast<double>(rng() >> 11) + 0.5) * 0x1p-53;
    check(u);
    check(-PortableLog(u));
  }
  w.Expect(1.5L, "log");
}

TEST(PortableMathTest, Pow) {
  // Documented bound: (2 + 3 |exponent log base|) ulp of double.
  std::mt19937_64 rng(8);
  std::uniform_real_distribution<double> base(0.01, 1e6), exponent(-10, 10);
  long double worst = 0, worst_float = 0;
  auto check = [&](double b, double y) {
    const long double ref = std::pow(static_cast<long double>(b), static_cast<long double>(y));
    const double got = PortablePow(b, y);
    const long double l = std::fabs(y * std::log(static_cast<long double>(b)));
    worst = std::max(worst, UlpError(got, ref) / (2 + 3 * l));
    if (l < 80) worst_float = std::max(worst_float, FloatUlpError(static_cast<float>(got), ref));
  };
  for (int i = 0; i < 1'000'000; ++i) {
    const double b = base(rng);
    check(b, exponent(rng));
  }
  // RoPE's theta_scale = freq_base^(-2 / n_rot) and DRY's base^n.
  for (double b : {10000.0, 500000.0, 1000000.0, 10000000.0, 1.0e4 * 8, 160000.0}) {
    for (int n_rot = 2; n_rot <= 512; n_rot += 2) check(b, -2.0f / static_cast<float>(n_rot));
  }
  for (float b = 1.001f; b < 4; b += 0.0137f) {
    for (int n = 0; n < 200; ++n) check(b, n);
  }
  std::printf("pow: worst %.3Lf of the bound, %.3Lf ulp of float\n", worst, worst_float);
  EXPECT_LE(worst, 1.0L);
  EXPECT_LE(worst_float, 1.0L);
  EXPECT_EQ(PortablePow(1.0, kNaN), 1.0);
  EXPECT_EQ(PortablePow(1.0, 1e300), 1.0);
  EXPECT_EQ(PortablePow(7.0, 0.0), 1.0);
  EXPECT_EQ(PortablePow(2.0, 10.0), 1024.0);
  EXPECT_EQ(PortablePow(2.0, 2000.0), kInf);
  EXPECT_EQ(PortablePow(2.0, -2000.0), 0.0);
  EXPECT_TRUE(std::isnan(PortablePow(-2.0, 2.0)));
}

TEST(PortableMathTest, SinCos) {
  // Relative within the bound, or, next to the functions' zeros (where x's
  // reduction by pi/2 leaves a tiny r), absolute within 1e-15 * max(1, |x|).
  long double worst_sin = 0, worst_cos = 0, worst_abs = 0;
  double worst_sin_at = 0, worst_cos_at = 0;
  long double worst_float = 0;
  double worst_float_at = 0;
  int near_zero = 0;
  auto check = [&](double x) {
    double s, c;
    PortableSinCos(x, &s, &c);
    const long double xs = x, rs = std::sin(xs), rc = std::cos(xs);
    for (int i = 0; i < 2; ++i) {
      const double got = i == 0 ? s : c;
      const long double ref = i == 0 ? rs : rc;
      const long double u = UlpError(got, ref);
      const long double abs_err = std::fabs(got - ref) / std::max(1.0L, std::fabs(xs));
      if (std::fabs(ref) < 0x1p-20L) {
        ++near_zero;
        worst_abs = std::max(worst_abs, abs_err);
      } else if (i == 0 ? u > worst_sin : u > worst_cos) {
        (i == 0 ? worst_sin : worst_cos) = u;
        (i == 0 ? worst_sin_at : worst_cos_at) = x;
      }
      const long double f = FloatUlpError(static_cast<float>(got), ref);
      if (f > worst_float && std::fabs(ref) >= 0x1p-20L) worst_float = f, worst_float_at = x;
    }
  };
  for (double x : Inputs(-10, 10, 2'000'000, 500'000, 9, {0.0, -0.0, 0x1p-1074, 0x1p-30, 0.7853981633974483,
                                                          0.7853981633974484, 1e-8})) {
    check(x);
  }
  for (double x : Inputs(-1e6, 1e6, 1'000'000, 1'000'000, 10)) check(x);
  for (double x : LogUniform(-60, 29, 500'000, 11)) check(x);
  // RoPE: angle = position * base^(-2i / n_rot), in float.
  for (int pos = 0; pos < 1'100'000; pos += 37) {
    float theta = static_cast<float>(pos);
    const float scale = static_cast<float>(PortablePow(10000.0, -2.0f / 128.0f));
    for (int i = 0; i < 64; i += 7, theta *= scale * scale * scale * scale * scale * scale * scale) check(theta);
  }
  // The doubles nearest multiples of pi/2: tiny r, the reduction's hard case.
  for (long k = -100000; k <= 100000; ++k) {
    const double x = static_cast<double>(k * 1.5707963267948966192313216916397514L);
    check(x), check(std::nextafter(x, -kInf)), check(std::nextafter(x, kInf));
  }
  for (long k = 1; k < (1l << 29); k = k * 3 + 1) {
    const double x = static_cast<double>(k * 1.5707963267948966192313216916397514L);
    if (std::fabs(x) < 0x1p29) check(x), check(-x);
  }
  std::printf("sin: worst %.3Lf ulp, cos: %.3Lf ulp, next to zeros: %.3Lg * max(1, |x|) absolute (%d cases), "
              "%.3Lf ulp of float\n", worst_sin, worst_cos, worst_abs, near_zero, worst_float);
  EXPECT_LE(worst_sin, 2.0L) << "sin at " << std::hexfloat << worst_sin_at;
  EXPECT_LE(worst_cos, 2.0L) << "cos at " << std::hexfloat << worst_cos_at;
  EXPECT_LE(worst_abs, 1e-18L);  // RoPE needs ~1e-15; measured 5e-23
  EXPECT_LE(worst_float, 1.0L) << "at " << std::hexfloat << worst_float_at;
  EXPECT_GT(near_zero, 1000);  // the hard cases were reached
}

TEST(PortableMathTest, Tanh) {
  std::vector<double> edges = {0x1p-1074, -0x1p-1074, 0x1p-1022, 1e-300, 1e-8, 0.5, -0.5,
                               std::nextafter(0.5, 0.0), -std::nextafter(0.5, 0.0), 19.0, 20.0, 22.0, 40.0, 400.0};
  Worst w;
  auto check = [&](double x) { w.Add(x, PortableTanh(x), std::tanh(static_cast<long double>(x))); };
  for (double x : Inputs(-25, 25, 2'000'000, 1'000'000, 12, edges)) check(x);
  for (double x : Inputs(-1, 1, 1'000'000, 1'000'000, 13)) check(x);
  for (double x : LogUniform(-1074, 10, 500'000, 14)) check(x);
  // GELU's argument as ops.cc forms it, from every F16 magnitude's float.
  for (float h = -70000; h <= 70000; h += 0.37f) check(0.79788456080286535588f * h * (1.0f + 0.044715f * h * h));
  w.Expect(3.0L, "tanh");
}

TEST(PortableMathTest, Sigmoid) {
  Worst w;
  auto check = [&](double x) {
    const long double xl = x;
    w.Add(x, PortableSigmoid(x), 1.0L / (1.0L + std::exp(-xl)));
  };
  for (double x : Inputs(-745, 745, 2'000'000, 1'000'000, 15, {0.0, -0.0, 0x1p-1074, -36.0, 36.0, 40.0})) check(x);
  for (double x : Inputs(-2, 2, 500'000, 500'000, 16)) check(x);
  w.Expect(3.0L, "sigmoid");
}

TEST(PortableMathTest, SpecialValues) {
  EXPECT_EQ(PortableExp(0.0), 1.0);
  EXPECT_EQ(PortableExp(-0.0), 1.0);
  EXPECT_EQ(PortableExp(kInf), kInf);
  EXPECT_EQ(PortableExp(-kInf), 0.0);
  EXPECT_EQ(PortableExp(710.0), kInf);
  EXPECT_EQ(PortableExp(-746.0), 0.0);
  EXPECT_EQ(PortableExp(-745.0), 0x1p-1074);  // e^-745 = 4.9e-324 rounds to the least denormal
  EXPECT_EQ(PortableExp(0x1.62e42fefa39efp+9), 0x1.fffffffffff2ap+1023);
  EXPECT_TRUE(std::isnan(PortableExp(kNaN)));

  EXPECT_EQ(PortableLog(1.0), 0.0);
  EXPECT_FALSE(std::signbit(PortableLog(1.0)));
  EXPECT_EQ(PortableLog(0.0), -kInf);
  EXPECT_EQ(PortableLog(-0.0), -kInf);
  EXPECT_EQ(PortableLog(kInf), kInf);
  EXPECT_TRUE(std::isnan(PortableLog(-1.0)));
  EXPECT_TRUE(std::isnan(PortableLog(-kInf)));
  EXPECT_TRUE(std::isnan(PortableLog(kNaN)));
  EXPECT_EQ(PortableLog(2.0), 0x1.62e42fefa39efp-1);  // ln 2 correctly rounded
  EXPECT_EQ(PortableLog(0x1p-1074), -0x1.74385446d71c3p+9);  // -1074 ln 2 correctly rounded

  EXPECT_EQ(PortableTanh(0.0), 0.0);
  EXPECT_TRUE(std::signbit(PortableTanh(-0.0)));
  EXPECT_EQ(PortableTanh(0x1p-1074), 0x1p-1074);
  EXPECT_EQ(PortableTanh(25.0), 1.0);
  EXPECT_EQ(PortableTanh(-25.0), -1.0);
  EXPECT_EQ(PortableTanh(kInf), 1.0);
  EXPECT_EQ(PortableTanh(-kInf), -1.0);
  EXPECT_TRUE(std::isnan(PortableTanh(kNaN)));

  EXPECT_EQ(PortableSigmoid(0.0), 0.5);
  EXPECT_EQ(PortableSigmoid(kInf), 1.0);
  EXPECT_EQ(PortableSigmoid(-kInf), 0.0);
  EXPECT_TRUE(std::isnan(PortableSigmoid(kNaN)));

  double s, c;
  PortableSinCos(0.0, &s, &c);
  EXPECT_EQ(s, 0.0);
  EXPECT_EQ(c, 1.0);
  PortableSinCos(-0.0, &s, &c);
  EXPECT_EQ(s, 0.0);
  EXPECT_TRUE(std::signbit(s));
  EXPECT_EQ(c, 1.0);
  PortableSinCos(0x1p-1074, &s, &c);
  EXPECT_EQ(s, 0x1p-1074);
  EXPECT_EQ(c, 1.0);
  for (double bad : {kInf, -kInf, kNaN, 0x1p29, -0x1p40}) {
    PortableSinCos(bad, &s, &c);
    EXPECT_TRUE(std::isnan(s) && std::isnan(c)) << bad;
  }
}

// FNV-1a over the bits of each function's results on a fixed set of inputs.
// The constants were computed on x86-64 (-O2 -ffp-contract=off, with and
// without -mavx2 -mfma, the same); a CPU, compiler flag or code change that
// moves any bit fails here.
uint64_t Fnv(uint64_t h, double v) {
  const uint64_t bits = std::bit_cast<uint64_t>(v);
  for (int i = 0; i < 8; ++i) h = (h ^ ((bits >> (8 * i)) & 0xff)) * 0x100000001b3ull;
  return h;
}

uint64_t HashOf(const std::function<double(double)>& f, double lo, double hi) {
  uint64_t h = 0xcbf29ce484222325ull;
  std::mt19937_64 rng(42);
  for (int i = 0; i < 100'000; ++i) {
    const double x = lo + (hi - lo) * (static_cast<double>(rng() >> 11) * 0x1p-53);  // -ffp-contract=off: no fused rounding
    h = Fnv(h, f(x));
  }
  return h;
}

TEST(PortableMathTest, SameBitsEverywhere) {
  const auto sin = [](double x) { double s, c; PortableSinCos(x, &s, &c); return s; };
  const auto cos = [](double x) { double s, c; PortableSinCos(x, &s, &c); return c; };
  const uint64_t hashes[] = {
      HashOf(PortableExp, -745.5, 710),
      HashOf(PortableLog, 0, 1e6),
      HashOf([](double x) { return PortablePow(10000.0, x); }, -1, 1),
      HashOf(sin, -1e6, 1e6),
      HashOf(cos, -1e6, 1e6),
      HashOf(PortableTanh, -20, 20),
      HashOf(PortableSigmoid, -40, 40),
  };
  const uint64_t expected[] = {
      0x6c00ecf758019b1bull, 0x4213b56d075a55caull, 0xad617570b058297dull, 0xba8ee55e75d6dc0bull,
      0x955f4755a1f3e6f2ull, 0xbfcf0104889188c0ull, 0x0630c28ca682e3fdull,
  };
  for (size_t i = 0; i < std::size(hashes); ++i) {
    EXPECT_EQ(hashes[i], expected[i]) << "function " << i << ": 0x" << std::hex << hashes[i];
  }
}

}  // namespace
}  // namespace kakeya
