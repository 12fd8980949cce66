// MatMul kernels for the K-quants Q4_K, Q5_K and Q6_K, compiled once per SIMD
// target. Activations arrive as Q8_K rows (ActQ8K), as in llama.cpp.
//
// Per (row, column) pair and super-block, two exact integer sums are formed
//   sumi = sum_s sc[s] * sum_{i in s} q_w[i] * q_x[i]
//   summ = sum_s mn[s] * (sum of q_x over s)          (Q4_K / Q5_K, from bsums)
// and the float part is acc += (d_w * d_x) * sumi - (dmin_w * d_x) * summ,
// in super-block order (portable kernel), or on AVX-512 per int32 lane of the
// sums, lanes added at the end. Q6_K carries its -32 offset inside q_w.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/cpu/matmul_kquant.cc"
#include "kernels/cpu/matmul_internal.h"  // must precede hwy (target set)

#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include <algorithm>
#include <cstring>
#if HWY_ARCH_X86
#include <immintrin.h>
#endif

#include "kernels/cpu/blocks.h"
#include "kernels/cpu/dequant.h"

HWY_BEFORE_NAMESPACE();
namespace kakeya {
namespace HWY_NAMESPACE {

// A super-block decoded to one int8 per element (in element order) and
// integer scales per 16 elements (Q4_K/Q5_K repeat each 32-wide scale twice).
struct DecodedK {
  int8_t q[kQKK];
  int16_t sc[16];
  int16_t mn[16];  // 0 for Q6_K
  float d;
  float dmin;      // 0 for Q6_K
};

template <DType kType>
HWY_INLINE void DecodeSuperBlock(const uint8_t* row, int64_t b, DecodedK& out) {
  if constexpr (kType == DType::kQ4_K || kType == DType::kQ5_K) {
    using Block = std::conditional_t<kType == DType::kQ4_K, BlockQ4_K, BlockQ5_K>;
    const auto& blk = reinterpret_cast<const Block*>(row)[b];
    for (int s = 0; s < 8; ++s) {
      uint8_t sc, mn;
      ScaleMinK4(s, blk.scales, &sc, &mn);
      out.sc[2 * s] = out.sc[2 * s + 1] = sc;
      out.mn[2 * s] = out.mn[2 * s + 1] = mn;
    }
    for (int e = 0; e < kQKK; ++e) {
      const int s = e / 32, l = e % 32;
      const uint8_t byte = blk.qs[32 * (e / 64) + l];
      int q = (s % 2 == 0) ? (byte & 0xF) : (byte >> 4);
      if constexpr (kType == DType::kQ5_K) q += 16 * ((blk.qh[l] >> s) & 1);
      out.q[e] = static_cast<int8_t>(q);
    }
    out.d = F16ToF32(blk.d);
    out.dmin = F16ToF32(blk.dmin);
  } else {
    static_assert(kType == DType::kQ6_K);
    const auto& blk = reinterpret_cast<const BlockQ6_K*>(row)[b];
    for (int e = 0; e < kQKK; ++e) {
      const int h = e / 128, k = (e % 128) / 32, l = e % 32;
      const uint8_t lo = blk.ql[64 * h + 32 * (k & 1) + l];
      const int low4 = (k < 2) ? (lo & 0xF) : (lo >> 4);
      const int hi2 = (blk.qh[32 * h + l] >> (2 * k)) & 3;
      out.q[e] = static_cast<int8_t>((low4 | hi2 << 4) - 32);
    }
    for (int s = 0; s < 16; ++s) {
      out.sc[s] = blk.scales[s];
      out.mn[s] = 0;
    }
    out.d = F16ToF32(blk.d);
    out.dmin = 0;
  }
}

// Portable kernel: one column at a time, each super-block decoded once and
// applied to a tile of up to kTile rows (a runtime count: one code path).
template <DType kType>
void KQuantMatMulPortable(const MatMulJob& job, int64_t col_begin, int64_t col_end) {
  constexpr int kTile = 8;
  const WeightMatrix& w = *job.w;
  const int64_t nsb = w.n_in / kQKK;
  const ActQ8K& a = job.q8k;
  DecodedK blk;
  for (int64_t o = col_begin; o < col_end; ++o) {
    const auto* row = static_cast<const uint8_t*>(w.data) + o * w.row_bytes;
    for (int64_t r0 = 0; r0 < job.n_rows; r0 += kTile) {
      const int n = static_cast<int>(std::min<int64_t>(kTile, job.n_rows - r0));
      float acc[kTile] = {};
      for (int64_t b = 0; b < nsb; ++b) {
        DecodeSuperBlock<kType>(row, b, blk);
        for (int r = 0; r < n; ++r) {
          const int64_t xr = r0 + r;
          const int8_t* xq = a.qs + xr * w.n_in + b * kQKK;
          const int16_t* bsums = a.bsums + (xr * nsb + b) * 16;
          int32_t sumi = 0, summ = 0;
          for (int g = 0; g < 16; ++g) {
            int32_t dot = 0;
            for (int l = 0; l < 16; ++l) dot += blk.q[16 * g + l] * xq[16 * g + l];
            sumi += blk.sc[g] * dot;
            summ += blk.mn[g] * bsums[g];
          }
          const float dx = a.d[xr * nsb + b];
          acc[r] += (blk.d * dx) * static_cast<float>(sumi);
          acc[r] -= (blk.dmin * dx) * static_cast<float>(summ);
        }
      }
      for (int r = 0; r < n; ++r) job.y[(r0 + r) * w.n_out + o] = acc[r];
    }
  }
}

#if HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL
// AVX-512 kernels. A super-block is 4 zmm of 64 quants in element order,
// formed once per column and applied to up to 8 activation rows:
//   maddubs(q_w as u8, q_x) -> int16 pairs, then vpdpwssd (VNNI) or
//   madd + add with the sub-block scales as int16 -> int32 lanes.
// q_w is unsigned for maddubs: Q4_K/Q5_K quants are, Q6_K uses q + 32 and
// subtracts 32 * sum_s sc[s] * bsum_x(s) (exact, in int32) as llama.cpp does.
// Per pair and super-block: the int32 vector -> float, times d_w (minus the
// min sums times dmin_w), then one FMA by d_x into one float vector per pair.

// AVX3_DL's Highway target string lacks avx512vnni (1.0.3); VNNI is part of
// the runtime check for AVX3_DL, so functions using it add the attribute.
#if HWY_TARGET == HWY_AVX3_DL
#define KAKEYA_VNNI __attribute__((target("avx512vnni")))
#else
#define KAKEYA_VNNI
#endif

// Prepared weights take 9 registers, so one column per tile; 8 rows.
constexpr int kCols = 1;
constexpr int kMaxRows = 8;

HWY_INLINE KAKEYA_VNNI __m512i DotI16(__m512i acc, __m512i a, __m512i b) {
#if HWY_TARGET == HWY_AVX3_DL
  return _mm512_dpwssd_epi32(acc, a, b);
#else
  return _mm512_add_epi32(acc, _mm512_madd_epi16(a, b));
#endif
}

HWY_INLINE __m512i Join256(__m256i lo, __m256i hi) {
  return _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);
}

HWY_INLINE float HalfAt(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return _cvtsh_ss(h);
}

// Int16 lanes: lane j = v[idx[j]] for the 8 or 16 int16 values in v.
HWY_INLINE __m512i Spread(__m256i v, const int16_t* idx) {
  return _mm512_permutexvar_epi16(_mm512_loadu_si512(idx), _mm512_zextsi256_si512(v));
}

struct KVec {
  __m512i q[4];   // u8 quants of elements [64k, 64k + 64)
  __m512i sc[4];  // int16 scale of each int16 pair lane of q[k]
  __m256i mn;     // int16 x 16: per 16 elements, the min (Q4_K/Q5_K) or scale (Q6_K)
  float d, dmin;
};

template <DType kType>
HWY_INLINE KVec PrepareK(const uint8_t* row, int64_t b) {
  KVec w;
  const __m512i low4 = _mm512_set1_epi8(0x0F);
  if constexpr (kType == DType::kQ4_K || kType == DType::kQ5_K) {
    using Block = std::conditional_t<kType == DType::kQ4_K, BlockQ4_K, BlockQ5_K>;
    const auto& blk = reinterpret_cast<const Block*>(row)[b];
    // sc[0..7], mn[0..7] as bytes (llama.cpp's utmp unpacking).
    uint32_t u[4];
    std::memcpy(u, blk.scales, 12);
    u[3] = ((u[2] >> 4) & 0x0f0f0f0f) | (((u[1] >> 6) & 0x03030303) << 4);
    const uint32_t mins_lo = u[1] & 0x3f3f3f3f;
    u[1] = (u[2] & 0x0f0f0f0f) | (((u[0] >> 6) & 0x03030303) << 4);
    u[2] = mins_lo;
    u[0] &= 0x3f3f3f3f;
    const __m256i sc_mn = _mm256_cvtepu8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(u)));
    // Lanes 0..15 of q[k] are sub-block 2k, 16..31 sub-block 2k + 1.
    alignas(64) static constexpr int16_t kScIdx[4][32] = {
        {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1},
        {2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3},
        {4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5},
        {6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7}};
    alignas(64) static constexpr int16_t kMnIdx[32] = {8,  8,  9,  9,  10, 10, 11, 11, 12, 12, 13,
                                                       13, 14, 14, 15, 15, 0,  0,  0,  0,  0,  0,
                                                       0,  0,  0,  0,  0,  0,  0,  0,  0,  0};
    for (int k = 0; k < 4; ++k) w.sc[k] = Spread(sc_mn, kScIdx[k]);
    w.mn = _mm512_castsi512_si256(Spread(sc_mn, kMnIdx));
    // qs[32g + l]: low nibble = element 64g + l, high nibble = 64g + 32 + l.
    for (int j = 0; j < 2; ++j) {
      const __m512i raw = _mm512_loadu_si512(blk.qs + 64 * j);
      const __m512i lo = _mm512_and_si512(raw, low4);
      const __m512i hi = _mm512_and_si512(_mm512_srli_epi16(raw, 4), low4);
      w.q[2 * j] = _mm512_shuffle_i64x2(lo, hi, _MM_SHUFFLE(1, 0, 1, 0));
      w.q[2 * j + 1] = _mm512_shuffle_i64x2(lo, hi, _MM_SHUFFLE(3, 2, 3, 2));
    }
    if constexpr (kType == DType::kQ5_K) {
      // Bit s of qh[l] is the fifth bit of element 32s + l.
      const __m512i qh = _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk.qh)));
      for (int k = 0; k < 4; ++k) {
        const __m512i bit = Join256(_mm256_set1_epi8(static_cast<char>(1 << (2 * k))),
                                    _mm256_set1_epi8(static_cast<char>(1 << (2 * k + 1))));
        const __mmask64 set = _mm512_test_epi8_mask(qh, bit);
        w.q[k] = _mm512_mask_add_epi8(w.q[k], set, w.q[k], _mm512_set1_epi8(16));
      }
    }
    w.d = HalfAt(reinterpret_cast<const uint8_t*>(&blk.d));
    w.dmin = HalfAt(reinterpret_cast<const uint8_t*>(&blk.dmin));
  } else {
    static_assert(kType == DType::kQ6_K);
    const auto& blk = reinterpret_cast<const BlockQ6_K*>(row)[b];
    const __m256i sc = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(blk.scales)));
    // 128-bit lane i of q[v] is sub-block 4v + i (16 elements).
    alignas(64) static constexpr int16_t kScIdx[4][32] = {
        {0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3},
        {4, 4, 4, 4, 4, 4, 4, 4, 5, 5, 5, 5, 5, 5, 5, 5, 6, 6, 6, 6, 6, 6, 6, 6, 7, 7, 7, 7, 7, 7, 7, 7},
        {8, 8, 8, 8, 8, 8, 8, 8, 9, 9, 9, 9, 9, 9, 9, 9, 10, 10, 10, 10, 10, 10, 10, 10, 11, 11, 11, 11, 11, 11, 11, 11},
        {12, 12, 12, 12, 12, 12, 12, 12, 13, 13, 13, 13, 13, 13, 13, 13, 14, 14, 14, 14, 14, 14, 14, 14, 15, 15, 15, 15, 15, 15, 15, 15}};
    for (int v = 0; v < 4; ++v) w.sc[v] = Spread(sc, kScIdx[v]);
    w.mn = sc;
    // ql[64h + l]: low nibble = element 128h + l, high = 128h + 64 + l;
    // bits 2k..2k+1 of qh[32h + l] are the top bits of element 128h + 32k + l.
    const __m512i shift_lo = Join256(_mm256_set1_epi16(0), _mm256_set1_epi16(2));
    const __m512i shift_hi = Join256(_mm256_set1_epi16(4), _mm256_set1_epi16(6));
    const __m512i two_bits = _mm512_set1_epi8(3);
    for (int h = 0; h < 2; ++h) {
      const __m512i ql = _mm512_loadu_si512(blk.ql + 64 * h);
      const __m512i qh = _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk.qh + 32 * h)));
      const __m512i top_lo = _mm512_slli_epi16(_mm512_and_si512(_mm512_srlv_epi16(qh, shift_lo), two_bits), 4);
      const __m512i top_hi = _mm512_slli_epi16(_mm512_and_si512(_mm512_srlv_epi16(qh, shift_hi), two_bits), 4);
      w.q[2 * h] = _mm512_or_si512(_mm512_and_si512(ql, low4), top_lo);
      w.q[2 * h + 1] = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(ql, 4), low4), top_hi);
    }
    w.d = HalfAt(reinterpret_cast<const uint8_t*>(&blk.d));
    w.dmin = 0;
  }
  return w;
}

