// Byte layouts of the quantized blocks (docs/formats/quantization.md 2.2-2.3) and small helpers
// shared by the scalar dequantizers, the reference quantizers and the kernels.
#pragma once

#include <cstdint>
#include <cstring>

#include "tensor/dtype.h"

namespace kakeya {

inline constexpr int kQK = 32;    // elements per legacy block (Q4_0 .. Q8_0)
inline constexpr int kQKK = 256;  // elements per K-quant super-block

struct BlockQ8_0 { uint16_t d; int8_t qs[32]; };
struct BlockQ4_0 { uint16_t d; uint8_t qs[16]; };
struct BlockQ4_1 { uint16_t d, m; uint8_t qs[16]; };
struct BlockQ5_0 { uint16_t d; uint8_t qh[4]; uint8_t qs[16]; };
struct BlockQ5_1 { uint16_t d, m; uint8_t qh[4]; uint8_t qs[16]; };
struct BlockQ4_K { uint16_t d, dmin; uint8_t scales[12]; uint8_t qs[128]; };
struct BlockQ5_K { uint16_t d, dmin; uint8_t scales[12]; uint8_t qh[32]; uint8_t qs[128]; };
struct BlockQ6_K { uint8_t ql[128]; uint8_t qh[64]; int8_t scales[16]; uint16_t d; };

static_assert(sizeof(BlockQ8_0) == 34 && sizeof(BlockQ4_0) == 18 && sizeof(BlockQ4_1) == 20);
static_assert(sizeof(BlockQ5_0) == 22 && sizeof(BlockQ5_1) == 24);
static_assert(sizeof(BlockQ4_K) == 144 && sizeof(BlockQ5_K) == 176 && sizeof(BlockQ6_K) == 210);

// Bytes per block of the types above (TraitsOf, but usable in constexpr).
template <DType kType>
constexpr int64_t kBlockBytes = kType == DType::kQ8_0   ? sizeof(BlockQ8_0)
                                : kType == DType::kQ4_0 ? sizeof(BlockQ4_0)
                                : kType == DType::kQ4_1 ? sizeof(BlockQ4_1)
                                : kType == DType::kQ5_0 ? sizeof(BlockQ5_0)
                                : kType == DType::kQ5_1 ? sizeof(BlockQ5_1)
                                : kType == DType::kQ4_K ? sizeof(BlockQ4_K)
                                : kType == DType::kQ5_K ? sizeof(BlockQ5_K)
                                : kType == DType::kQ6_K ? sizeof(BlockQ6_K)
                                                        : 0;

inline uint32_t LoadU32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

// Q4_K / Q5_K 6-bit sub-block scale and min s (0..7) from the 12 packed bytes.
inline void ScaleMinK4(int s, const uint8_t* q, uint8_t* sc, uint8_t* mn) {
  if (s < 4) {
    *sc = q[s] & 63;
    *mn = q[s + 4] & 63;
  } else {
    *sc = (q[s + 4] & 0xF) | ((q[s - 4] >> 6) << 4);
    *mn = (q[s + 4] >> 4) | ((q[s] >> 6) << 4);
  }
}

// llama.cpp's nearest_int: round half to even for |x| < 2^22, without the
// float->int conversion (which is UB for NaN / out-of-range values).
inline int NearestInt(float x) {
  const float f = x + 12582912.f;
  int32_t i;
  std::memcpy(&i, &f, 4);
  return (i & 0x007fffff) - 0x00400000;
}

}  // namespace kakeya
