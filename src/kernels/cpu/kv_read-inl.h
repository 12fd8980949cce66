// How attention reads the exact KV cache types (kv_types.h) into F32 lanes:
// the row decoders, and the F16 scales of the codec's coded blocks (whose
// codes kv_dots.h reads). Internal to attention.cc: include it from there
// only, after vec16-inl.h.
#pragma once

#include <cstdint>
#include <cstring>
#include <type_traits>

#include "kernels/cpu/dequant.h"
#include "kernels/cpu/kv_codec.h"
#include "kernels/cpu/kv_types.h"
#include "kernels/cpu/vec16-inl.h"

namespace kakeya {

// The decoders work on 8 lanes, which every target's registers hold (see
// Halves); conversions are exact, so their width does not show in the bits.
typedef uint16_t UShort8x __attribute__((vector_size(16)));
typedef uint32_t UInt8x __attribute__((vector_size(32)));
typedef int8_t Byte8x __attribute__((vector_size(8)));
typedef uint8_t UByte8x __attribute__((vector_size(8)));

typedef int16_t Short8x __attribute__((vector_size(16)));

// 8 bytes to 32-bit lanes, through 16-bit ones: GCC 12 widened 8-byte
// vectors straight to 32 bits one lane at a time.
inline __attribute__((always_inline)) Int8x Widen(Byte8x q) {
  return __builtin_convertvector(__builtin_convertvector(q, Short8x), Int8x);
}
inline __attribute__((always_inline)) UInt8x Widen(UByte8x q) {
  return __builtin_convertvector(__builtin_convertvector(q, UShort8x), UInt8x);
}

inline __attribute__((always_inline)) Float8x BitsToFloats(UInt8x bits) {
  Float8x f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

// 8 F16 values to F32, exactly as F16ToF32 (dequant.cc): the exponent and
// mantissa shifted into place and scaled by 2^112 (which also makes the
// subnormals' denormal floats exact normal ones), infinities and NaNs set
// apart.
inline __attribute__((always_inline)) Float8x F16Lanes(const uint8_t* p) {
  UShort8x h;
  std::memcpy(&h, p, sizeof h);
  const UInt8x u = __builtin_convertvector(h, UInt8x);
  const UInt8x magnitude = (u & 0x7FFFu) << 13;
  const Float8x scaled = BitsToFloats(magnitude) * 0x1p112f;
  UInt8x bits;
  std::memcpy(&bits, &scaled, sizeof bits);
  bits = (u & 0x7FFFu) >= 0x7C00u ? magnitude | 0x7F800000u : bits;
  return BitsToFloats(bits | (u & 0x8000u) << 16);
}

// The same by F16C's vcvtph2ps, which every CPU of the AVX2 and AVX-512
// targets has (Highway's AVX2 target requires it): exact too, and a signalling
// NaN comes out quiet (a NaN poisons its row either way). Inline assembly:
// the compiler's builtin is declared only where the whole file targets F16C.
inline __attribute__((always_inline)) Float8x F16LanesByF16c(const uint8_t* p) {
  Float8x f;
#if defined(__x86_64__) && defined(__GNUC__)
  asm("vcvtph2ps %1, %0" : "=x"(f) : "m"(*reinterpret_cast<const uint8_t(*)[16]>(p)));
#else
  f = F16Lanes(p);
#endif
  return f;
}

inline __attribute__((always_inline)) Float8x BF16Lanes(const uint8_t* p) {
  UShort8x h;
  std::memcpy(&h, p, sizeof h);
  return BitsToFloats(__builtin_convertvector(h, UInt8x) << 16);
}

// One F16 value as F16Lanes converts each lane (inline: a call to F16ToF32
// per block scale cost more than the block's arithmetic).
inline __attribute__((always_inline)) float F16Scalar(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, sizeof h);
  const uint32_t magnitude = uint32_t(h & 0x7FFFu) << 13;
  float scaled;
  std::memcpy(&scaled, &magnitude, sizeof scaled);
  scaled *= 0x1p112f;
  uint32_t bits;
  std::memcpy(&bits, &scaled, sizeof bits);
  if ((h & 0x7FFFu) >= 0x7C00u) bits = magnitude | 0x7F800000u;
  bits |= uint32_t(h & 0x8000u) << 16;
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

// The 16 F16 scales at p, as F32.
template <bool kX86Vector>
inline __attribute__((always_inline)) void BlockScales(const uint8_t* p, float (&out)[kCodedBlock]) {
  for (int i = 0; i < kCodedBlock; i += 8) {
    const Float8x f = kX86Vector ? F16LanesByF16c(p + 2 * i) : F16Lanes(p + 2 * i);
    std::memcpy(out + i, &f, sizeof f);
  }
}

// The n head vectors of `type` at rows[0..n) into out (F32 [n, dim]): the
// values DecodeKvHead gives, 8 lanes at a time (the quantized types' heads
// are multiples of 32, KvTypeUnfit). One switch for the block, so that each
// type's loop keeps its constants in registers (a switch and a scale
// conversion per vector were a third of decoding).
template <bool kX86Vector>
inline __attribute__((always_inline)) void DecodeHeads(KvType type, const uint8_t* const* rows, int n, int dim,
                                                       float* out) {
  auto store = [](float* o, Float8x f) __attribute__((always_inline)) { std::memcpy(o, &f, sizeof f); };
  switch (type) {
    case KvType::kF32:
      for (int j = 0; j < n; ++j) std::memcpy(out + j * dim, rows[j], sizeof(float) * dim);
      return;
    case KvType::kF16:
    case KvType::kBF16:  // any head size: a scalar tail
      for (int j = 0; j < n; ++j) {
        const uint8_t* p = rows[j];
        float* o = out + j * dim;
        const bool f16 = type == KvType::kF16;
        int i = 0;
        for (; i + 8 <= dim; i += 8) {
          store(o + i, !f16 ? BF16Lanes(p + 2 * i) : kX86Vector ? F16LanesByF16c(p + 2 * i) : F16Lanes(p + 2 * i));
        }
        for (; i < dim; ++i) {
          uint16_t h;
          std::memcpy(&h, p + 2 * i, sizeof h);
          o[i] = f16 ? F16ToF32(h) : BF16ToF32(h);
        }
      }
      return;
    case KvType::kQ8_0:  // blocks of an F16 scale and 32 int8: d * q
      for (int j = 0; j < n; ++j) {
        const uint8_t* p = rows[j];
        for (int b = 0; b < dim / 32; ++b, p += 34) {
          const float d = F16Scalar(p);
          for (int e = 0; e < 32; e += 8) {
            Byte8x q;
            std::memcpy(&q, p + 2 + e, sizeof q);
            store(out + j * dim + 32 * b + e, __builtin_convertvector(Widen(q), Float8x) * d);
          }
        }
      }
      return;
    case KvType::kQ4_0:  // blocks of an F16 scale and 16 bytes: d * (low nibbles - 8), then the high ones
      for (int j = 0; j < n; ++j) {
        const uint8_t* p = rows[j];
        for (int b = 0; b < dim / 32; ++b, p += 18) {
          const float d = F16Scalar(p);
          float* o = out + j * dim + 32 * b;
          for (int e = 0; e < 16; e += 8) {
            UByte8x q;
            std::memcpy(&q, p + 2 + e, sizeof q);
            const UInt8x u = Widen(q);
            store(o + e, __builtin_convertvector(Int8x(u & 15u) - 8, Float8x) * d);
            store(o + 16 + e, __builtin_convertvector(Int8x(u >> 4) - 8, Float8x) * d);
          }
        }
      }
      return;
    case KvType::kKakeya4:  // coded blocks: integer dot products (kv_dots.h)
    case KvType::kKakeya3:
      return;
  }
}

}  // namespace kakeya