template <DType kType, int kR>
HWY_NOINLINE KAKEYA_VNNI void KQuantTileX86(const uint8_t* const* w, const ActQ8K& a,
                                            int64_t n_in, int64_t r0, float (*out)[kCols]) {
  const int64_t nsb = n_in / kQKK;
  __m512 acc[kR];
  for (int r = 0; r < kR; ++r) acc[r] = _mm512_setzero_ps();
  for (int64_t b = 0; b < nsb; ++b) {
    const KVec wv = PrepareK<kType>(w[0], b);
    const __m512 d = _mm512_set1_ps(wv.d), neg_dmin = _mm512_set1_ps(-wv.dmin);
    for (int r = 0; r < kR; ++r) {
      const int64_t xb = (r0 + r) * nsb + b;
      const int8_t* xq = a.qs + xb * kQKK;
      // Two int32 chains for latency; integer sums are exact in any order.
      __m512i s0 = _mm512_setzero_si512(), s1 = _mm512_setzero_si512();
      s0 = DotI16(s0, _mm512_maddubs_epi16(wv.q[0], _mm512_loadu_si512(xq)), wv.sc[0]);
      s1 = DotI16(s1, _mm512_maddubs_epi16(wv.q[1], _mm512_loadu_si512(xq + 64)), wv.sc[1]);
      s0 = DotI16(s0, _mm512_maddubs_epi16(wv.q[2], _mm512_loadu_si512(xq + 128)), wv.sc[2]);
      s1 = DotI16(s1, _mm512_maddubs_epi16(wv.q[3], _mm512_loadu_si512(xq + 192)), wv.sc[3]);
      __m512i sumi = _mm512_add_epi32(s0, s1);
      // Per 32 elements: sum of bsums x (min or scale), 8 int32 lanes.
      const __m256i bsums = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a.bsums + xb * 16));
      const __m256i msum = _mm256_madd_epi16(bsums, wv.mn);
      const __m512 dx = _mm512_set1_ps(a.d[xb]);
      if constexpr (kType == DType::kQ6_K) {
        sumi = _mm512_sub_epi32(sumi, _mm512_zextsi256_si512(_mm256_slli_epi32(msum, 5)));
        acc[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sumi), _mm512_mul_ps(d, dx), acc[r]);
      } else {
        // (d * sumi - dmin * summ) * d_x
        const __m512 t = _mm512_fmadd_ps(_mm512_zextps256_ps512(_mm256_cvtepi32_ps(msum)), neg_dmin,
                                         _mm512_mul_ps(_mm512_cvtepi32_ps(sumi), d));
        acc[r] = _mm512_fmadd_ps(t, dx, acc[r]);
      }
    }
  }
  for (int r = 0; r < kR; ++r) out[r][0] = _mm512_reduce_add_ps(acc[r]);
}
#undef KAKEYA_VNNI

