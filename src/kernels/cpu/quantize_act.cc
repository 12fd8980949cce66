// Activation-row quantizers for the integer kernels, vectorized per SIMD
// target with Highway. Every step is exact (abs, max, one multiply by the
// same scalar, round half to even, integer sums), so all targets produce the
// same bits as the scalar definition, and a row's bits depend only on that row.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/cpu/quantize_act.cc"
#include "kernels/cpu/matmul_internal.h"  // must precede hwy (target set)

#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include <cmath>

#include "kernels/cpu/blocks.h"
#include "kernels/cpu/dequant.h"

HWY_BEFORE_NAMESPACE();
namespace kakeya {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

using DF = hn::ScalableTag<float>;
using DI = hn::RebindToSigned<DF>;

HWY_INLINE float MaxAbs(DF df, const float* x, int n) {
  auto m = hn::Zero(df);
  for (int k = 0; k < n; k += static_cast<int>(hn::Lanes(df))) m = hn::Max(m, hn::Abs(hn::LoadU(df, x + k)));
  return hn::GetLane(hn::MaxOfLanes(df, m));
}

// q[k] = clamp(round_half_even(x[k] * scale), -127, 127); returns sum of q.
HWY_INLINE int32_t QuantizeBlock(DF df, const float* x, float scale, int n, int8_t* q) {
  const DI di;
  const auto vs = hn::Set(df, scale);
  const auto lo = hn::Set(di, -127), hi = hn::Set(di, 127);
  auto sum = hn::Zero(di);
  for (int k = 0; k < n; k += static_cast<int>(hn::Lanes(df))) {
    // x * scale is within +-127.x for finite x, so the conversion is exact.
    const auto v = hn::Min(hn::Max(hn::NearestInt(hn::Mul(hn::LoadU(df, x + k), vs)), lo), hi);
    sum = hn::Add(sum, v);
    alignas(64) int32_t lanes[HWY_MAX_BYTES / 4];
    hn::Store(v, di, lanes);
    for (size_t l = 0; l < hn::Lanes(di); ++l) q[k + l] = static_cast<int8_t>(lanes[l]);
  }
  return hn::GetLane(hn::SumOfLanes(di, sum));
}

// As ggml's quantize_row_q8_0/q8_1 on x86: the values use 127/amax, the scale
// d = amax/127 and the block sum term s = d * sum(q) are stored as F16, so the
// dot products see the F16-rounded numbers. Keeping them in F32 would be more
// accurate but differs from llama.cpp by up to ~0.3 logits per position.
void QuantizeRowQ8(const float* x, int64_t n_in, int8_t* qs, float* d, float* s, int16_t* sums) {
  const DF df;
  for (int64_t b = 0; b < n_in / kQK; ++b) {
    const float amax = MaxAbs(df, x + b * kQK, kQK);
    const float scale = amax / 127;
    const int32_t sum = QuantizeBlock(df, x + b * kQK, amax != 0 ? 127 / amax : 0, kQK, qs + b * kQK);
    d[b] = F16ToF32(F32ToF16(scale));
    s[b] = F16ToF32(F32ToF16(scale * static_cast<float>(sum)));
    sums[b] = static_cast<int16_t>(sum);
  }
}

void QuantizeRowQ8K(const float* x, int64_t n_in, int8_t* qs, float* d, int16_t* bsums) {
  const DF df;
  for (int64_t b = 0; b < n_in / kQKK; ++b) {
    const float* xb = x + b * kQKK;
    const float amax = MaxAbs(df, xb, kQKK);
    // The first element of largest magnitude keeps its sign (llama.cpp).
    float vmax = 0;
    for (int k = 0; k < kQKK; ++k) {
      if (std::fabs(xb[k]) == amax) {
        vmax = xb[k];
        break;
      }
    }
    const float iscale = amax != 0 ? -127.f / vmax : 0;
    d[b] = amax != 0 ? 1 / iscale : 0;
    for (int g = 0; g < kQKK / 16; ++g) {
      bsums[b * 16 + g] = static_cast<int16_t>(QuantizeBlock(df, xb + 16 * g, iscale, 16, qs + b * kQKK + 16 * g));
    }
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace kakeya
HWY_AFTER_NAMESPACE();
