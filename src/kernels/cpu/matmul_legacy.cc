// MatMul kernels for the 32-element block types Q8_0, Q4_0, Q5_0 (signed
// quants) and Q4_1, Q5_1 (unsigned quants plus a min), compiled once per SIMD
// target. Activations arrive quantized per row (ActQ8).
//
// Per (row, column) pair and block b, the integer dot product
// sum_k q_w[k] * q_x[k] is exact; the float part is
//   acc += (d_w * d_x) * dot   [+ m_w * (d_x * sum_k q_x[k])  for Q4_1/Q5_1]
// accumulated in block order (portable kernel) or, on x86, per int32 lane of
// the dot product (lane = 4 consecutive elements of a block) and summed over
// lanes at the end. Either way the sequence per pair is fixed.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/cpu/matmul_legacy.cc"
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

// A weight block decoded to one int8 per element: q - 8 / q - 16 / q for the
// signed types, q (0..15 / 0..31) for Q4_1/Q5_1.
struct Decoded {
  int8_t q[kQK];
  float d;
  float m;  // 0 for the signed types
};

template <DType kType>
HWY_INLINE Decoded DecodeBlock(const uint8_t* row, int64_t b) {
  Decoded out;
  if constexpr (kType == DType::kQ8_0) {
    const auto& blk = reinterpret_cast<const BlockQ8_0*>(row)[b];
    std::copy(blk.qs, blk.qs + kQK, out.q);
    out.d = F16ToF32(blk.d);
    out.m = 0;
  } else if constexpr (kType == DType::kQ4_0) {
    const auto& blk = reinterpret_cast<const BlockQ4_0*>(row)[b];
    for (int j = 0; j < 16; ++j) {
      out.q[j] = static_cast<int8_t>((blk.qs[j] & 0xF) - 8);
      out.q[j + 16] = static_cast<int8_t>((blk.qs[j] >> 4) - 8);
    }
    out.d = F16ToF32(blk.d);
    out.m = 0;
  } else if constexpr (kType == DType::kQ5_0 || kType == DType::kQ5_1) {
    using Block = std::conditional_t<kType == DType::kQ5_0, BlockQ5_0, BlockQ5_1>;
    constexpr int kOffset = kType == DType::kQ5_0 ? 16 : 0;
    const auto& blk = reinterpret_cast<const Block*>(row)[b];
    const uint32_t h = LoadU32(blk.qh);
    for (int j = 0; j < 16; ++j) {
      out.q[j] = static_cast<int8_t>(((blk.qs[j] & 0xF) | ((h >> j) & 1) << 4) - kOffset);
      out.q[j + 16] =
          static_cast<int8_t>(((blk.qs[j] >> 4) | ((h >> (j + 16)) & 1) << 4) - kOffset);
    }
    out.d = F16ToF32(blk.d);
    if constexpr (kType == DType::kQ5_1) out.m = F16ToF32(blk.m);
    else out.m = 0;
  } else {
    static_assert(kType == DType::kQ4_1);
    const auto& blk = reinterpret_cast<const BlockQ4_1*>(row)[b];
    for (int j = 0; j < 16; ++j) {
      out.q[j] = static_cast<int8_t>(blk.qs[j] & 0xF);
      out.q[j + 16] = static_cast<int8_t>(blk.qs[j] >> 4);
    }
    out.d = F16ToF32(blk.d);
    out.m = F16ToF32(blk.m);
  }
  return out;
}