#elif HWY_TARGET == HWY_AVX2
// AVX2 kernels: a super-block is 8 ymm of 32 quants in element order, each
// decoded once per column and applied to up to 4 activation rows (int32 sums
// for the rows stay in registers): maddubs + madd by the sub-block scale.
// The float part per pair and super-block is as on AVX-512 (8 lanes).

constexpr int kCols = 1;
constexpr int kMaxRows = 4;

HWY_INLINE float HalfAt(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return _cvtsh_ss(h);
}

HWY_INLINE __m256i Load256(const void* p) { return _mm256_loadu_si256(static_cast<const __m256i*>(p)); }

// The super-block's scales: per chunk k (32 elements) an int16 scale vector,
// and per 16 elements the min (Q4_K/Q5_K) or scale (Q6_K) for the bsums.
struct KScales {
  __m256i sc[8];
  __m256i mn;
  float d, dmin;
};

template <DType kType>
HWY_INLINE void PrepareScales(const uint8_t* row, int64_t b, KScales& s) {
  if constexpr (kType == DType::kQ6_K) {
    const auto& blk = reinterpret_cast<const BlockQ6_K*>(row)[b];
    for (int k = 0; k < 8; ++k) {
      s.sc[k] = _mm256_set_m128i(_mm_set1_epi16(blk.scales[2 * k + 1]), _mm_set1_epi16(blk.scales[2 * k]));
    }
    s.mn = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(blk.scales)));
    s.d = HalfAt(reinterpret_cast<const uint8_t*>(&blk.d));
    s.dmin = 0;
  } else {
    using Block = std::conditional_t<kType == DType::kQ4_K, BlockQ4_K, BlockQ5_K>;
    const auto& blk = reinterpret_cast<const Block*>(row)[b];
    uint8_t sc[8], mn[8];
    for (int k = 0; k < 8; ++k) {
      ScaleMinK4(k, blk.scales, &sc[k], &mn[k]);
      s.sc[k] = _mm256_set1_epi16(sc[k]);
    }
    // mn[s] at int16 lanes 2s and 2s + 1 (one per 16 elements).
    const __m128i mn8 = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(mn));
    s.mn = _mm256_cvtepu8_epi16(_mm_unpacklo_epi8(mn8, mn8));
    s.d = HalfAt(reinterpret_cast<const uint8_t*>(&blk.d));
    s.dmin = HalfAt(reinterpret_cast<const uint8_t*>(&blk.dmin));
  }
}

