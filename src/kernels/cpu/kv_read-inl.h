// How attention reads each KV cache type (kv_types.h, kv_codec.h) into F32
// lanes: the row decoders of the exact types, and the codec's coded blocks,
// whose values are decoded to levels and whose keys are scored in place
// (CodedKeyScores). Internal to attention.cc: include it from there only,
// after vec16-inl.h.
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

// The codec's decoders work on W lanes of consecutive coordinates: 16 where
// the build has 64-byte registers (AVX-512: a 16-entry table is one vpermps),
// 8 elsewhere. The values are exact, so W does not show in the bits.
template <int W>
struct CodeLanes {
  typedef uint32_t Index __attribute__((vector_size(4 * W)));
  typedef float Floats __attribute__((vector_size(4 * W)));
};

template <int W>
inline __attribute__((always_inline)) typename CodeLanes<W>::Index Iota() {
  if constexpr (W == 8) {
    return typename CodeLanes<W>::Index{0, 1, 2, 3, 4, 5, 6, 7};
  } else {
    return typename CodeLanes<W>::Index{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15};
  }
}

// 16 bytes, each into a 32-bit lane of 16. AVX-512: one vpmovzxbd (GCC 12
// widened through 16-bit lanes in eight instructions).
typedef uint8_t Byte16x __attribute__((vector_size(16)));
inline __attribute__((always_inline)) UInt16x Widen16(Byte16x b) {
  UInt16x u;
#if defined(__x86_64__) && defined(__GNUC__)
  asm("vpmovzxbd %1, %0" : "=v"(u) : "vm"(b));
#else
  for (int i = 0; i < 16; ++i) u[i] = b[i];
#endif
  return u;
}

// W bytes at p, each into a 32-bit lane.
template <int W>
inline __attribute__((always_inline)) typename CodeLanes<W>::Index WidenBytes(const uint8_t* p) {
  if constexpr (W == 8) {
    UByte8x q;
    std::memcpy(&q, p, sizeof q);
    return Widen(q);
  } else {
    Byte16x b;
    std::memcpy(&b, p, sizeof b);
    return Widen16(b);
  }
}

// The 8 bytes at p, byte i % 8 in lane i.
template <int W>
inline __attribute__((always_inline)) typename CodeLanes<W>::Index RepeatBytes8(const uint8_t* p) {
  if constexpr (W == 8) {
    return WidenBytes<8>(p);
  } else {
    uint64_t eight;
    std::memcpy(&eight, p, sizeof eight);
    typedef uint64_t Long2x __attribute__((vector_size(16)));
    const Long2x twice = {eight, eight};
    Byte16x b;
    std::memcpy(&b, &twice, sizeof b);
    return Widen16(b);
  }
}

// levels[codes[i]] for W codes below n_levels (8 or 16). GCC: a variable
// shuffle of the table (16 lanes: one vpermps of the whole table; 8 lanes:
// one of each 8-entry half, the half picked by the code's bit 3). Clang has
// no variable shuffle in its vector extensions: a select tree over the
// code's bits (its ARM builds).
template <int W>
inline __attribute__((always_inline)) typename CodeLanes<W>::Floats LookUp(typename CodeLanes<W>::Index codes,
                                                                          const float* levels, int n_levels) {
  using Floats = typename CodeLanes<W>::Floats;
#if defined(__clang__)
  Floats v[16];
  for (int i = 0; i < n_levels; ++i) v[i] = Floats{} + levels[i];
  for (int bit = 0, n = n_levels; n > 1; ++bit, n /= 2) {
    const auto set = (codes >> bit) & 1u;
    for (int i = 0; i < n / 2; ++i) v[i] = set != 0u ? v[2 * i + 1] : v[2 * i];
  }
  return v[0];
#else
  Float8x lo_table, hi_table;
  std::memcpy(&lo_table, levels, sizeof lo_table);
  std::memcpy(&hi_table, levels + (n_levels == 16 ? 8 : 0), sizeof hi_table);
  if constexpr (W == 16) {
    Floats table;
    std::memcpy(&table, &lo_table, sizeof lo_table);
    std::memcpy(reinterpret_cast<char*>(&table) + sizeof lo_table, &hi_table, sizeof hi_table);
    return __builtin_shuffle(table, codes);
  } else {
    const Float8x lo = __builtin_shuffle(lo_table, codes & 7u);
    return n_levels == 16 ? ((codes & 8u) != 0u ? __builtin_shuffle(hi_table, codes & 7u) : lo) : lo;
  }
#endif
}