// Portable kernel: one column at a time, each block decoded once and applied
// to a tile of up to kTile rows (a runtime count: one code path for all).
template <DType kType>
void LegacyMatMulPortable(const MatMulJob& job, int64_t col_begin, int64_t col_end) {
  constexpr int kTile = 8;
  constexpr bool kHasMin = kType == DType::kQ4_1 || kType == DType::kQ5_1;
  const WeightMatrix& w = *job.w;
  const int64_t nb = w.n_in / kQK;
  const ActQ8& a = job.q8;
  for (int64_t o = col_begin; o < col_end; ++o) {
    const auto* row = static_cast<const uint8_t*>(w.data) + o * w.row_bytes;
    for (int64_t r0 = 0; r0 < job.n_rows; r0 += kTile) {
      const int n = static_cast<int>(std::min<int64_t>(kTile, job.n_rows - r0));
      float acc[kTile] = {};
      for (int64_t b = 0; b < nb; ++b) {
        const Decoded blk = DecodeBlock<kType>(row, b);
        for (int r = 0; r < n; ++r) {
          const int64_t xb = (r0 + r) * nb + b;
          const int8_t* xq = a.qs + xb * kQK;
          int32_t dot = 0;
          for (int k = 0; k < kQK; ++k) dot += blk.q[k] * xq[k];
          acc[r] += (blk.d * a.d[xb]) * static_cast<float>(dot);
          if constexpr (kHasMin) acc[r] += blk.m * a.s[xb];
        }
      }
      for (int r = 0; r < n; ++r) job.y[(r0 + r) * w.n_out + o] = acc[r];
    }
  }
}

#if HWY_TARGET == HWY_AVX2 || HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL
// x86 kernels. Per (row, column) pair the int32 lanes of the block dot
// products (lane = 4 consecutive elements) are converted to float and
// accumulated with an FMA by (d_w * d_x) into one vector per pair:
//   AVX-512: one zmm = 2 blocks (16 lanes), AVX2: one ymm = 1 block.
// Integer dot products: AVX-512 VNNI vpdpbusd; otherwise maddubs + madd.
// vpdpbusd and maddubs multiply unsigned by signed bytes: unsigned quants
// (Q4_1/Q5_1) go straight in; for signed quants VNNI uses (x + 128) * w and
// starts the sum at -128 * sum(w) (computed once per weight vector), the
// others use |w| * (x with the sign of w).

constexpr bool kAvx512 = HWY_TARGET != HWY_AVX2;
constexpr int kStep = kAvx512 ? 2 : 1;  // blocks per vector
// One column per tile: on Zen 5 one weight stream per thread decodes 1 row
// at ~2x the speed of two interleaved rows (measured). Up to 8 rows (AVX-512,
// 32 registers) or 4 (AVX2, 16) share each prepared weight vector.
constexpr int kCols = 1;
constexpr int kMaxRows = kAvx512 ? 8 : 4;

