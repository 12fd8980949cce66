// Reference quantizers (llama.cpp quantize_row_*_ref). Used to write test data
// and benchmark models, never in the decode loop.
//
// Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, F16 and BF16 follow llama.cpp exactly. For the
// K-quants we use a simpler, documented search: each sub-block takes its
// scale (and min) straight from its own range (Q4_K/Q5_K: min(0, min x) .. max x;
// Q6_K: the signed value of largest magnitude maps to -32), then the sub-block
// scales are quantized to 6 bits (Q4_K/Q5_K) or int8 (Q6_K) against a
// super-block scale, and every element is re-quantized with the rounded scale.
// llama.cpp instead refines each sub-block with an iterative weighted search
// (make_qkx2_quants / make_qx_quants), which lowers the error a little; the
// block format is the same, so our files decode anywhere.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "base/error.h"
#include "kernels/cpu/blocks.h"
#include "kernels/cpu/dequant.h"

namespace kakeya {
namespace {

void QuantQ8_0(const float* x, BlockQ8_0* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, x += kQK) {
    float amax = 0;
    for (int k = 0; k < kQK; ++k) amax = std::max(amax, std::fabs(x[k]));
    const float d = amax / 127, id = d != 0 ? 1 / d : 0;
    y[i].d = F32ToF16(d);
    for (int k = 0; k < kQK; ++k) y[i].qs[k] = static_cast<int8_t>(std::roundf(x[k] * id));
  }
}

// The signed value of largest magnitude (first one on ties), as llama.cpp.
float SignedMax(const float* x, int n) {
  float amax = 0, max = 0;
  for (int k = 0; k < n; ++k) {
    if (std::fabs(x[k]) > amax) {
      amax = std::fabs(x[k]);
      max = x[k];
    }
  }
  return max;
}

void QuantQ4_0(const float* x, BlockQ4_0* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, x += kQK) {
    const float d = SignedMax(x, kQK) / -8, id = d != 0 ? 1 / d : 0;
    y[i].d = F32ToF16(d);
    for (int j = 0; j < 16; ++j) {
      const int q0 = std::min(15, static_cast<int>(x[j] * id + 8.5f));
      const int q1 = std::min(15, static_cast<int>(x[j + 16] * id + 8.5f));
      y[i].qs[j] = static_cast<uint8_t>(q0 | q1 << 4);
    }
  }
}

void QuantQ5_0(const float* x, BlockQ5_0* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, x += kQK) {
    const float d = SignedMax(x, kQK) / -16, id = d != 0 ? 1 / d : 0;
    y[i].d = F32ToF16(d);
    uint32_t h = 0;
    for (int j = 0; j < 16; ++j) {
      const int q0 = std::min(31, static_cast<int>(x[j] * id + 16.5f));
      const int q1 = std::min(31, static_cast<int>(x[j + 16] * id + 16.5f));
      y[i].qs[j] = static_cast<uint8_t>((q0 & 0xF) | (q1 & 0xF) << 4);
      h |= static_cast<uint32_t>(q0 >> 4) << j | static_cast<uint32_t>(q1 >> 4) << (j + 16);
    }
    std::memcpy(y[i].qh, &h, 4);
  }
}

// Q4_1 (nmax 15) and Q5_1 (nmax 31): q = (x - min) / d, value = q * d + min.
template <class Block, int kMax>
void QuantQx_1(const float* x, Block* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, x += kQK) {
    float min = x[0], max = x[0];
    for (int k = 1; k < kQK; ++k) {
      min = std::min(min, x[k]);
      max = std::max(max, x[k]);
    }
    const float d = (max - min) / kMax, id = d != 0 ? 1 / d : 0;
    y[i].d = F32ToF16(d);
    y[i].m = F32ToF16(min);
    uint32_t h = 0;
    for (int j = 0; j < 16; ++j) {
      const int q0 = std::min(kMax, static_cast<int>((x[j] - min) * id + 0.5f));
      const int q1 = std::min(kMax, static_cast<int>((x[j + 16] - min) * id + 0.5f));
      y[i].qs[j] = static_cast<uint8_t>((q0 & 0xF) | (q1 & 0xF) << 4);
      h |= static_cast<uint32_t>(q0 >> 4) << j | static_cast<uint32_t>(q1 >> 4) << (j + 16);
    }
    if constexpr (kMax == 31) std::memcpy(y[i].qh, &h, 4);
  }
}

