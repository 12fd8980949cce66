// MatMul for Q8_0 and Q4_0 weights in the packed layouts WeightLayout::kQ8_0x16
// and kQ4_0x16 (see matmul.h), compiled once per SIMD target, and the packing
// itself.
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
// Packed Q8_0 block of a group of 16 columns (kQ8_0BlockBytes):
//   [0, 32)     d[c] F16
//   [32, 544)   8 chunks of 64 bytes, chunk j byte 4c + k = q of element
//               4j + k of column c, stored as u = q + 128 (unsigned)
// Packed Q4_0 block (kQ4_0BlockBytes), the same bytes as GGUF's Q4_0 rows:
//   [0, 32)     d[c] F16
//   [32, 288)   4 chunks of 64 bytes, chunk j byte 4c + k = GGUF's qs[4j + k]
//               of column c: low nibble u of element 4j + k, high nibble of
//               element 16 + 4j + k (u = q + 8, q in -8..7)
//
// Arithmetic per (row, column) pair, the same on every target and for every
// tile shape (so results are bit-identical across batch sizes, threads and
// targets): for each block b in order,
//   isum = sum_k u_w[k] * q_x[k] - bias * sum_k q_x[k]   (bias 128 / 8; exact
//          int32, = sum_k q_w[k] * q_x[k]: VNNI multiplies unsigned by
//          signed bytes)
//   acc  = fma(float(isum), d_w * d_x, acc)
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
#endif

#include "kernels/cpu/blocks.h"
#include "kernels/cpu/dequant.h"

#ifndef KAKEYA_MATMUL_PACKED_ONCE
#define KAKEYA_MATMUL_PACKED_ONCE
namespace kakeya {
constexpr int kGroupCols = kPackedGroupCols;
constexpr int kQuads = kQK / 4;  // int32 quads of activations per block
constexpr int64_t kQ8_0BlockBytes = kGroupCols * (2 + kQK);      // scales + quants: 544
constexpr int64_t kQ4_0BlockBytes = kGroupCols * (2 + kQK / 2);  // 288
constexpr int64_t BlockBytes(WeightLayout l) {
  return l == WeightLayout::kQ8_0x16 ? kQ8_0BlockBytes : kQ4_0BlockBytes;
}
constexpr int32_t Bias(WeightLayout l) { return l == WeightLayout::kQ8_0x16 ? 128 : 8; }
}  // namespace kakeya
#endif

