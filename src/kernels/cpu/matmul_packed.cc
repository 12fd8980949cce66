// MatMul for the 32-element block types (Q8_0, Q4_0, Q4_1, Q5_0, Q5_1) in
// their packed layouts (WeightLayout::kQ8_0x16 .. kQ5_1x16, see matmul.h),
// compiled once per SIMD target, and the packing itself. The x86 tiles are
// here, the ARM ones in matmul_packed_neon-inl.h.
//
// Why a packed layout: in GGUF's layout a column's 32 quants of a block are
// contiguous, so a vector instruction works on one column and every
// (row, column, block) needs its own horizontal bookkeeping; the cost grows
// with the rows and verifying a block of drafts costs several decode steps.
// Interleaving 16 columns puts 4 quants of each of them in one 64-byte
// vector: one broadcast activation quad meets all 16, one VNNI instruction
// does 64 multiply-adds, and the loaded weights serve every row of the batch
// while in registers.
//
// Packed Q8_0 block of a group of 16 columns (544 bytes):
//   [0, 32)     d[c] F16
//   [32, 544)   8 chunks of 64 bytes, chunk j byte 4c + k = q of element
//               4j + k of column c, stored as u = q + 128 (unsigned)
// Packed Q4_0 block, the same bytes as GGUF's Q4_0 rows:
//   [0, 32)     d[c] F16
//   [32, 288)   4 chunks of 64 bytes, chunk j byte 4c + k = GGUF's qs[4j + k]
//               of column c: low nibble u of element 4j + k, high nibble of
//               element 16 + 4j + k (u = q + 8, q in -8..7)
// Q4_1, Q5_0 and Q5_1 (Packed32Of gives the offsets) add to that, before the
// quant chunks: the F16 mins m[c] (Q4_1, Q5_1: the value is d * u + m), and
// a chunk of fifth bits (Q5_0, Q5_1: byte 4c + k, bit j = bit 4 of u of
// element 4j + k; Q5_0's u = q + 16).
//
// Arithmetic per (row, column) pair, the same on every target and for every
// tile shape (so results are bit-identical across batch sizes, threads and
// targets): for each block b in order,
//   isum = sum_k u_w[k] * q_x[k] - bias * sum_k q_x[k]   (exact int32, =
//          sum_k q_w[k] * q_x[k]; VNNI multiplies unsigned by signed bytes)
//   acc  = fma(float(isum), d_w * d_x, acc)
//   acc  = fma(m_w, s_x, acc)   (Q4_1, Q5_1; s_x = d_x * sum_k q_x[k])
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/cpu/matmul_packed.cc"
#include "kernels/cpu/matmul_internal.h"  // must precede hwy (target set)

#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#if HWY_ARCH_X86
#include <immintrin.h>
#elif HWY_ARCH_ARM_A64
#include <arm_neon.h>
#endif

#include "kernels/cpu/blocks.h"
#include "kernels/cpu/dequant.h"

#ifndef KAKEYA_MATMUL_PACKED_ONCE
#define KAKEYA_MATMUL_PACKED_ONCE
namespace kakeya {
constexpr int kGroupCols = kPackedGroupCols;
constexpr int kQuads = kQK / 4;  // int32 quads of activations per block

// Where a packed block's parts are, in bytes from its start (0: absent).
struct Packed32 {
  int64_t bytes;      // the block of a group
  int64_t mins;       // F16 m[c]
  int64_t high_bits;  // the fifth-bit chunk
  int64_t quants;     // the quant chunks (8 of bytes, or 4 of nibbles)
  int32_t bias;       // u = q + bias
};
constexpr Packed32 Packed32Of(WeightLayout l) {
  switch (l) {
    case WeightLayout::kQ8_0x16: return {544, 0, 0, 32, 128};
    case WeightLayout::kQ4_0x16: return {288, 0, 0, 32, 8};
    case WeightLayout::kQ4_1x16: return {320, 32, 0, 64, 0};
    case WeightLayout::kQ5_0x16: return {352, 0, 32, 96, 16};
    default: return {384, 32, 64, 128, 0};  // kQ5_1x16
  }
}
}  // namespace kakeya
#endif