// Q4_K / Q5_K: 8 sub-blocks of 32 with 6-bit scale and min; q in 0..kMax.
// Writes d, dmin, scales and the integer q of every element (q[256]).
template <class Block, int kMax>
void QuantKScales(const float* x, Block* b, uint8_t* q) {
  float scale[8], min[8], max_scale = 0, max_min = 0;
  for (int s = 0; s < 8; ++s) {
    const float* xs = x + 32 * s;
    float lo = 0, hi = xs[0];  // the min is stored as a non-negative offset
    for (int l = 0; l < 32; ++l) {
      lo = std::min(lo, xs[l]);
      hi = std::max(hi, xs[l]);
    }
    scale[s] = (hi - lo) / kMax;
    min[s] = -lo;
    max_scale = std::max(max_scale, scale[s]);
    max_min = std::max(max_min, min[s]);
  }
  const float inv_scale = max_scale > 0 ? 63 / max_scale : 0;
  const float inv_min = max_min > 0 ? 63 / max_min : 0;
  uint8_t ls[8], lm[8];
  for (int s = 0; s < 8; ++s) {
    ls[s] = static_cast<uint8_t>(std::min(63, NearestInt(inv_scale * scale[s])));
    lm[s] = static_cast<uint8_t>(std::min(63, NearestInt(inv_min * min[s])));
    if (s < 4) {
      b->scales[s] = ls[s];
      b->scales[s + 4] = lm[s];
    } else {
      b->scales[s + 4] = static_cast<uint8_t>((ls[s] & 0xF) | (lm[s] & 0xF) << 4);
      b->scales[s - 4] |= static_cast<uint8_t>((ls[s] >> 4) << 6);
      b->scales[s] |= static_cast<uint8_t>((lm[s] >> 4) << 6);
    }
  }
  b->d = F32ToF16(max_scale / 63);
  b->dmin = F32ToF16(max_min / 63);
  const float d = F16ToF32(b->d), dmin = F16ToF32(b->dmin);
  for (int s = 0; s < 8; ++s) {
    uint8_t sc, mn;
    ScaleMinK4(s, b->scales, &sc, &mn);
    const float ds = d * sc, dm = dmin * mn;
    for (int l = 0; l < 32; ++l) {
      const int v = ds != 0 ? NearestInt((x[32 * s + l] + dm) / ds) : 0;
      q[32 * s + l] = static_cast<uint8_t>(std::clamp(v, 0, kMax));
    }
  }
}

void QuantQ4_K(const float* x, BlockQ4_K* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, x += kQKK) {
    uint8_t q[kQKK];
    std::memset(y[i].scales, 0, sizeof(y[i].scales));
    QuantKScales<BlockQ4_K, 15>(x, &y[i], q);
    for (int g = 0; g < 4; ++g) {
      for (int l = 0; l < 32; ++l) {
        y[i].qs[32 * g + l] = static_cast<uint8_t>(q[64 * g + l] | q[64 * g + 32 + l] << 4);
      }
    }
  }
}

void QuantQ5_K(const float* x, BlockQ5_K* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, x += kQKK) {
    uint8_t q[kQKK];
    std::memset(y[i].scales, 0, sizeof(y[i].scales));
    std::memset(y[i].qh, 0, sizeof(y[i].qh));
    QuantKScales<BlockQ5_K, 31>(x, &y[i], q);
    for (int g = 0; g < 4; ++g) {
      for (int l = 0; l < 32; ++l) {
        const int q0 = q[64 * g + l], q1 = q[64 * g + 32 + l];
        y[i].qs[32 * g + l] = static_cast<uint8_t>((q0 & 0xF) | (q1 & 0xF) << 4);
        y[i].qh[l] |= static_cast<uint8_t>((q0 >> 4) << (2 * g) | (q1 >> 4) << (2 * g + 1));
      }
    }
  }
}