// Quants of elements [32k, 32k + 32) as u8 (Q6_K: q + 32).
template <DType kType>
HWY_INLINE __m256i ChunkQuants(const uint8_t* row, int64_t b, int k) {
  const __m256i low4 = _mm256_set1_epi8(0x0F);
  if constexpr (kType == DType::kQ6_K) {
    const auto& blk = reinterpret_cast<const BlockQ6_K*>(row)[b];
    const int h = k / 4, kk = k % 4;
    const __m256i ql = Load256(blk.ql + 64 * h + 32 * (kk & 1));
    const __m256i nib = kk < 2 ? _mm256_and_si256(ql, low4) : _mm256_and_si256(_mm256_srli_epi16(ql, 4), low4);
    const __m256i qh = _mm256_srl_epi16(Load256(blk.qh + 32 * h), _mm_cvtsi32_si128(2 * kk));
    return _mm256_or_si256(nib, _mm256_slli_epi16(_mm256_and_si256(qh, _mm256_set1_epi8(3)), 4));
  } else {
    using Block = std::conditional_t<kType == DType::kQ4_K, BlockQ4_K, BlockQ5_K>;
    const auto& blk = reinterpret_cast<const Block*>(row)[b];
    const __m256i qs = Load256(blk.qs + 32 * (k / 2));
    __m256i q = k % 2 == 0 ? _mm256_and_si256(qs, low4) : _mm256_and_si256(_mm256_srli_epi16(qs, 4), low4);
    if constexpr (kType == DType::kQ5_K) {
      const __m256i bit = _mm256_set1_epi8(static_cast<char>(1 << k));
      const __m256i set = _mm256_cmpeq_epi8(_mm256_and_si256(Load256(blk.qh), bit), bit);
      q = _mm256_or_si256(q, _mm256_and_si256(set, _mm256_set1_epi8(16)));
    }
    return q;
  }
}