HWY_BEFORE_NAMESPACE();
namespace kakeya {
namespace HWY_NAMESPACE {

// u_w of element e (0..31) of column c of a packed block.
template <WeightLayout kLayout>
HWY_INLINE int PackedU(const uint8_t* blk, int c, int e) {
  constexpr Packed32 kP = Packed32Of(kLayout);
  const uint8_t* quants = blk + kP.quants;
  if constexpr (kLayout == WeightLayout::kQ8_0x16) return quants[(e / 4 * kGroupCols + c) * 4 + e % 4];
  const uint8_t byte = quants[(e % 16 / 4 * kGroupCols + c) * 4 + e % 4];
  const int u = e < 16 ? byte & 0xF : byte >> 4;
  if constexpr (kP.high_bits == 0) return u;
  return u | ((blk[kP.high_bits + 4 * c + e % 4] >> (e / 4)) & 1) << 4;
}

// Reference kernel for targets without hand-written intrinsics.
template <WeightLayout kLayout>
void PackedPortable(const MatMulJob& job, int64_t col_begin, int64_t col_end) {
  const WeightMatrix& w = *job.w;
  const int64_t nb = w.n_in / kQK;
  const ActQ8& a = job.q8;
  const auto* data = static_cast<const uint8_t*>(w.data);
  for (int64_t o = col_begin; o < col_end; o += kGroupCols) {
    const uint8_t* group = data + o / kGroupCols * nb * Packed32Of(kLayout).bytes;
    const int n_cols = static_cast<int>(std::min<int64_t>(kGroupCols, col_end - o));
    for (int64_t r = 0; r < job.n_rows; ++r) {
      float acc[kGroupCols] = {};
      for (int64_t b = 0; b < nb; ++b) {
        const uint8_t* blk = group + b * Packed32Of(kLayout).bytes;
        const int64_t xb = r * nb + b;
        const int8_t* xq = a.qs + xb * kQK;
        int32_t isum[kGroupCols];
        std::fill(isum, isum + kGroupCols, -Packed32Of(kLayout).bias * a.sums[xb]);
        for (int c = 0; c < kGroupCols; ++c) {
          for (int e = 0; e < kQK; ++e) isum[c] += PackedU<kLayout>(blk, c, e) * xq[e];
        }
        for (int c = 0; c < kGroupCols; ++c) {
          uint16_t h;
          std::memcpy(&h, blk + 2 * c, 2);
          acc[c] = std::fma(static_cast<float>(isum[c]), F16ToF32(h) * a.d[xb], acc[c]);
          if constexpr (Packed32Of(kLayout).mins != 0) {
            std::memcpy(&h, blk + Packed32Of(kLayout).mins + 2 * c, 2);
            acc[c] = std::fma(F16ToF32(h), a.s[xb], acc[c]);
          }
        }
      }
      for (int c = 0; c < n_cols; ++c) job.y[r * w.n_out + o + c] = acc[c];
    }
  }
}

#if HWY_ARCH_X86 || HWY_ARCH_ARM_A64
// Software prefetch of the weights kPrefetchAhead bytes ahead of the block in
// use, within the thread's column range [.., end). Once a tile has several
// rows, the core is busy computing and the hardware prefetcher (which also
// stops at 4 KiB pages) falls behind: the time becomes compute + memory
// instead of the larger of the two. Measured on Zen 5 (matmul_bench, 64 MB
// Q8_0, 2 threads), 8 rows: 2.45 ms without, 1.47 ms at 8 KiB (1 row: 0.88 ms);
// 2, 4, 16 KiB and 32 KiB ahead were no better. Into L1 (T0) for tiles of
// 1-2 rows, into L2 (T1) above: measured on Zen 4 (1.25B Q8_0, 2 threads,
// bench verify, alternating), T1 took 1 row from 21.3 to 26.9 ms but 8 rows
// from 45.8 to 37.9 ms (4 rows 30.7 -> 28.7). On an Intel Xeon (AVX-512
// VNNI, matmul_bench on 1 GiB of Q8_0, 2 threads, roofline 30 GB/s), T1 was
// the better hint at every row count: 1 row 38.1 -> 36.1 ms, 2 rows 45.6 ->
// 37.0 ms (T0 at 2 rows left compute and memory in series), so x86 tiles
// take T0 only on AMD (FewRowsIntoL1). ARM (prfm) takes the same distances as
// AMD, not measured there.
constexpr int kPrefetchAhead = 8192;
template <WeightLayout kLayout, int kLocality>  // __builtin_prefetch's: 3 = T0 (L1), 2 = T1 (L2)
HWY_INLINE void PrefetchAhead(const uint8_t* blk, const uint8_t* end) {
  if (blk + kPrefetchAhead >= end) return;
  for (int l = 0; l < Packed32Of(kLayout).bytes; l += 64) __builtin_prefetch(blk + kPrefetchAhead + l, 0, kLocality);
}
template <int kRows>
constexpr int kPrefetchLocality = kRows <= 2 ? 3 : 2;
#endif

#if HWY_ARCH_X86
// Whether x86 tiles of 1-2 rows prefetch into L1 (above): on AMD, not on Intel.
inline bool FewRowsIntoL1() {
  static const bool amd = __builtin_cpu_is("amd");
  return amd;
}
template <WeightLayout kLayout, int kRows>
HWY_INLINE void PrefetchAheadX86(const uint8_t* blk, const uint8_t* end, bool few_rows_into_l1) {
  if (kRows <= 2 && few_rows_into_l1) return PrefetchAhead<kLayout, 3>(blk, end);
  PrefetchAhead<kLayout, 2>(blk, end);
}
#endif

#if HWY_TARGET == HWY_AVX3_DL
// AVX-512 VNNI: a tile is one group (16 columns = one zmm) by up to 8 rows.
// Per row and block: 8 vpdpbusd, one convert, one multiply, one FMA (and
// one more for a min); each 64-byte weight chunk is loaded once and used by
// all rows of the tile (a chunk of nibbles, split with a mask and a shift,
// by two vpdpbusd per row, in two chains; fifth bits go in at bit 4 with one
// vpternlogd per nibble).
#define KAKEYA_VNNI __attribute__((target("avx512vnni")))
constexpr int kMaxTileRows = 8;

template <WeightLayout kLayout, int kR>
HWY_NOINLINE KAKEYA_VNNI void PackedTileVnni(const uint8_t* group, const uint8_t* end, const ActQ8& a,
                                             int64_t nb, int64_t r0, bool few_rows_into_l1,
                                             float (*out)[kGroupCols]) {
  constexpr Packed32 kP = Packed32Of(kLayout);
  const __m512i low4 = _mm512_set1_epi8(0x0F), bit4 = _mm512_set1_epi8(0x10);
  __m512 acc[kR];
  for (int r = 0; r < kR; ++r) acc[r] = _mm512_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* blk = group + b * kP.bytes;
    PrefetchAheadX86<kLayout, kR>(blk, end, few_rows_into_l1);
    const __m512 dw = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk)));
    const uint8_t* quants = blk + kP.quants;
    __m512i s[kR];
    const int8_t* xq[kR];
    for (int r = 0; r < kR; ++r) {
      s[r] = _mm512_set1_epi32(-kP.bias * a.sums[(r0 + r) * nb + b]);
      xq[r] = a.qs + ((r0 + r) * nb + b) * kQK;
    }
    if constexpr (kLayout == WeightLayout::kQ8_0x16) {
      for (int j = 0; j < kQuads; ++j) {
        const __m512i wq = _mm512_loadu_si512(quants + 64 * j);
        for (int r = 0; r < kR; ++r) s[r] = _mm512_dpbusd_epi32(s[r], wq, BroadcastQuad512(xq[r] + 4 * j));
      }
    } else {
      __m512i s_hi[kR];  // elements 16..31: a second chain
      for (int r = 0; r < kR; ++r) s_hi[r] = _mm512_setzero_si512();
      // Bit j of a fifth-bit byte is element 4j + k's, bit 4 + j element
      // 16 + 4j + k's: shifted right by j, they sit at bits 0 and 4 (the
      // 16-bit shift moves the next byte's bits only into bits 5-7).
      __m512i high = kP.high_bits != 0 ? _mm512_loadu_si512(blk + kP.high_bits) : _mm512_setzero_si512();
      for (int j = 0; j < kQuads / 2; ++j) {
        const __m512i raw = _mm512_loadu_si512(quants + 64 * j);
        __m512i lo = _mm512_and_si512(raw, low4);
        __m512i hi = _mm512_and_si512(_mm512_srli_epi16(raw, 4), low4);
        if constexpr (kP.high_bits != 0) {
          lo = _mm512_ternarylogic_epi32(bit4, _mm512_slli_epi16(high, 4), lo, 0xCA);  // a ? b : c
          hi = _mm512_ternarylogic_epi32(bit4, high, hi, 0xCA);
          high = _mm512_srli_epi16(high, 1);
        }
        for (int r = 0; r < kR; ++r) {
          s[r] = _mm512_dpbusd_epi32(s[r], lo, BroadcastQuad512(xq[r] + 4 * j));
          s_hi[r] = _mm512_dpbusd_epi32(s_hi[r], hi, BroadcastQuad512(xq[r] + 16 + 4 * j));
        }
      }
      for (int r = 0; r < kR; ++r) s[r] = _mm512_add_epi32(s[r], s_hi[r]);
    }
    for (int r = 0; r < kR; ++r) {
      const __m512 scale = _mm512_mul_ps(dw, _mm512_set1_ps(a.d[(r0 + r) * nb + b]));
      acc[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s[r]), scale, acc[r]);
    }
    if constexpr (kP.mins != 0) {
      const __m512 mw = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + kP.mins)));
      for (int r = 0; r < kR; ++r) acc[r] = _mm512_fmadd_ps(mw, _mm512_set1_ps(a.s[(r0 + r) * nb + b]), acc[r]);
    }
  }
  for (int r = 0; r < kR; ++r) _mm512_storeu_ps(out[r], acc[r]);
}