#if HWY_TARGET == HWY_AVX2
using VI = __m256i;
using VF = __m256;
HWY_INLINE VF Cvt(VI v) { return _mm256_cvtepi32_ps(v); }
HWY_INLINE VF MulF(VF a, VF b) { return _mm256_mul_ps(a, b); }
HWY_INLINE VF Fma(VF a, VF b, VF c) { return _mm256_fmadd_ps(a, b, c); }
HWY_INLINE VF ZeroF() { return _mm256_setzero_ps(); }
HWY_INLINE float ReduceF(VF v) {
  const __m128 s4 = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  const __m128 s2 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
  return _mm_cvtss_f32(_mm_add_ss(s2, _mm_movehdup_ps(s2)));
}
HWY_INLINE VI Join(__m256i a, __m256i) { return a; }
HWY_INLINE VI LoadQ(const int8_t* p, int) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)); }
// The F16 scale at p0 in all lanes.
HWY_INLINE VF HalfScales(const uint8_t* p0, const uint8_t*, int) {
  uint16_t h;
  std::memcpy(&h, p0, 2);
  return _mm256_cvtph_ps(_mm_set1_epi16(static_cast<short>(h)));
}
// Activation block scale in all lanes / block sum in lane 0 only.
HWY_INLINE VF BlockScales(const float* d, int) { return _mm256_broadcast_ss(d); }
HWY_INLINE VF BlockSums(const float* s, int) { return _mm256_zextps128_ps256(_mm_load_ss(s)); }
#else
using VI = __m512i;
using VF = __m512;
HWY_INLINE VF Cvt(VI v) { return _mm512_cvtepi32_ps(v); }
HWY_INLINE VF MulF(VF a, VF b) { return _mm512_mul_ps(a, b); }
HWY_INLINE VF Fma(VF a, VF b, VF c) { return _mm512_fmadd_ps(a, b, c); }
HWY_INLINE VF ZeroF() { return _mm512_setzero_ps(); }
HWY_INLINE float ReduceF(VF v) { return _mm512_reduce_add_ps(v); }
HWY_INLINE VI Join(__m256i a, __m256i b) {
  return _mm512_inserti64x4(_mm512_castsi256_si512(a), b, 1);
}
// n = 1: the last, odd block; the upper half is zero (and so are its scales).
HWY_INLINE VI LoadQ(const int8_t* p, int n) {
  return n == 2 ? _mm512_loadu_si512(p)
                : _mm512_zextsi256_si512(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
}
// The F16 scales at p0 and p1 in lanes 0..7 and 8..15.
HWY_INLINE VF HalfScales(const uint8_t* p0, const uint8_t* p1, int n) {
  uint16_t h0, h1 = 0;
  std::memcpy(&h0, p0, 2);
  if (n == 2) std::memcpy(&h1, p1, 2);
  const __m256i idx = _mm256_setr_epi16(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1);
  const __m128i both = _mm_cvtsi32_si128(static_cast<int>(h0 | static_cast<uint32_t>(h1) << 16));
  return _mm512_cvtph_ps(_mm256_permutexvar_epi16(idx, _mm256_castsi128_si256(both)));
}
// Activation block scales in lanes 0..7 and 8..15 / block sums in lanes 0 and 8.
HWY_INLINE VF BlockScales(const float* d, int n) {
  const __m256 hi = n == 2 ? _mm256_broadcast_ss(d + 1) : _mm256_setzero_ps();
  return _mm512_insertf32x8(_mm512_castps256_ps512(_mm256_broadcast_ss(d)), hi, 1);
}
HWY_INLINE VF BlockSums(const float* s, int n) {
  const __m256 hi = _mm256_zextps128_ps256(n == 2 ? _mm_load_ss(s + 1) : _mm_setzero_ps());
  return _mm512_insertf32x8(_mm512_zextps256_ps512(_mm256_zextps128_ps256(_mm_load_ss(s))), hi, 1);
}
#endif

// AVX3_DL's Highway target string lacks avx512vnni (1.0.3); VNNI is part of
// the runtime check for AVX3_DL, so functions using it add the attribute.
#if HWY_TARGET == HWY_AVX3_DL
#define KAKEYA_VNNI __attribute__((target("avx512vnni")))
#else
#define KAKEYA_VNNI
#endif

// Elements j and j + 16 from the nibbles of qs[j], in element order.
HWY_INLINE __m256i Nibbles(const uint8_t* qs) {
  const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(qs));
  return _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(v, 4), v), _mm256_set1_epi8(0x0F));
}

// 0x10 in byte j where bit j of the little-endian u32 at qh is set.
HWY_INLINE __m256i HighBits(const uint8_t* qh) {
  const uint32_t h = LoadU32(qh);
#if HWY_TARGET == HWY_AVX2
  // llama.cpp's bytes_from_bits_32: byte j = byte j/8 of h, then test bit j%8.
  const __m256i shuf = _mm256_setr_epi64x(0, 0x0101010101010101, 0x0202020202020202,
                                          0x0303030303030303);
  __m256i bytes = _mm256_shuffle_epi8(_mm256_set1_epi32(static_cast<int>(h)), shuf);
  bytes = _mm256_or_si256(bytes, _mm256_set1_epi64x(0x7fbfdfeff7fbfdfe));
  return _mm256_and_si256(_mm256_cmpeq_epi8(bytes, _mm256_set1_epi64x(-1)), _mm256_set1_epi8(0x10));
#else
  return _mm256_maskz_mov_epi8(h, _mm256_set1_epi8(0x10));
#endif
}

