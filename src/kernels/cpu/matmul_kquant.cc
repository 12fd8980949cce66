// MatMul kernels for the K-quants Q4_K, Q5_K and Q6_K, compiled once per SIMD
// target. Activations arrive as Q8_K rows (ActQ8K), as in llama.cpp.
//
// Per (row, column) pair and super-block, two exact integer sums are formed
//   sumi = sum_s sc[s] * sum_{i in s} q_w[i] * q_x[i]
//   summ = sum_s mn[s] * (sum of q_x over s)          (Q4_K / Q5_K, from bsums)
// and the float part is acc += (d_w * d_x) * sumi - (dmin_w * d_x) * summ,
// in super-block order. Q6_K carries its -32 offset inside q_w.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/cpu/matmul_kquant.cc"
#include "kernels/cpu/matmul_internal.h"  // must precede hwy (target set)

#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include <algorithm>

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

MatMulKernel KQuantKernel(DType type) {
  switch (type) {
    case DType::kQ4_K: return &KQuantMatMulPortable<DType::kQ4_K>;
    case DType::kQ5_K: return &KQuantMatMulPortable<DType::kQ5_K>;
    case DType::kQ6_K: return &KQuantMatMulPortable<DType::kQ6_K>;
    default: return nullptr;
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace kakeya
HWY_AFTER_NAMESPACE();