HWY_BEFORE_NAMESPACE();
namespace kakeya {
namespace HWY_NAMESPACE {

// u_w of element e (0..31) of column c of a packed block.
template <WeightLayout kLayout>
HWY_INLINE int PackedU(const uint8_t* blk, int c, int e) {
  const uint8_t* quants = blk + 2 * kGroupCols;
  if constexpr (kLayout == WeightLayout::kQ8_0x16) return quants[(e / 4 * kGroupCols + c) * 4 + e % 4];
  const uint8_t byte = quants[(e % 16 / 4 * kGroupCols + c) * 4 + e % 4];
  return e < 16 ? byte & 0xF : byte >> 4;
}

// Reference kernel for targets without hand-written intrinsics.
template <WeightLayout kLayout>
void PackedPortable(const MatMulJob& job, int64_t col_begin, int64_t col_end) {
  const WeightMatrix& w = *job.w;
  const int64_t nb = w.n_in / kQK;
  const ActQ8& a = job.q8;
  const auto* data = static_cast<const uint8_t*>(w.data);
  for (int64_t o = col_begin; o < col_end; o += kGroupCols) {
    const uint8_t* group = data + o / kGroupCols * nb * BlockBytes(kLayout);
    const int n_cols = static_cast<int>(std::min<int64_t>(kGroupCols, col_end - o));
    for (int64_t r = 0; r < job.n_rows; ++r) {
      float acc[kGroupCols] = {};
      for (int64_t b = 0; b < nb; ++b) {
        const uint8_t* blk = group + b * BlockBytes(kLayout);
        const int64_t xb = r * nb + b;
        const int8_t* xq = a.qs + xb * kQK;
        int32_t isum[kGroupCols];
        std::fill(isum, isum + kGroupCols, -Bias(kLayout) * a.sums[xb]);
        for (int c = 0; c < kGroupCols; ++c) {
          for (int e = 0; e < kQK; ++e) isum[c] += PackedU<kLayout>(blk, c, e) * xq[e];
        }
        for (int c = 0; c < kGroupCols; ++c) {
          uint16_t h;
          std::memcpy(&h, blk + 2 * c, 2);
          acc[c] = std::fma(static_cast<float>(isum[c]), F16ToF32(h) * a.d[xb], acc[c]);
        }
      }
      for (int c = 0; c < n_cols; ++c) job.y[r * w.n_out + o + c] = acc[c];
    }
  }
}

#if HWY_ARCH_X86
// Software prefetch of the weights kPrefetchAhead bytes ahead of the block in
// use, within the thread's column range [.., end). Once a tile has several
// rows, the core is busy computing and the hardware prefetcher (which also
// stops at 4 KiB pages) falls behind: the time becomes compute + memory
// instead of the larger of the two. Measured on Zen 5 (matmul_bench, 64 MB
// Q8_0, 2 threads), 8 rows: 2.45 ms without, 1.47 ms at 8 KiB (1 row: 0.88 ms);
// 2, 4, 16 KiB and 32 KiB ahead were no better. Into L1 (T0) for tiles of
// 1-2 rows, into L2 (T1) above: measured on Zen 4 (1.25B Q8_0, 2 threads,
// bench verify, alternating), T1 took 1 row from 21.3 to 26.9 ms but 8 rows
// from 45.8 to 37.9 ms (4 rows 30.7 -> 28.7).
constexpr int kPrefetchAhead = 8192;
template <WeightLayout kLayout, int kLocality>  // __builtin_prefetch's: 3 = T0 (L1), 2 = T1 (L2)
HWY_INLINE void PrefetchAhead(const uint8_t* blk, const uint8_t* end) {
  if (blk + kPrefetchAhead >= end) return;
  for (int l = 0; l < BlockBytes(kLayout); l += 64) __builtin_prefetch(blk + kPrefetchAhead + l, 0, kLocality);
}
template <int kRows>
constexpr int kPrefetchLocality = kRows <= 2 ? 3 : 2;
#endif

#if HWY_TARGET == HWY_AVX3_DL
// AVX-512 VNNI: a tile is one group (16 columns = one zmm) by up to 8 rows.
// Per row and block: 8 vpdpbusd, one convert, one multiply, one FMA; each
// 64-byte weight chunk is loaded once and used by all rows of the tile (a
// Q4_0 chunk, its two nibbles split with a mask and a shift, by two
// vpdpbusd per row, in two chains).
#define KAKEYA_VNNI __attribute__((target("avx512vnni")))
constexpr int kMaxTileRows = 8;

template <WeightLayout kLayout, int kR>
HWY_NOINLINE KAKEYA_VNNI void PackedTileVnni(const uint8_t* group, const uint8_t* end, const ActQ8& a,
                                             int64_t nb, int64_t r0, float (*out)[kGroupCols]) {
  const __m512i low4 = _mm512_set1_epi8(0x0F);
  __m512 acc[kR];
  for (int r = 0; r < kR; ++r) acc[r] = _mm512_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* blk = group + b * BlockBytes(kLayout);
    PrefetchAhead<kLayout, kPrefetchLocality<kR>>(blk, end);
    const __m512 dw = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk)));
    const uint8_t* quants = blk + 2 * kGroupCols;
    __m512i s[kR];
    const int8_t* xq[kR];
    for (int r = 0; r < kR; ++r) {
      s[r] = _mm512_set1_epi32(-Bias(kLayout) * a.sums[(r0 + r) * nb + b]);
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
      for (int j = 0; j < kQuads / 2; ++j) {
        const __m512i raw = _mm512_loadu_si512(quants + 64 * j);
        const __m512i lo = _mm512_and_si512(raw, low4);
        const __m512i hi = _mm512_and_si512(_mm512_srli_epi16(raw, 4), low4);
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
  }
  for (int r = 0; r < kR; ++r) _mm512_storeu_ps(out[r], acc[r]);
}

template <WeightLayout kLayout>
void PackedX86(const MatMulJob& job, int64_t col_begin, int64_t col_end) {
  const int64_t nb = job.w->n_in / kQK;
  ForEachPackedTile<kMaxTileRows>(
      job, col_begin, col_end, nb * BlockBytes(kLayout),
      [&](const uint8_t* group, const uint8_t* end, int64_t r0, int n, float (*out)[kGroupCols]) HWY_ATTR {
        WithRowCount<kMaxTileRows>(n, [&](auto rows) HWY_ATTR {
          PackedTileVnni<kLayout, decltype(rows)::value>(group, end, job.q8, nb, r0, out);
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
// q's sign) as llama.cpp does; Q4_0's u = q + 8 goes in as it is, its pair
// sums over a whole block (8 * 2 * 15 * 127) fit int16, and the bias comes
// off after. Either way the int32 sums are the same exact integers.
constexpr int kMaxTileRows = 4;

template <WeightLayout kLayout, int kR>
HWY_NOINLINE void PackedTileAvx2(const uint8_t* group, const uint8_t* end, int half, const ActQ8& a,
                                 int64_t nb, int64_t r0, float (*out)[kGroupCols]) {
  const __m256i ones = _mm256_set1_epi16(1), bias = _mm256_set1_epi8(-128), low4 = _mm256_set1_epi8(0x0F);
  __m256 acc[kR];
  for (int r = 0; r < kR; ++r) acc[r] = _mm256_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* blk = group + b * BlockBytes(kLayout);
    if (half == 0) PrefetchAhead<kLayout, kPrefetchLocality<kR>>(blk, end);
    const __m256 dw = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + 16 * half)));
    const uint8_t* quants = blk + 2 * kGroupCols + 32 * half;
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
      __m256i p[kR];  // int16 pairs
      for (int r = 0; r < kR; ++r) p[r] = _mm256_setzero_si256();
      for (int j = 0; j < kQuads / 2; ++j) {
        const __m256i raw = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(quants + 64 * j));
        const __m256i lo = _mm256_and_si256(raw, low4);
        const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(raw, 4), low4);
        for (int r = 0; r < kR; ++r) {
          p[r] = _mm256_add_epi16(p[r], _mm256_maddubs_epi16(lo, BroadcastQuad256(xq[r] + 4 * j)));
          p[r] = _mm256_add_epi16(p[r], _mm256_maddubs_epi16(hi, BroadcastQuad256(xq[r] + 16 + 4 * j)));
          Pin(p[r]);
        }
      }
      for (int r = 0; r < kR; ++r) {
        const __m256i offset = _mm256_set1_epi32(-Bias(kLayout) * a.sums[(r0 + r) * nb + b]);
        isum[r] = _mm256_add_epi32(_mm256_madd_epi16(p[r], ones), offset);
      }
    }
    for (int r = 0; r < kR; ++r) {
      const int64_t xb = (r0 + r) * nb + b;
      const __m256 scale = _mm256_mul_ps(dw, _mm256_set1_ps(a.d[xb]));
      acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum[r]), scale, acc[r]);
    }
  }
  for (int r = 0; r < kR; ++r) _mm256_storeu_ps(out[r] + 8 * half, acc[r]);
}