template <DType kType>
constexpr bool kSigned = kType == DType::kQ8_0 || kType == DType::kQ4_0 || kType == DType::kQ5_0;

// One block's quants as bytes in element order (signed or unsigned, see
// Decoded).
template <DType kType>
HWY_INLINE __m256i BlockQuants(const uint8_t* blk) {
  if constexpr (kType == DType::kQ8_0) {
    return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + 2));
  } else if constexpr (kType == DType::kQ4_0) {
    return _mm256_sub_epi8(Nibbles(blk + 2), _mm256_set1_epi8(8));
  } else if constexpr (kType == DType::kQ4_1) {
    return Nibbles(blk + 4);
  } else if constexpr (kType == DType::kQ5_0) {
    return _mm256_sub_epi8(_mm256_or_si256(Nibbles(blk + 6), HighBits(blk + 2)),
                           _mm256_set1_epi8(16));
  } else {
    static_assert(kType == DType::kQ5_1);
    return _mm256_or_si256(Nibbles(blk + 8), HighBits(blk + 4));
  }
}

// kStep blocks of one weight row, ready for Dot.
struct WVec {
  VI q;
  VI aux;  // VNNI signed: -128 * sum of 4 quants per lane; else signed: |q|
  VF d, m;  // per lane, its block's scale and min (Q4_1/Q5_1)
};

template <DType kType>
HWY_INLINE KAKEYA_VNNI WVec PrepareW(const uint8_t* row, int64_t b, int n) {
  constexpr int64_t kBytes = kBlockBytes<kType>;
  const uint8_t* b0 = row + b * kBytes;
  const uint8_t* b1 = b0 + kBytes;  // read only if n == 2
  const __m256i q0 = BlockQuants<kType>(b0);
  const __m256i q1 = n == 2 ? BlockQuants<kType>(b1) : _mm256_setzero_si256();
  WVec w;
  w.q = Join(q0, q1);
  w.d = HalfScales(b0, b1, n);
  if constexpr (!kSigned<kType>) w.m = HalfScales(b0 + 2, b1 + 2, n);
  if constexpr (kSigned<kType>) {
#if HWY_TARGET == HWY_AVX3_DL
    const VI zero = _mm512_setzero_si512();
    w.aux = _mm512_sub_epi32(zero, _mm512_dpbusd_epi32(zero, _mm512_set1_epi8(-128), w.q));
#elif HWY_TARGET == HWY_AVX3
    w.aux = _mm512_abs_epi8(w.q);
#else
    w.aux = _mm256_abs_epi8(w.q);
#endif
  }
  return w;
}

// Per lane: the sum of 4 products q_w * q_x. VNNI signed: x is x + 128.
template <DType kType>
HWY_INLINE KAKEYA_VNNI VI Dot(const WVec& w, VI x) {
#if HWY_TARGET == HWY_AVX3_DL
  if constexpr (kSigned<kType>) return _mm512_dpbusd_epi32(w.aux, x, w.q);
  return _mm512_dpbusd_epi32(_mm512_setzero_si512(), w.q, x);
#elif HWY_TARGET == HWY_AVX3
  const VI ones = _mm512_set1_epi16(1);
  if constexpr (kSigned<kType>) {
    const VI xs = _mm512_mask_sub_epi8(x, _mm512_movepi8_mask(w.q), _mm512_setzero_si512(), x);
    return _mm512_madd_epi16(_mm512_maddubs_epi16(w.aux, xs), ones);
  }
  return _mm512_madd_epi16(_mm512_maddubs_epi16(w.q, x), ones);
#else
  const VI ones = _mm256_set1_epi16(1);
  if constexpr (kSigned<kType>) {
    return _mm256_madd_epi16(_mm256_maddubs_epi16(w.aux, _mm256_sign_epi8(x, w.q)), ones);
  }
  return _mm256_madd_epi16(_mm256_maddubs_epi16(w.q, x), ones);
#endif
}

