// Scalar conversions and dequantizers: the bit-exact reference of
// docs/formats/quantization.md.
#include "kernels/cpu/dequant.h"

#include <bit>

#include "base/error.h"
#include "kernels/cpu/blocks.h"

namespace kakeya {

float F16ToF32(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1F;
  const uint32_t man = h & 0x3FF;
  if (exp == 0x1F) return std::bit_cast<float>(sign | 0x7F800000u | (man << 13));  // inf, NaN
  if (exp != 0) return std::bit_cast<float>(sign | ((exp + 112) << 23) | (man << 13));
  // Zero or subnormal: man * 2^-24 is exact in F32.
  return std::bit_cast<float>(sign | std::bit_cast<uint32_t>(static_cast<float>(man) * 0x1p-24f));
}

// Round to nearest even, as vcvtps2ph with imm 0 (F. Giesen's float_to_half_rtne).
uint16_t F32ToF16(float f) {
  const uint32_t u = std::bit_cast<uint32_t>(f);
  const uint16_t sign = static_cast<uint16_t>((u >> 16) & 0x8000);
  uint32_t a = u & 0x7FFFFFFFu;
  if (a > 0x7F800000u) return sign | 0x7E00 | ((a >> 13) & 0x3FF);  // NaN: quiet, keep payload
  if (a >= 0x477FF000u) return sign | 0x7C00;                      // >= 65520 rounds to inf
  if (a < 0x38800000u) {
    // Result is subnormal (or zero): adding 0.5 puts the F16 subnormal step
    // (2^-24) at the F32 ulp of 0.5, so the FPU's round-to-even does the work.
    const float t = std::bit_cast<float>(a) + 0.5f;
    return sign | static_cast<uint16_t>(std::bit_cast<uint32_t>(t) - 0x3F000000u);
  }
  const uint32_t mant_odd = (a >> 13) & 1;
  a += 0xC8000FFFu + mant_odd;  // rebias exponent (15 - 127) and round half to even
  return sign | static_cast<uint16_t>(a >> 13);
}

float BF16ToF32(uint16_t h) { return std::bit_cast<float>(static_cast<uint32_t>(h) << 16); }

uint16_t F32ToBF16(float f) {
  const uint32_t u = std::bit_cast<uint32_t>(f);
  if ((u & 0x7FFFFFFFu) > 0x7F800000u) return static_cast<uint16_t>((u >> 16) | 0x40);
  return static_cast<uint16_t>((u + 0x7FFF + ((u >> 16) & 1)) >> 16);
}

namespace {

void DequantQ8_0(const BlockQ8_0* b, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, y += kQK) {
    const float d = F16ToF32(b[i].d);
    for (int k = 0; k < kQK; ++k) y[k] = b[i].qs[k] * d;
  }
}

void DequantQ4_0(const BlockQ4_0* b, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, y += kQK) {
    const float d = F16ToF32(b[i].d);
    for (int j = 0; j < 16; ++j) {
      y[j] = ((b[i].qs[j] & 0xF) - 8) * d;
      y[j + 16] = ((b[i].qs[j] >> 4) - 8) * d;
    }
  }
}

void DequantQ4_1(const BlockQ4_1* b, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, y += kQK) {
    const float d = F16ToF32(b[i].d), m = F16ToF32(b[i].m);
    for (int j = 0; j < 16; ++j) {
      y[j] = (b[i].qs[j] & 0xF) * d + m;
      y[j + 16] = (b[i].qs[j] >> 4) * d + m;
    }
  }
}

void DequantQ5_0(const BlockQ5_0* b, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, y += kQK) {
    const float d = F16ToF32(b[i].d);
    const uint32_t h = LoadU32(b[i].qh);
    for (int j = 0; j < 16; ++j) {
      const int q0 = (b[i].qs[j] & 0xF) | (((h >> j) & 1) << 4);
      const int q1 = (b[i].qs[j] >> 4) | (((h >> (j + 16)) & 1) << 4);
      y[j] = (q0 - 16) * d;
      y[j + 16] = (q1 - 16) * d;
    }
  }
}