template <DType kType, int kR>
HWY_NOINLINE void KQuantTileX86(const uint8_t* const* w, const ActQ8K& a, int64_t n_in,
                                int64_t r0, float (*out)[kCols]) {
  const int64_t nsb = n_in / kQKK;
  __m256 acc[kR];
  for (int r = 0; r < kR; ++r) acc[r] = _mm256_setzero_ps();
  KScales s;
  for (int64_t b = 0; b < nsb; ++b) {
    PrepareScales<kType>(w[0], b, s);
    __m256i sumi[kR];
    for (int r = 0; r < kR; ++r) sumi[r] = _mm256_setzero_si256();
    for (int k = 0; k < 8; ++k) {
      const __m256i q = ChunkQuants<kType>(w[0], b, k);
      for (int r = 0; r < kR; ++r) {
        const __m256i x = Load256(a.qs + ((r0 + r) * nsb + b) * kQKK + 32 * k);
        const __m256i p = _mm256_madd_epi16(_mm256_maddubs_epi16(q, x), s.sc[k]);
        sumi[r] = _mm256_add_epi32(sumi[r], p);
      }
    }
    const __m256 d = _mm256_set1_ps(s.d), neg_dmin = _mm256_set1_ps(-s.dmin);
    for (int r = 0; r < kR; ++r) {
      const int64_t xb = (r0 + r) * nsb + b;
      const __m256i msum = _mm256_madd_epi16(Load256(a.bsums + xb * 16), s.mn);
      const __m256 dx = _mm256_set1_ps(a.d[xb]);
      if constexpr (kType == DType::kQ6_K) {
        const __m256i exact = _mm256_sub_epi32(sumi[r], _mm256_slli_epi32(msum, 5));
        acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(exact), _mm256_mul_ps(d, dx), acc[r]);
      } else {
        // (d * sumi - dmin * summ) * d_x
        const __m256 t = _mm256_fmadd_ps(_mm256_cvtepi32_ps(msum), neg_dmin,
                                         _mm256_mul_ps(_mm256_cvtepi32_ps(sumi[r]), d));
        acc[r] = _mm256_fmadd_ps(t, dx, acc[r]);
      }
    }
  }
  for (int r = 0; r < kR; ++r) {
    const __m128 s4 = _mm_add_ps(_mm256_castps256_ps128(acc[r]), _mm256_extractf128_ps(acc[r], 1));
    const __m128 s2 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
    out[r][0] = _mm_cvtss_f32(_mm_add_ss(s2, _mm_movehdup_ps(s2)));
  }
}
#endif

