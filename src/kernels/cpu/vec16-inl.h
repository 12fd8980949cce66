// 16-float vectors (GCC/Clang vector extensions) and the helpers the row
// kernels share (ops.cc, attention.cc), and KAKEYA_PER_ISA, which compiles a
// kernel body once per vector ISA. Internal to src/kernels/cpu: include it
// from a .cc file only, after the standard headers.
#pragma once

// The vector types below are passed only between always_inline functions, so
// the ABI note GCC gives for each one (-Wpsabi) never applies.
#pragma GCC diagnostic ignored "-Wpsabi"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "kernels/cpu/matmul.h"

namespace kakeya {
namespace {

// 16 floats as one value: GCC/Clang vector extensions, lowered to whatever
// width the function is compiled for (one zmm, two ymm, four xmm) with the
// same element-wise arithmetic, so the sums below keep one order everywhere.
typedef float Float16x __attribute__((vector_size(64)));
constexpr int kLanes = 16;

inline __attribute__((always_inline)) Float16x Load16(const float* p) {
  Float16x v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

typedef float Float8x __attribute__((vector_size(32)));
typedef float Float4x __attribute__((vector_size(16)));
typedef float Float2x __attribute__((vector_size(8)));
typedef double Double8x __attribute__((vector_size(64)));
typedef double Double4x __attribute__((vector_size(32)));
typedef double Double2x __attribute__((vector_size(16)));
typedef uint32_t UInt16x __attribute__((vector_size(64)));

// Adds the upper half of a vector onto its lower half: lane l += lane l + width/2.
template <typename Half, typename Whole>
inline __attribute__((always_inline)) Half FoldHalves(const Whole& v) {
  Half lo, hi;
  std::memcpy(&lo, &v, sizeof lo);
  std::memcpy(&hi, reinterpret_cast<const char*>(&v) + sizeof lo, sizeof hi);
  return lo + hi;
}

// The lanes of v added in a fixed tree: lane l += lane l + 8, then + 4, + 2, + 1.
inline __attribute__((always_inline)) float SumLanes(const Float16x& v) {
  const Float2x pair = FoldHalves<Float2x>(FoldHalves<Float4x>(FoldHalves<Float8x>(v)));
  return pair[0] + pair[1];
}

// Lane j = SumLanes(v[j]) for 16 vectors at once: each level of SumLanes'
// tree (halves of 8, 4, 2, then 1 lane) done for several vectors per add by
// gathering their lower and upper halves into two vectors. The same pairs are
// added in the same order, so every lane has SumLanes' bits; summing one
// vector at a time went through memory (a 64-byte store read back as scalars,
// which stalls store forwarding) and was half the time of attention.
inline __attribute__((always_inline)) Float16x SumLanes16(const Float16x (&v)[kLanes]) {
  Float16x eights[8], fours[4], twos[2];
  for (int m = 0; m < 8; ++m) {  // keys 2m, 2m+1: 8 lanes each
    eights[m] = __builtin_shufflevector(v[2 * m], v[2 * m + 1], 0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21, 22, 23) +
                __builtin_shufflevector(v[2 * m], v[2 * m + 1], 8, 9, 10, 11, 12, 13, 14, 15, 24, 25, 26, 27, 28, 29, 30, 31);
  }
  for (int m = 0; m < 4; ++m) {  // keys 4m .. 4m+3: 4 lanes each
    fours[m] = __builtin_shufflevector(eights[2 * m], eights[2 * m + 1], 0, 1, 2, 3, 8, 9, 10, 11, 16, 17, 18, 19, 24, 25, 26, 27) +
               __builtin_shufflevector(eights[2 * m], eights[2 * m + 1], 4, 5, 6, 7, 12, 13, 14, 15, 20, 21, 22, 23, 28, 29, 30, 31);
  }
  for (int m = 0; m < 2; ++m) {  // keys 8m .. 8m+7: 2 lanes each
    twos[m] = __builtin_shufflevector(fours[2 * m], fours[2 * m + 1], 0, 1, 4, 5, 8, 9, 12, 13, 16, 17, 20, 21, 24, 25, 28, 29) +
              __builtin_shufflevector(fours[2 * m], fours[2 * m + 1], 2, 3, 6, 7, 10, 11, 14, 15, 18, 19, 22, 23, 26, 27, 30, 31);
  }
  return __builtin_shufflevector(twos[0], twos[1], 0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30) +
         __builtin_shufflevector(twos[0], twos[1], 1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
}

// e^x for x <= 0 (softmax terms), lane by lane, for a float vector F and the
// int vector I of its size: Cephes' expf (x = n ln2 + r, degree-5 polynomial
// for e^r, 2^n through the exponent bits), within a few ulp of std::exp.
// Below -87 it returns ~1e-38 instead of denormals or 0, which no softmax sum
// (>= 1: the maximum's term is e^0) can see.
template <typename F, typename I>
inline __attribute__((always_inline)) F ExpNonPositiveLanes(F x) {
  const F zero = {};
  x = x < zero - 87.0f ? zero - 87.0f : x;
  const F magic = zero + 12582912.0f;  // 1.5 * 2^23: adding it rounds to an integer
  const F t = x * 1.44269504088896341f + magic;
  const F n = t - magic;
  F r = x - n * 0.693359375f;
  r = r - n * -2.12194440e-4f;
  F p = r * 1.9875691500e-4f + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.0f;
  I t_bits, magic_bits;
  std::memcpy(&t_bits, &t, sizeof t);
  std::memcpy(&magic_bits, &magic, sizeof magic);
  const I exponent = (t_bits - magic_bits + 127) << 23;  // the bits of 2^n
  F scale;
  std::memcpy(&scale, &exponent, sizeof scale);
  return p * scale;
}

typedef int32_t Int16x __attribute__((vector_size(64)));
typedef int32_t Int8x __attribute__((vector_size(32)));

inline __attribute__((always_inline)) Float16x ExpNonPositive(Float16x x) { return ExpNonPositiveLanes<Float16x, Int16x>(x); }

// 16 lanes as two 8-lane halves (lanes 0-7 and 8-15) with Float16x's
// lane-by-lane arithmetic, hence its bits. GCC keeps a 64-byte vector in
// memory when the target has no 64-byte registers (AVX2, SSE2, NEON): every
// operation on it loads and stores; two 32-byte halves live in AVX2's
// registers. Kernels written for either type (attention.cc) build with
// Float16x for AVX-512 and with Halves elsewhere.
struct Halves {
  Float8x lo, hi;
};
inline __attribute__((always_inline)) Halves operator+(Halves a, Halves b) { return {a.lo + b.lo, a.hi + b.hi}; }
inline __attribute__((always_inline)) Halves operator-(Halves a, Halves b) { return {a.lo - b.lo, a.hi - b.hi}; }
inline __attribute__((always_inline)) Halves operator*(Halves a, Halves b) { return {a.lo * b.lo, a.hi * b.hi}; }
inline __attribute__((always_inline)) Halves operator*(float s, Halves a) { return {s * a.lo, s * a.hi}; }
inline __attribute__((always_inline)) Halves operator*(Halves a, float s) { return {a.lo * s, a.hi * s}; }
inline __attribute__((always_inline)) Halves operator-(Halves a, float s) { return {a.lo - s, a.hi - s}; }
inline __attribute__((always_inline)) Halves& operator+=(Halves& a, Halves b) { return a = a + b; }
inline __attribute__((always_inline)) Halves& operator*=(Halves& a, float s) { return a = a * s; }

// The helpers the kernels use on either type.
template <typename V>
inline __attribute__((always_inline)) V Splat(float x) {
  if constexpr (std::is_same_v<V, Float16x>) {
    return Float16x{} + x;
  } else {
    const Float8x h = Float8x{} + x;
    return {h, h};
  }
}
// Halves load and store half by half: a memcpy of the whole struct went
// through a stack copy.
template <typename V>
inline __attribute__((always_inline)) V LoadLanes(const float* p) {
  if constexpr (std::is_same_v<V, Float16x>) {
    return Load16(p);
  } else {
    Float8x lo, hi;
    std::memcpy(&lo, p, sizeof lo);
    std::memcpy(&hi, p + 8, sizeof hi);
    return {lo, hi};
  }
}
template <typename V>
inline __attribute__((always_inline)) void StoreLanes(float* p, const V& v) {
  if constexpr (std::is_same_v<V, Float16x>) {
    std::memcpy(p, &v, sizeof v);
  } else {
    std::memcpy(p, &v.lo, sizeof v.lo);
    std::memcpy(p + 8, &v.hi, sizeof v.hi);
  }
}
template <typename V>
inline __attribute__((always_inline)) float Lane(const V& v, int i) {
  if constexpr (std::is_same_v<V, Float16x>) {
    return v[i];
  } else {
    return i < 8 ? v.lo[i] : v.hi[i - 8];
  }
}
// The largest lane, by a > b ? a : b in a tree (a NaN lane may or may not
// win; the scalar loop it replaces ignored them, and a NaN score makes the
// row's weights NaN either way).
template <typename V>
inline __attribute__((always_inline)) float MaxLanes(const V& v) {
  Float8x lo, hi;
  if constexpr (std::is_same_v<V, Float16x>) {
    std::memcpy(&lo, &v, sizeof lo);
    std::memcpy(&hi, reinterpret_cast<const char*>(&v) + sizeof lo, sizeof hi);
  } else {
    lo = v.lo, hi = v.hi;
  }
  const Float8x m8 = lo > hi ? lo : hi;
  const Float4x a = __builtin_shufflevector(m8, m8, 0, 1, 2, 3), b = __builtin_shufflevector(m8, m8, 4, 5, 6, 7);
  const Float4x m4 = a > b ? a : b;
  const float m01 = m4[0] > m4[1] ? m4[0] : m4[1], m23 = m4[2] > m4[3] ? m4[2] : m4[3];
  return m01 > m23 ? m01 : m23;
}
inline __attribute__((always_inline)) Halves ExpNonPositive(Halves x) {
  return {ExpNonPositiveLanes<Float8x, Int8x>(x.lo), ExpNonPositiveLanes<Float8x, Int8x>(x.hi)};
}
// SumLanes: lane l += lane l + 8 is the halves' sum.
inline __attribute__((always_inline)) float SumLanes(const Halves& v) {
  const Float2x pair = FoldHalves<Float2x>(FoldHalves<Float4x>(v.lo + v.hi));
  return pair[0] + pair[1];
}

// SumLanes16 on halves: the same pairs added at every level (lane j of the
// result is SumLanes(v[j])), each level's shuffles taken within the halves.
inline __attribute__((always_inline)) Halves SumLanes16(const Halves (&v)[kLanes]) {
  Halves eights[8], fours[4], twos[2];
  for (int m = 0; m < 8; ++m) eights[m] = {v[2 * m].lo + v[2 * m].hi, v[2 * m + 1].lo + v[2 * m + 1].hi};
  auto level = [](const Halves& x, const Halves& y, auto first, auto second) __attribute__((always_inline)) {
    return Halves{first(x) + second(x), first(y) + second(y)};
  };
  for (int m = 0; m < 4; ++m) {  // lanes 0-3 of each half, then 4-7
    fours[m] = level(
        eights[2 * m], eights[2 * m + 1],
        [](const Halves& h) { return __builtin_shufflevector(h.lo, h.hi, 0, 1, 2, 3, 8, 9, 10, 11); },
        [](const Halves& h) { return __builtin_shufflevector(h.lo, h.hi, 4, 5, 6, 7, 12, 13, 14, 15); });
  }
  for (int m = 0; m < 2; ++m) {  // lane pairs 0-1, 4-5, ... then 2-3, 6-7, ...
    twos[m] = level(
        fours[2 * m], fours[2 * m + 1],
        [](const Halves& h) { return __builtin_shufflevector(h.lo, h.hi, 0, 1, 4, 5, 8, 9, 12, 13); },
        [](const Halves& h) { return __builtin_shufflevector(h.lo, h.hi, 2, 3, 6, 7, 10, 11, 14, 15); });
  }
  return level(
      twos[0], twos[1], [](const Halves& h) { return __builtin_shufflevector(h.lo, h.hi, 0, 2, 4, 6, 8, 10, 12, 14); },
      [](const Halves& h) { return __builtin_shufflevector(h.lo, h.hi, 1, 3, 5, 7, 9, 11, 13, 15); });
}

}  // namespace
}  // namespace kakeya

// A kernel's Body (RmsNorm, AttendKvHead, GeluMul, SiluMul) is compiled for AVX-512, AVX2 and the
// baseline (the vector types above lower to each width with the same
// arithmetic) and run in the build that the active CPU target names
// (ActiveVectorIsa, matmul.h), so KAKEYA_CPU_TARGET and the tests that force
// each target reach them as they reach MatMul. Measured on Zen 5 (1.25B
// Q4_K_M, 8 rows, context 64): attention alone was 11% of the step in the
// baseline (SSE2) build. GCC's target_clones chose by CPU at load instead,
// which no test could override and which ThreadSanitizer builds crash on.
// The project builds with -ffp-contract=off (ADR 0014), so no build fuses a
// multiply and an add that the baseline rounds twice: every ISA's Body gives
// the same bits.
#if defined(__x86_64__) && defined(__GNUC__)
#define KAKEYA_PER_ISA(name, params, args)                                         \
  static __attribute__((target("avx512f"))) void name##Avx512 params { name##Body args; } \
  static __attribute__((target("avx2,fma"))) void name##Avx2 params { name##Body args; } \
  void name params {                                                               \
    switch (ActiveVectorIsa()) {                                                   \
      case VectorIsa::kAvx512: return name##Avx512 args;                           \
      case VectorIsa::kAvx2: return name##Avx2 args;                               \
      case VectorIsa::kBaseline: break;                                            \
    }                                                                              \
    name##Body args;                                                               \
  }
#else
#define KAKEYA_PER_ISA(name, params, args) \
  void name params { name##Body args; }
#endif

