// Integer dot products on the codec's coded blocks (kv_codec.h), which is
// how attention reads them: a query rounded to 8 bits against a block's key
// codes, and softmax weights rounded to 7 bits against its value codes. The
// sums are exact 32-bit integers, so every target (VNNI's vpdpbusd, AVX2's
// vpmaddubsw, NEON's vmull_s8, the baseline's loops) gives the same
// bits; only their speed differs.
#pragma once

#include <cstdint>

#include "kernels/cpu/kv_codec.h"

namespace kakeya {

// The most queries or weight vectors one call takes.
inline constexpr int kMaxDotVectors = 4;

struct CodedDots {
  // sums[h][j] = sum over d < head_dim of q[h][d] * level(key j, d), for
  // n <= kMaxDotVectors queries of int8 in [-127, 127]; q_sum[h] is the sum
  // of q[h]'s elements (VNNI multiplies unsigned levels offset by 128 and
  // takes 128 times it back).
  void (*keys)(const int8_t* const* q, const int32_t* q_sum, int n, const uint8_t* codes, int head_dim, int bits,
               int32_t (*sums)[kCodedBlock]);
  // out[h][d] += factor[h] * (sum over j < 16 of w[h][j] * level(value j,
  // d)), the sum an exact integer turned float, for n <= kMaxDotVectors
  // weight vectors of 16 bytes in [0, 127] (7 bits: two products of
  // vpmaddubsw then stay below its 16-bit saturation).
  void (*values)(const uint8_t* const* w, const float* factor, int n, const uint8_t* codes, int dim, int bits,
                 float* const* out);
};

// The implementation for the active CPU target (ActiveCpuTarget).
const CodedDots& ActiveCodedDots();

}  // namespace kakeya