#if HWY_TARGET == HWY_AVX2 || HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL
template <DType kType>
void KQuantMatMulX86(const MatMulJob& job, int64_t col_begin, int64_t col_end) {
  const int64_t n_in = job.w->n_in;
  ForEachTile<kCols, kMaxRows>(
      job, col_begin, col_end,
      [&](const uint8_t* const* w, int64_t r0, int n_rows, float (*out)[kCols]) HWY_ATTR {
        switch (n_rows) {
          case 1: return KQuantTileX86<kType, 1>(w, job.q8k, n_in, r0, out);
          case 2: return KQuantTileX86<kType, 2>(w, job.q8k, n_in, r0, out);
          case 3: return KQuantTileX86<kType, 3>(w, job.q8k, n_in, r0, out);
          case 4: return KQuantTileX86<kType, 4>(w, job.q8k, n_in, r0, out);
          default: return KQuantTileX86<kType, kMaxRows>(w, job.q8k, n_in, r0, out);
        }
      });
}

#define KAKEYA_KQUANT_KERNEL KQuantMatMulX86
#else
#define KAKEYA_KQUANT_KERNEL KQuantMatMulPortable
#endif  // x86

MatMulKernel KQuantKernel(DType type) {
  switch (type) {
    case DType::kQ4_K: return &KAKEYA_KQUANT_KERNEL<DType::kQ4_K>;
    case DType::kQ5_K: return &KAKEYA_KQUANT_KERNEL<DType::kQ5_K>;
    case DType::kQ6_K: return &KAKEYA_KQUANT_KERNEL<DType::kQ6_K>;
    default: return nullptr;
  }
}
#undef KAKEYA_KQUANT_KERNEL

}  // namespace HWY_NAMESPACE
}  // namespace kakeya
HWY_AFTER_NAMESPACE();