template <WeightLayout kLayout>
void PackedX86(const MatMulJob& job, int64_t col_begin, int64_t col_end) {
  const int64_t nb = job.w->n_in / kQK;
  ForEachPackedTile<kMaxTileRows>(
      job, col_begin, col_end, nb * BlockBytes(kLayout),
      [&](const uint8_t* group, const uint8_t* end, int64_t r0, int n, float (*out)[kGroupCols]) HWY_ATTR {
        WithRowCount<kMaxTileRows>(n, [&](auto rows) HWY_ATTR {
          for (int half = 0; half < 2; ++half) {
            PackedTileAvx2<kLayout, decltype(rows)::value>(group, end, half, job.q8, nb, r0, out);
          }
        });
      });
}
#define KAKEYA_PACKED_KERNEL PackedX86

#else
#define KAKEYA_PACKED_KERNEL PackedPortable
#endif

MatMulKernel PackedKQuantKernel(WeightLayout layout);  // matmul_packed_kquant.cc

MatMulKernel PackedKernel(WeightLayout layout) {
  if (layout == WeightLayout::kQ8_0x16) return &KAKEYA_PACKED_KERNEL<WeightLayout::kQ8_0x16>;
  if (layout == WeightLayout::kQ4_0x16) return &KAKEYA_PACKED_KERNEL<WeightLayout::kQ4_0x16>;
  return PackedKQuantKernel(layout);
}
#undef KAKEYA_PACKED_KERNEL

}  // namespace HWY_NAMESPACE
}  // namespace kakeya
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace kakeya {

size_t Packed32Bytes(const WeightMatrix& w, WeightLayout layout) {
  const int64_t groups = (w.n_out + kGroupCols - 1) / kGroupCols;
  return static_cast<size_t>(groups * (w.n_in / kQK) * BlockBytes(layout));
}

void Pack32(const WeightMatrix& w, WeightLayout layout, uint8_t* out) {
  const int64_t nb = w.n_in / kQK;
  const int64_t block_bytes = BlockBytes(layout);
  const auto* src = static_cast<const uint8_t*>(w.data);
  if (w.n_out % kGroupCols != 0) {  // padding columns of the last group: scale 0
    const int64_t last = w.n_out / kGroupCols * nb * block_bytes;
    std::memset(out + last, 0, Packed32Bytes(w, layout) - static_cast<size_t>(last));
  }
  for (int64_t o = 0; o < w.n_out; ++o) {
    const uint8_t* row = src + o * w.row_bytes;
    const int c = static_cast<int>(o % kGroupCols);
    uint8_t* group = out + o / kGroupCols * nb * block_bytes;
    for (int64_t b = 0; b < nb; ++b) {
      uint8_t* blk = group + b * block_bytes;
      if (layout == WeightLayout::kQ8_0x16) {
        const BlockQ8_0& src_blk = reinterpret_cast<const BlockQ8_0*>(row)[b];
        std::memcpy(blk + 2 * c, &src_blk.d, 2);
        for (int j = 0; j < kQuads; ++j) {
          uint32_t quad;
          std::memcpy(&quad, src_blk.qs + 4 * j, 4);
          quad ^= 0x80808080u;  // q + 128 in each byte
          std::memcpy(blk + 2 * kGroupCols + (j * kGroupCols + c) * 4, &quad, 4);
        }
      } else {
        const BlockQ4_0& src_blk = reinterpret_cast<const BlockQ4_0*>(row)[b];
        std::memcpy(blk + 2 * c, &src_blk.d, 2);
        for (int j = 0; j < kQuads / 2; ++j) {
          std::memcpy(blk + 2 * kGroupCols + (j * kGroupCols + c) * 4, src_blk.qs + 4 * j, 4);
        }
      }
    }
  }
}

}  // namespace kakeya
#endif