// A value position's codes (kv_codec.h) into out, F32 [dim]: the levels,
// W coordinates at a time. The scale is the caller's: it multiplies the
// position's weight instead of every coordinate.
template <int W>
inline __attribute__((always_inline)) void DecodeValueLevels(const uint8_t* p, int bits, int dim, float* out) {
  using Index = typename CodeLanes<W>::Index;
  auto store = [](float* o, typename CodeLanes<W>::Floats f) __attribute__((always_inline)) {
    std::memcpy(o, &f, sizeof f);
  };
  for (int g = 0; g < dim; g += kCodeGroup, p += kCodeGroup * bits / 8, out += kCodeGroup) {
    if (bits == 4) {
      for (int b = 0; b < 16; b += W) {
        const Index u = WidenBytes<W>(p + b);
        store(out + b, LookUp<W>(u & 15u, kCodecLevels4, 16));
        store(out + 16 + b, LookUp<W>(u >> 4u, kCodecLevels4, 16));
      }
    } else {
      const Index low = RepeatBytes8<W>(p);
      uint32_t high;
      std::memcpy(&high, p + 8, sizeof high);
      for (int c = 0; c < kCodeGroup; c += W) {
        const Index lane = c + Iota<W>();
        const Index code = ((low >> (lane / 8u * 2u)) & 3u) | (((Index{} + high) >> lane) & 1u) << 2u;
        store(out + c, LookUp<W>(code, kCodecLevels3, 8));
      }
    }
  }
}

// The 16 F16 scales at p, as F32.
template <bool kX86Vector>
inline __attribute__((always_inline)) void BlockScales(const uint8_t* p, float (&out)[kCodedBlock]) {
  for (int i = 0; i < kCodedBlock; i += 8) {
    const Float8x f = kX86Vector ? F16LanesByF16c(p + 2 * i) : F16Lanes(p + 2 * i);
    std::memcpy(out + i, &f, sizeof f);
  }
}

// q . k * scale for the 16 positions of a block of coded keys (kv_codec.h)
// and N query heads (rotated), W positions at a time: coordinate by
// coordinate, each query's coordinate times the vector of the positions'
// levels, into two sums per head (even and odd coordinates, so that more
// chains are in flight), added, times the positions' scales, times `scale`.
// No horizontal sums, and each level vector serves N heads.
template <int W, int N, bool kX86Vector>
inline __attribute__((always_inline)) void CodedKeyScores(const float* const (&q)[N], const uint8_t* block,
                                                          int head_dim, int bits, float scale,
                                                          float (&out)[N][kCodedBlock]) {
  using Index = typename CodeLanes<W>::Index;
  using Floats = typename CodeLanes<W>::Floats;
  float scales[kCodedBlock];
  BlockScales<kX86Vector>(block, scales);
  const uint8_t* codes = CodecBlockCodes(block);
  for (int j0 = 0; j0 < kCodedBlock; j0 += W) {
    const Index lane = j0 + Iota<W>();
    // 3 bits: position j's code of coordinate d from its 6 bytes.
    auto code3 = [&](const uint8_t* c) __attribute__((always_inline)) {
      uint32_t low;
      uint16_t high;
      std::memcpy(&low, c, sizeof low);
      std::memcpy(&high, c + 4, sizeof high);
      return ((Index{} + low) >> (lane * 2u) & 3u) | ((Index{} + uint32_t(high)) >> lane & 1u) << 2u;
    };
    Floats even[N], odd[N];
#pragma GCC unroll 8
    for (int h = 0; h < N; ++h) even[h] = odd[h] = Floats{};
    for (int d = 0; d < head_dim; d += 2) {
      Floats k0, k1;
      if (bits == 4) {
        const Index u = WidenBytes<W>(codes + d / 2 * 16 + j0);
        k0 = LookUp<W>(u & 15u, kCodecLevels4, 16);
        k1 = LookUp<W>(u >> 4u, kCodecLevels4, 16);
      } else {
        k0 = LookUp<W>(code3(codes + 6 * d), kCodecLevels3, 8);
        k1 = LookUp<W>(code3(codes + 6 * (d + 1)), kCodecLevels3, 8);
      }
#pragma GCC unroll 8
      for (int h = 0; h < N; ++h) {
        even[h] += q[h][d] * k0;
        odd[h] += q[h][d + 1] * k1;
      }
    }
    Floats s;
    std::memcpy(&s, scales + j0, sizeof s);
#pragma GCC unroll 8
    for (int h = 0; h < N; ++h) {
      const Floats score = (even[h] + odd[h]) * s * scale;
      std::memcpy(out[h] + j0, &score, sizeof score);
    }
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
    case KvType::kKakeya4:  // coded blocks: DecodeValueLevels, CodedKeyScores
    case KvType::kKakeya3:
      return;
  }
}

}  // namespace kakeya