void DequantQ5_1(const BlockQ5_1* b, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, y += kQK) {
    const float d = F16ToF32(b[i].d), m = F16ToF32(b[i].m);
    const uint32_t h = LoadU32(b[i].qh);
    for (int j = 0; j < 16; ++j) {
      y[j] = ((b[i].qs[j] & 0xF) | (((h >> j) & 1) << 4)) * d + m;
      y[j + 16] = ((b[i].qs[j] >> 4) | (((h >> (j + 16)) & 1) << 4)) * d + m;
    }
  }
}

void DequantQ4_K(const BlockQ4_K* b, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, y += kQKK) {
    const float d = F16ToF32(b[i].d), dmin = F16ToF32(b[i].dmin);
    for (int e = 0; e < kQKK; ++e) {
      const int s = e / 32;
      uint8_t sc, mn;
      ScaleMinK4(s, b[i].scales, &sc, &mn);
      const uint8_t byte = b[i].qs[32 * (e / 64) + e % 32];
      const int q = (s % 2 == 0) ? (byte & 0xF) : (byte >> 4);
      y[e] = d * sc * q - dmin * mn;
    }
  }
}

void DequantQ5_K(const BlockQ5_K* b, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, y += kQKK) {
    const float d = F16ToF32(b[i].d), dmin = F16ToF32(b[i].dmin);
    for (int e = 0; e < kQKK; ++e) {
      const int s = e / 32, l = e % 32;
      uint8_t sc, mn;
      ScaleMinK4(s, b[i].scales, &sc, &mn);
      const uint8_t byte = b[i].qs[32 * (e / 64) + l];
      const int q = ((s % 2 == 0) ? (byte & 0xF) : (byte >> 4)) + 16 * ((b[i].qh[l] >> s) & 1);
      y[e] = d * sc * q - dmin * mn;
    }
  }
}

void DequantQ6_K(const BlockQ6_K* b, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, y += kQKK) {
    const float d = F16ToF32(b[i].d);
    for (int e = 0; e < kQKK; ++e) {
      const int h = e / 128, k = (e % 128) / 32, l = e % 32;
      const uint8_t lo = b[i].ql[64 * h + 32 * (k & 1) + l];
      const int low4 = (k < 2) ? (lo & 0xF) : (lo >> 4);
      const int hi2 = (b[i].qh[32 * h + l] >> (2 * k)) & 3;
      y[e] = d * b[i].scales[e / 16] * ((low4 | hi2 << 4) - 32);
    }
  }
}

}  // namespace

void DequantizeRow(DType type, const void* src, float* dst, int64_t n) {
  const auto* p = static_cast<const uint8_t*>(src);
  switch (type) {
    case DType::kF32:
      std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float));
      return;
    case DType::kF16:
      for (int64_t i = 0; i < n; ++i) {
        uint16_t h;
        std::memcpy(&h, p + 2 * i, 2);
        dst[i] = F16ToF32(h);
      }
      return;
    case DType::kBF16:
      for (int64_t i = 0; i < n; ++i) {
        uint16_t h;
        std::memcpy(&h, p + 2 * i, 2);
        dst[i] = BF16ToF32(h);
      }
      return;
    case DType::kQ8_0: return DequantQ8_0(reinterpret_cast<const BlockQ8_0*>(p), dst, n / kQK);
    case DType::kQ4_0: return DequantQ4_0(reinterpret_cast<const BlockQ4_0*>(p), dst, n / kQK);
    case DType::kQ4_1: return DequantQ4_1(reinterpret_cast<const BlockQ4_1*>(p), dst, n / kQK);
    case DType::kQ5_0: return DequantQ5_0(reinterpret_cast<const BlockQ5_0*>(p), dst, n / kQK);
    case DType::kQ5_1: return DequantQ5_1(reinterpret_cast<const BlockQ5_1*>(p), dst, n / kQK);
    case DType::kQ4_K: return DequantQ4_K(reinterpret_cast<const BlockQ4_K*>(p), dst, n / kQKK);
    case DType::kQ5_K: return DequantQ5_K(reinterpret_cast<const BlockQ5_K*>(p), dst, n / kQKK);
    case DType::kQ6_K: return DequantQ6_K(reinterpret_cast<const BlockQ6_K*>(p), dst, n / kQKK);
    default:
      Fail("DequantizeRow: unsupported type ", NameOf(type), " (id ", static_cast<uint32_t>(type),
           ")");
  }
}

}  // namespace kakeya