template <WeightLayout kLayout>
void PackedX86(const MatMulJob& job, int64_t col_begin, int64_t col_end) {
  const int64_t nb = job.w->n_in / kQK;
  const bool few_rows_into_l1 = FewRowsIntoL1();
  ForEachPackedTile<kMaxTileRows>(
      job, col_begin, col_end, nb * Packed32Of(kLayout).bytes,
      [&](const uint8_t* group, const uint8_t* end, int64_t r0, int n, float (*out)[kGroupCols]) HWY_ATTR {
        WithRowCount<kMaxTileRows>(n, [&](auto rows) HWY_ATTR {
          PackedTileVnni<kLayout, decltype(rows)::value>(group, end, job.q8, nb, r0, few_rows_into_l1, out);
        });
      });
}
#undef KAKEYA_VNNI
#define KAKEYA_PACKED_KERNEL PackedX86

#elif HWY_TARGET == HWY_AVX2 || HWY_TARGET == HWY_AVX3
// AVX2 (also used by AVX-512 without VNNI, e.g. Skylake-X): a tile is half a
// group (8 columns = one ymm) by up to 4 rows, so accumulators and weights fit
// in 16 registers. maddubs multiplies unsigned by signed bytes. For Q8_0,
// (q + 128) * x would overflow its int16 pair sums, so it takes |q| * (x with
// q's sign) as llama.cpp does; the nibble types' u goes in as it is, and
// their pair sums fit int16 over a whole block of 4-bit u (8 * 2 * 15 * 127)
// or half a one of 5-bit u (4 * 2 * 31 * 127); the bias comes off after.
// Either way the int32 sums are the same exact integers.
constexpr int kMaxTileRows = 4;

