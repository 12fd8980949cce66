// MatMul for Q4_K, Q5_K and Q6_K weights in packed layouts
// (WeightLayout::kQ4_Kx16, kQ5_Kx16, kQ6_Kx16), and their packing: the
// K-quant counterpart of matmul_packed.cc (read that file first: same idea, 16 columns interleaved so
// one vpdpbusd does 64 multiply-adds and the weights serve every row).
// The x86 tiles are in matmul_packed_kquant_x86-inl.h, the ARM ones in
// matmul_packed_kquant_neon-inl.h.
//
// Packed Q4_K super-block of a group of 16 columns (kQ4Bytes):
//   [0, 32)       d[c]     F16
//   [32, 64)      dmin[c]  F16
//   [64, 192)     sc[s][c] u8, sub-block s = elements 32s .. 32s + 31
//   [192, 320)    mn[s][c] u8
//   [320, 2368)   32 chunks of 64 bytes, chunk 8t + j, byte 4c + k: low
//                 nibble = q of element 64t + 4j + k, high nibble = element
//                 64t + 32 + 4j + k (which is GGUF's qs[32t + 4j + k] as is).
// Packed Q5_K super-block (kQ5Bytes): the Q4_K one with the low 4 bits of q,
// then
//   [2368, 2880)  8 chunks of 64 bytes, chunk j, byte 4c + k: bit s = bit 4
//                 of q of element 32s + 4j + k (GGUF's qh[4j + k] as is).
// Packed Q6_K super-block (kQ6Bytes):
//   [0, 32)       d[c]     F16
//   [32, 288)     sc[s][c] i8, sub-block s = elements 16s .. 16s + 15
//   [288, 2336)   32 chunks, chunk u, byte 4c + k: low nibble = low 4 bits
//                 of q of element 4u + k, high nibble = of element 128 + 4u + k
//   [2336, 3360)  16 chunks, chunk v, byte 4c + k: bits 2i..2i+1 = top 2 bits
//                 of element 64i + 4v + k
// q is as in GGUF (Q4_K 0..15, Q5_K 0..31, Q6_K 0..63 for the value q - 32).
//
// Arithmetic per (row, column) pair and super-block, exact integers as
// llama.cpp forms them (Q8_K activations: d_x, q_x, bsums per 16):
//   Q4_K, Q5_K: sumi = sum_s sc[s] * (q . x over s);  summ = sum_s mn[s] * bsum32_x(s)
//         acc = fma(float(sumi), d * d_x, acc); acc = fma(float(summ), -dmin * d_x, acc)
//   Q6_K: sumi = sum_s sc[s] * (q . x over s) - 32 * sum_s sc[s] * bsum16_x(s)
//         acc = fma(float(sumi), d * d_x, acc)
// The same on every target and tile shape (batch, thread and target invariant).
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/cpu/matmul_packed_kquant.cc"
#include "kernels/cpu/matmul_internal.h"  // must precede hwy (target set)

#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <utility>
#if HWY_ARCH_X86
#include <immintrin.h>
#elif HWY_ARCH_ARM_A64
#include <arm_neon.h>
#endif

#include "base/error.h"
#include "kernels/cpu/blocks.h"
#include "kernels/cpu/dequant.h"

#ifndef KAKEYA_MATMUL_PACKED_KQUANT_ONCE
#define KAKEYA_MATMUL_PACKED_KQUANT_ONCE
namespace kakeya {
namespace packed_k {
constexpr int kCols = kPackedGroupCols;
constexpr int64_t kQ4Scales = 64, kQ4Mins = 192, kQ4Quants = 320, kQ4Bytes = 2368;
constexpr int64_t kQ5High = 2368, kQ5Bytes = 2880;
constexpr int64_t kQ6Scales = 32, kQ6Low = 288, kQ6High = 2336, kQ6Bytes = 3360;
constexpr int64_t GroupBytes(WeightLayout l) {
  return l == WeightLayout::kQ4_Kx16 ? kQ4Bytes : l == WeightLayout::kQ5_Kx16 ? kQ5Bytes : kQ6Bytes;
}
}  // namespace packed_k
}  // namespace kakeya
#endif