template <DType kType, int kR>
HWY_NOINLINE KAKEYA_VNNI void LegacyTileX86(const uint8_t* const* w, const ActQ8& a, int64_t nb,
                                            int64_t r0, float (*out)[kCols]) {
  constexpr bool kHasMin = !kSigned<kType>;
  VF acc[kR][kCols];
  for (int r = 0; r < kR; ++r) {
    for (int c = 0; c < kCols; ++c) acc[r][c] = ZeroF();
  }
  for (int64_t b = 0; b < nb; b += kStep) {
    const int n = static_cast<int>(std::min<int64_t>(kStep, nb - b));
    WVec wv[kCols];
    for (int c = 0; c < kCols; ++c) wv[c] = PrepareW<kType>(w[c], b, n);
    for (int r = 0; r < kR; ++r) {
      const int64_t xb = (r0 + r) * nb + b;
      VI x = LoadQ(a.qs + xb * kQK, n);
#if HWY_TARGET == HWY_AVX3_DL
      if constexpr (kSigned<kType>) x = _mm512_xor_si512(x, _mm512_set1_epi8(-128));
#endif
      const VF dx = BlockScales(a.d + xb, n);
      for (int c = 0; c < kCols; ++c) {
        acc[r][c] = Fma(Cvt(Dot<kType>(wv[c], x)), MulF(wv[c].d, dx), acc[r][c]);
        if constexpr (kHasMin) acc[r][c] = Fma(wv[c].m, BlockSums(a.s + xb, n), acc[r][c]);
      }
    }
  }
  for (int r = 0; r < kR; ++r) {
    for (int c = 0; c < kCols; ++c) out[r][c] = ReduceF(acc[r][c]);
  }
}

template <DType kType>
void LegacyMatMulX86(const MatMulJob& job, int64_t col_begin, int64_t col_end) {
  const int64_t nb = job.w->n_in / kQK;
  ForEachTile<kCols, kMaxRows>(
      job, col_begin, col_end,
      [&](const uint8_t* const* w, int64_t r0, int n_rows, float (*out)[kCols]) HWY_ATTR {
        switch (n_rows) {
          case 1: return LegacyTileX86<kType, 1>(w, job.q8, nb, r0, out);
          case 2: return LegacyTileX86<kType, 2>(w, job.q8, nb, r0, out);
          case 3: return LegacyTileX86<kType, 3>(w, job.q8, nb, r0, out);
          case 4: return LegacyTileX86<kType, 4>(w, job.q8, nb, r0, out);
          default: return LegacyTileX86<kType, kMaxRows>(w, job.q8, nb, r0, out);
        }
      });
}
#undef KAKEYA_VNNI

#define KAKEYA_LEGACY_KERNEL LegacyMatMulX86
#else
#define KAKEYA_LEGACY_KERNEL LegacyMatMulPortable
#endif  // x86

MatMulKernel LegacyQuantKernel(DType type) {
  switch (type) {
    case DType::kQ8_0: return &KAKEYA_LEGACY_KERNEL<DType::kQ8_0>;
    case DType::kQ4_0: return &KAKEYA_LEGACY_KERNEL<DType::kQ4_0>;
    case DType::kQ4_1: return &KAKEYA_LEGACY_KERNEL<DType::kQ4_1>;
    case DType::kQ5_0: return &KAKEYA_LEGACY_KERNEL<DType::kQ5_0>;
    case DType::kQ5_1: return &KAKEYA_LEGACY_KERNEL<DType::kQ5_1>;
    default: return nullptr;
  }
}
#undef KAKEYA_LEGACY_KERNEL

}  // namespace HWY_NAMESPACE
}  // namespace kakeya
HWY_AFTER_NAMESPACE();