template <WeightLayout kLayout, int kR>
HWY_NOINLINE void PackedTileAvx2(const uint8_t* group, const uint8_t* end, int half, const ActQ8& a,
                                 int64_t nb, int64_t r0, bool few_rows_into_l1, float (*out)[kGroupCols]) {
  constexpr Packed32 kP = Packed32Of(kLayout);
  const __m256i ones = _mm256_set1_epi16(1), bias = _mm256_set1_epi8(-128), low4 = _mm256_set1_epi8(0x0F);
  const __m256i bit4 = _mm256_set1_epi8(0x10);
  __m256 acc[kR];
  for (int r = 0; r < kR; ++r) acc[r] = _mm256_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* blk = group + b * kP.bytes;
    if (half == 0) PrefetchAheadX86<kLayout, kR>(blk, end, few_rows_into_l1);
    const __m256 dw = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + 16 * half)));
    const uint8_t* quants = blk + kP.quants + 32 * half;
    __m256i isum[kR];
    const int8_t* xq[kR];
    for (int r = 0; r < kR; ++r) xq[r] = a.qs + ((r0 + r) * nb + b) * kQK;
    if constexpr (kLayout == WeightLayout::kQ8_0x16) {
      for (int r = 0; r < kR; ++r) isum[r] = _mm256_setzero_si256();
      for (int j = 0; j < kQuads; ++j) {
        const __m256i u = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(quants + 64 * j));
        const __m256i q = _mm256_xor_si256(u, bias);  // back to signed
        const __m256i q_abs = _mm256_abs_epi8(q);     // -128 -> 128 as unsigned
        for (int r = 0; r < kR; ++r) {
          const __m256i x = BroadcastQuad256(xq[r] + 4 * j);
          const __m256i p = _mm256_maddubs_epi16(q_abs, _mm256_sign_epi8(x, q));
          isum[r] = _mm256_add_epi32(isum[r], _mm256_madd_epi16(p, ones));
          Pin(isum[r]);  // a chain, not a tree over the 8 quads (4 rows: 41.5 -> 39.2 us in L2)
        }
      }
    } else {
      constexpr int kChunksPerSum = kP.high_bits != 0 ? 2 : 4;  // int16 bounds (above)
      for (int r = 0; r < kR; ++r) isum[r] = _mm256_set1_epi32(-kP.bias * a.sums[(r0 + r) * nb + b]);
      // As in the VNNI tile: fifth bits at bits 0 and 4 after a shift by j.
      const auto* high_bits = reinterpret_cast<const __m256i*>(blk + kP.high_bits + 32 * half);
      __m256i high = kP.high_bits != 0 ? _mm256_loadu_si256(high_bits) : _mm256_setzero_si256();
      for (int j0 = 0; j0 < kQuads / 2; j0 += kChunksPerSum) {
        __m256i p[kR];  // int16 pairs
        for (int r = 0; r < kR; ++r) p[r] = _mm256_setzero_si256();
        for (int j = j0; j < j0 + kChunksPerSum; ++j) {
          const __m256i raw = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(quants + 64 * j));
          __m256i lo = _mm256_and_si256(raw, low4);
          __m256i hi = _mm256_and_si256(_mm256_srli_epi16(raw, 4), low4);
          if constexpr (kP.high_bits != 0) {
            lo = _mm256_or_si256(lo, _mm256_and_si256(_mm256_slli_epi16(high, 4), bit4));
            hi = _mm256_or_si256(hi, _mm256_and_si256(high, bit4));
            high = _mm256_srli_epi16(high, 1);
          }
          for (int r = 0; r < kR; ++r) {
            p[r] = _mm256_add_epi16(p[r], _mm256_maddubs_epi16(lo, BroadcastQuad256(xq[r] + 4 * j)));
            p[r] = _mm256_add_epi16(p[r], _mm256_maddubs_epi16(hi, BroadcastQuad256(xq[r] + 16 + 4 * j)));
            Pin(p[r]);
          }
        }
        for (int r = 0; r < kR; ++r) isum[r] = _mm256_add_epi32(isum[r], _mm256_madd_epi16(p[r], ones));
      }
    }
    for (int r = 0; r < kR; ++r) {
      const int64_t xb = (r0 + r) * nb + b;
      const __m256 scale = _mm256_mul_ps(dw, _mm256_set1_ps(a.d[xb]));
      acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum[r]), scale, acc[r]);
    }
    if constexpr (kP.mins != 0) {
      const __m256 mw = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + kP.mins + 16 * half)));
      for (int r = 0; r < kR; ++r) acc[r] = _mm256_fmadd_ps(mw, _mm256_set1_ps(a.s[(r0 + r) * nb + b]), acc[r]);
    }
  }
  for (int r = 0; r < kR; ++r) _mm256_storeu_ps(out[r] + 8 * half, acc[r]);
}