void QuantQ6_K(const float* x, BlockQ6_K* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, x += kQKK) {
    float scale[16], max_scale = 0, amax_scale = 0;
    for (int s = 0; s < 16; ++s) {
      scale[s] = SignedMax(x + 16 * s, 16) / -32;
      if (std::fabs(scale[s]) > amax_scale) {
        amax_scale = std::fabs(scale[s]);
        max_scale = scale[s];
      }
    }
    const float iscale = max_scale != 0 ? -128 / max_scale : 0;
    y[i].d = F32ToF16(iscale != 0 ? 1 / iscale : 0);
    const float d = F16ToF32(y[i].d);
    int8_t q[kQKK];
    for (int s = 0; s < 16; ++s) {
      y[i].scales[s] = static_cast<int8_t>(std::min(127, NearestInt(iscale * scale[s])));
      const float ds = d * y[i].scales[s];
      for (int l = 0; l < 16; ++l) {
        const int v = ds != 0 ? NearestInt(x[16 * s + l] / ds) : 0;
        q[16 * s + l] = static_cast<int8_t>(std::clamp(v, -32, 31));
      }
    }
    std::memset(y[i].qh, 0, sizeof(y[i].qh));
    for (int e = 0; e < kQKK; ++e) {
      const int h = e / 128, k = (e % 128) / 32, l = e % 32;
      const int u = q[e] + 32;  // 0..63
      uint8_t& lo = y[i].ql[64 * h + 32 * (k & 1) + l];
      if (k < 2) lo = static_cast<uint8_t>(u & 0xF);
      else lo |= static_cast<uint8_t>((u & 0xF) << 4);
      y[i].qh[32 * h + l] |= static_cast<uint8_t>((u >> 4) << (2 * k));
    }
  }
}

}  // namespace

void QuantizeRow(DType type, const float* src, void* dst, int64_t n) {
  auto* p = static_cast<uint8_t*>(dst);
  switch (type) {
    case DType::kF32:
      std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float));
      return;
    case DType::kF16:
      for (int64_t i = 0; i < n; ++i) {
        const uint16_t h = F32ToF16(src[i]);
        std::memcpy(p + 2 * i, &h, 2);
      }
      return;
    case DType::kBF16:
      for (int64_t i = 0; i < n; ++i) {
        const uint16_t h = F32ToBF16(src[i]);
        std::memcpy(p + 2 * i, &h, 2);
      }
      return;
    case DType::kQ8_0: return QuantQ8_0(src, reinterpret_cast<BlockQ8_0*>(p), n / kQK);
    case DType::kQ4_0: return QuantQ4_0(src, reinterpret_cast<BlockQ4_0*>(p), n / kQK);
    case DType::kQ4_1: return QuantQx_1<BlockQ4_1, 15>(src, reinterpret_cast<BlockQ4_1*>(p), n / kQK);
    case DType::kQ5_0: return QuantQ5_0(src, reinterpret_cast<BlockQ5_0*>(p), n / kQK);
    case DType::kQ5_1: return QuantQx_1<BlockQ5_1, 31>(src, reinterpret_cast<BlockQ5_1*>(p), n / kQK);
    case DType::kQ4_K: return QuantQ4_K(src, reinterpret_cast<BlockQ4_K*>(p), n / kQKK);
    case DType::kQ5_K: return QuantQ5_K(src, reinterpret_cast<BlockQ5_K*>(p), n / kQKK);
    case DType::kQ6_K: return QuantQ6_K(src, reinterpret_cast<BlockQ6_K*>(p), n / kQKK);
    default:
      Fail("QuantizeRow: unsupported type ", NameOf(type), " (id ", static_cast<uint32_t>(type),
           ")");
  }
}

}  // namespace kakeya