HWY_BEFORE_NAMESPACE();
namespace kakeya {
namespace HWY_NAMESPACE {
using namespace packed_k;  // NOLINT

// Element e (0..255) of column c of a packed super-block, as GGUF's q.
HWY_INLINE int PackedQ4(const uint8_t* sb, int c, int e) {
  const int t = e / 64, r = e % 64, half = r / 32, l = r % 32;
  const uint8_t byte = sb[kQ4Quants + (8 * t + l / 4) * 64 + 4 * c + l % 4];
  return half == 0 ? byte & 0xF : byte >> 4;
}
HWY_INLINE int PackedQ5(const uint8_t* sb, int c, int e) {
  const int l = e % 32;
  return PackedQ4(sb, c, e) | ((sb[kQ5High + l / 4 * 64 + 4 * c + l % 4] >> (e / 32)) & 1) << 4;
}
HWY_INLINE int PackedQ6(const uint8_t* sb, int c, int e) {
  const int u = (e % 128) / 4, v = (e % 64) / 4, k = e % 4;
  const uint8_t lo = sb[kQ6Low + u * 64 + 4 * c + k];
  const uint8_t hi = sb[kQ6High + v * 64 + 4 * c + k];
  return (e < 128 ? lo & 0xF : lo >> 4) | ((hi >> (2 * (e / 64))) & 3) << 4;
}

// Reference kernel, used by targets without intrinsics here (and by any
// target for these layouts when forced to one that lacks them).
template <WeightLayout kLayout>
void PackedKPortable(const MatMulJob& job, int64_t col_begin, int64_t col_end) {
  const WeightMatrix& w = *job.w;
  const int64_t nsb = w.n_in / kQKK;
  const ActQ8K& a = job.q8k;
  const auto* data = static_cast<const uint8_t*>(w.data);
  for (int64_t o = col_begin; o < col_end; o += kCols) {
    const uint8_t* group = data + o / kCols * nsb * GroupBytes(kLayout);
    const int n_cols = static_cast<int>(std::min<int64_t>(kCols, col_end - o));
    for (int64_t r = 0; r < job.n_rows; ++r) {
      float acc[kCols] = {};
      for (int64_t b = 0; b < nsb; ++b) {
        const uint8_t* sb = group + b * GroupBytes(kLayout);
        const int64_t xb = r * nsb + b;
        const int8_t* xq = a.qs + xb * kQKK;
        const int16_t* bsums = a.bsums + xb * 16;
        const float dx = a.d[xb];
        for (int c = 0; c < kCols; ++c) {
          uint16_t h;
          std::memcpy(&h, sb + 2 * c, 2);
          const float d = F16ToF32(h);
          if constexpr (kLayout != WeightLayout::kQ6_Kx16) {
            int32_t sumi = 0, summ = 0;
            for (int s = 0; s < 8; ++s) {
              int32_t dot = 0;
              for (int l = 0; l < 32; ++l) {
                const int e = 32 * s + l;
                dot += (kLayout == WeightLayout::kQ4_Kx16 ? PackedQ4(sb, c, e) : PackedQ5(sb, c, e)) * xq[e];
              }
              sumi += sb[kQ4Scales + 16 * s + c] * dot;
              summ += sb[kQ4Mins + 16 * s + c] * (bsums[2 * s] + bsums[2 * s + 1]);
            }
            std::memcpy(&h, sb + 32 + 2 * c, 2);
            const float dmin = F16ToF32(h);
            acc[c] = std::fma(static_cast<float>(sumi), d * dx, acc[c]);
            acc[c] = std::fma(static_cast<float>(summ), -dmin * dx, acc[c]);
          } else {
            int32_t sumi = 0, sumb = 0;
            for (int s = 0; s < 16; ++s) {
              int32_t dot = 0;
              for (int l = 0; l < 16; ++l) dot += PackedQ6(sb, c, 16 * s + l) * xq[16 * s + l];
              const int sc = static_cast<int8_t>(sb[kQ6Scales + 16 * s + c]);
              sumi += sc * dot;
              sumb += sc * bsums[s];
            }
            acc[c] = std::fma(static_cast<float>(sumi - 32 * sumb), d * dx, acc[c]);
          }
        }
      }
      for (int c = 0; c < n_cols; ++c) job.y[r * w.n_out + o + c] = acc[c];
    }
  }
}

#if HWY_TARGET == HWY_AVX3_DL || HWY_TARGET == HWY_AVX2 || HWY_TARGET == HWY_AVX3
#include "kernels/cpu/matmul_packed_kquant_x86-inl.h"
#elif HWY_TARGET == HWY_NEON
#include "kernels/cpu/matmul_packed_kquant_neon-inl.h"
#else
MatMulKernel PackedKQuantKernel(WeightLayout layout) {
  if (layout == WeightLayout::kQ4_Kx16) return &PackedKPortable<WeightLayout::kQ4_Kx16>;
  if (layout == WeightLayout::kQ5_Kx16) return &PackedKPortable<WeightLayout::kQ5_Kx16>;
  if (layout == WeightLayout::kQ6_Kx16) return &PackedKPortable<WeightLayout::kQ6_Kx16>;
  return nullptr;
}
#endif

}  // namespace HWY_NAMESPACE
}  // namespace kakeya
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace kakeya {
using namespace packed_k;  // NOLINT

size_t PackedKQuantBytes(const WeightMatrix& w, WeightLayout layout) {
  const int64_t groups = (w.n_out + kCols - 1) / kCols;
  return static_cast<size_t>(groups * (w.n_in / kQKK) * GroupBytes(layout));
}

// Column c's part of a packed Q4_K super-block (the Q4_K part of a Q5_K one).
template <typename Block>
void PackQ4KSuperBlock(const Block& blk, int c, uint8_t* sb) {
  std::memcpy(sb + 2 * c, &blk.d, 2);
  std::memcpy(sb + 32 + 2 * c, &blk.dmin, 2);
  for (int s = 0; s < 8; ++s) ScaleMinK4(s, blk.scales, &sb[kQ4Scales + 16 * s + c], &sb[kQ4Mins + 16 * s + c]);
  for (int t = 0; t < 4; ++t) {
    for (int j = 0; j < 8; ++j) std::memcpy(sb + kQ4Quants + (8 * t + j) * 64 + 4 * c, blk.qs + 32 * t + 4 * j, 4);
  }
}

void PackKQuant(const WeightMatrix& w, WeightLayout layout, uint8_t* out) {
  const int64_t nsb = w.n_in / kQKK;
  const int64_t group_bytes = nsb * GroupBytes(layout);
  const auto* src = static_cast<const uint8_t*>(w.data);
  if (w.n_out % kCols != 0) {  // padding columns of the last group: scales 0
    const int64_t last = w.n_out / kCols * group_bytes;
    std::memset(out + last, 0, PackedKQuantBytes(w, layout) - static_cast<size_t>(last));
  }
  for (int64_t o = 0; o < w.n_out; ++o) {
    const uint8_t* row = src + o * w.row_bytes;
    const int c = static_cast<int>(o % kCols);
    uint8_t* group = out + o / kCols * group_bytes;
    for (int64_t b = 0; b < nsb; ++b) {
      uint8_t* sb = group + b * GroupBytes(layout);
      if (layout == WeightLayout::kQ4_Kx16) {
        PackQ4KSuperBlock(reinterpret_cast<const BlockQ4_K*>(row)[b], c, sb);
      } else if (layout == WeightLayout::kQ5_Kx16) {
        const auto& blk = reinterpret_cast<const BlockQ5_K*>(row)[b];
        PackQ4KSuperBlock(blk, c, sb);
        for (int j = 0; j < 8; ++j) std::memcpy(sb + kQ5High + j * 64 + 4 * c, blk.qh + 4 * j, 4);
      } else {
        const auto& blk = reinterpret_cast<const BlockQ6_K*>(row)[b];
        std::memcpy(sb + 2 * c, &blk.d, 2);
        for (int s = 0; s < 16; ++s) sb[kQ6Scales + 16 * s + c] = static_cast<uint8_t>(blk.scales[s]);
        uint8_t q[kQKK];  // GGUF's element order, 0..63
        for (int e = 0; e < kQKK; ++e) {
          const int h = e / 128, k = (e % 128) / 32, l = e % 32;
          const uint8_t lo = blk.ql[64 * h + 32 * (k & 1) + l];
          q[e] = static_cast<uint8_t>(((k < 2) ? (lo & 0xF) : (lo >> 4)) | ((blk.qh[32 * h + l] >> (2 * k)) & 3) << 4);
        }
        for (int u = 0; u < 32; ++u) {
          for (int k = 0; k < 4; ++k) {
            sb[kQ6Low + u * 64 + 4 * c + k] = static_cast<uint8_t>((q[4 * u + k] & 0xF) | (q[128 + 4 * u + k] & 0xF) << 4);
          }
        }
        for (int v = 0; v < 16; ++v) {
          for (int k = 0; k < 4; ++k) {
            uint8_t bits = 0;
            for (int i = 0; i < 4; ++i) bits |= static_cast<uint8_t>((q[64 * i + 4 * v + k] >> 4) << (2 * i));
            sb[kQ6High + v * 64 + 4 * c + k] = bits;
          }
        }
      }
    }
  }
}

}  // namespace kakeya
#endif