template <WeightLayout kLayout>
void PackedX86(const MatMulJob& job, int64_t col_begin, int64_t col_end) {
  const int64_t nb = job.w->n_in / kQK;
  const bool few_rows_into_l1 = FewRowsIntoL1();
  ForEachPackedTile<kMaxTileRows>(
      job, col_begin, col_end, nb * Packed32Of(kLayout).bytes,
      [&](const uint8_t* group, const uint8_t* end, int64_t r0, int n, float (*out)[kGroupCols]) HWY_ATTR {
        WithRowCount<kMaxTileRows>(n, [&](auto rows) HWY_ATTR {
          for (int half = 0; half < 2; ++half) {
            PackedTileAvx2<kLayout, decltype(rows)::value>(group, end, half, job.q8, nb, r0, few_rows_into_l1,
                                                          out);
          }
        });
      });
}
#define KAKEYA_PACKED_KERNEL PackedX86

#elif HWY_TARGET == HWY_NEON
#include "kernels/cpu/matmul_packed_neon-inl.h"
#else
#define KAKEYA_PACKED_KERNEL PackedPortable
#endif

MatMulKernel PackedKQuantKernel(WeightLayout layout);  // matmul_packed_kquant.cc

MatMulKernel PackedKernel(WeightLayout layout) {
  switch (layout) {
    case WeightLayout::kQ8_0x16: return &KAKEYA_PACKED_KERNEL<WeightLayout::kQ8_0x16>;
    case WeightLayout::kQ4_0x16: return &KAKEYA_PACKED_KERNEL<WeightLayout::kQ4_0x16>;
    case WeightLayout::kQ4_1x16: return &KAKEYA_PACKED_KERNEL<WeightLayout::kQ4_1x16>;
    case WeightLayout::kQ5_0x16: return &KAKEYA_PACKED_KERNEL<WeightLayout::kQ5_0x16>;
    case WeightLayout::kQ5_1x16: return &KAKEYA_PACKED_KERNEL<WeightLayout::kQ5_1x16>;
    default: return PackedKQuantKernel(layout);
  }
}
#undef KAKEYA_PACKED_KERNEL

}  // namespace HWY_NAMESPACE
}  // namespace kakeya
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace kakeya {

size_t Packed32Bytes(const WeightMatrix& w, WeightLayout layout) {
  const int64_t groups = (w.n_out + kGroupCols - 1) / kGroupCols;
  return static_cast<size_t>(groups * (w.n_in / kQK) * Packed32Of(layout).bytes);
}

// Column c's part of a packed block of a nibble type.
template <typename Block>
void PackNibbles(const Block& src, const Packed32& p, int c, uint8_t* blk) {
  std::memcpy(blk + 2 * c, &src.d, 2);
  if constexpr (requires { src.m; }) std::memcpy(blk + p.mins + 2 * c, &src.m, 2);
  if constexpr (requires { src.qh; }) {
    uint32_t qh;  // bit e: bit 4 of element e's u
    std::memcpy(&qh, src.qh, 4);
    for (int k = 0; k < 4; ++k) {
      uint8_t bits = 0;
      for (int j = 0; j < 8; ++j) bits |= static_cast<uint8_t>(((qh >> (4 * j + k)) & 1) << j);
      blk[p.high_bits + 4 * c + k] = bits;
    }
  }
  for (int j = 0; j < kQuads / 2; ++j) std::memcpy(blk + p.quants + (j * kGroupCols + c) * 4, src.qs + 4 * j, 4);
}

void Pack32(const WeightMatrix& w, WeightLayout layout, uint8_t* out) {
  const int64_t nb = w.n_in / kQK;
  const Packed32 p = Packed32Of(layout);
  const auto* src = static_cast<const uint8_t*>(w.data);
  if (w.n_out % kGroupCols != 0) {  // padding columns of the last group: scale 0
    const int64_t last = w.n_out / kGroupCols * nb * p.bytes;
    std::memset(out + last, 0, Packed32Bytes(w, layout) - static_cast<size_t>(last));
  }
  for (int64_t o = 0; o < w.n_out; ++o) {
    const uint8_t* row = src + o * w.row_bytes;
    const int c = static_cast<int>(o % kGroupCols);
    uint8_t* group = out + o / kGroupCols * nb * p.bytes;
    for (int64_t b = 0; b < nb; ++b) {
      uint8_t* blk = group + b * p.bytes;
      switch (layout) {
        case WeightLayout::kQ8_0x16: {
          const BlockQ8_0& src_blk = reinterpret_cast<const BlockQ8_0*>(row)[b];
          std::memcpy(blk + 2 * c, &src_blk.d, 2);
          for (int j = 0; j < kQuads; ++j) {
            uint32_t quad;
            std::memcpy(&quad, src_blk.qs + 4 * j, 4);
            quad ^= 0x80808080u;  // q + 128 in each byte
            std::memcpy(blk + p.quants + (j * kGroupCols + c) * 4, &quad, 4);
          }
          break;
        }
        case WeightLayout::kQ4_0x16: PackNibbles(reinterpret_cast<const BlockQ4_0*>(row)[b], p, c, blk); break;
        case WeightLayout::kQ4_1x16: PackNibbles(reinterpret_cast<const BlockQ4_1*>(row)[b], p, c, blk); break;
        case WeightLayout::kQ5_0x16: PackNibbles(reinterpret_cast<const BlockQ5_0*>(row)[b], p, c, blk); break;
        default: PackNibbles(reinterpret_cast<const BlockQ5_1*>(row)[b], p, c, blk); break;
      }
    }
  }
}

}  // namespace kakeya
#endif
