// ARM NEON tiles of the packed 32-element block types (ADR 0011).
// Included by matmul_packed.cc in its Highway NEON pass, inside namespace
// kakeya::N_NEON (the x86 tiles and the layouts' description are there):
// not a standalone header.
// NEON: a tile is half a group (8 columns = two 128-bit registers) by up to
// 4 rows, as on AVX2. The 8 weight quads of a block (a chunk of bytes, or
// the low and high nibbles of a chunk of nibbles) become signed bytes, each
// meeting activation quad q of every row; Q8_0's u = q + 128 goes back to q
// with one eor, so its bias term vanishes; the 4-bit types keep u and
// subtract bias * sum(q_x); the 5-bit ones become u - 16 (WeightQuad) and
// correct by the difference (BiasOf). Three forms of the quad products, all
// exact int32 sums, so every form gives the portable kernel's bits:
//   kNeon     smull / smlal two quads into int16 (|q * x| <= 128 * 127, two
//             fit), sadalp into int32 column pairs, one addp per block;
//   kDotprod  sdot: 4 columns x 4 bytes against a broadcast quad;
//   kI8mm     smmla: 2 columns x 2 rows x 8 bytes (two quads zipped), rows
//             in pairs; a tile of 1 row is the kDotprod one.
#include "kernels/cpu/neon_common-inl.h"

enum class ArmDot { kNeon, kDotprod, kI8mm };
constexpr int kMaxTileRows = 4;

// Weight quad q (0..7) of a block's half group as signed bytes: w[0] columns
// 0-3, w[1] columns 4-7, 4 bytes each. clear: the fifth bits (Q5_0, Q5_1),
// inverted: bit j of a byte is element 4j + k's, bit 4 + j element
// 16 + 4j + k's, so quad q's is bit q. With it a nibble becomes u + 16 b -
// 16 (NibbleWithFifthBit): Q5_0's own value and Q5_1's minus 16.
template <WeightLayout kLayout>
HWY_INLINE void WeightQuad(const uint8_t* quants, const uint8x16_t clear[2], int q, int8x16_t w[2]) {
  constexpr Packed32 kP = Packed32Of(kLayout);
  KAKEYA_UNROLL
  for (int i = 0; i < 2; ++i) {
    if constexpr (kLayout == WeightLayout::kQ8_0x16) {
      w[i] = vreinterpretq_s8_u8(veorq_u8(vld1q_u8(quants + 64 * q + 16 * i), vdupq_n_u8(0x80)));
    } else if constexpr (kP.high_bits != 0) {
      const uint8x16_t raw = vld1q_u8(quants + 64 * (q % 4) + 16 * i);
      w[i] = NibbleWithFifthBit(raw, clear[i], q, q >= 4);
    } else {
      const uint8x16_t raw = vld1q_u8(quants + 64 * (q % 4) + 16 * i);
      w[i] = vreinterpretq_s8_u8(q < 4 ? vandq_u8(raw, vdupq_n_u8(0x0F)) : vshrq_n_u8(raw, 4));
    }
  }
}

// What to add to the sum of weight bytes times activations to get the sum
// of (u - bias) times activations: u - 16 for the fifth-bit layouts (above),
// u itself for Q8_0 (its eor takes the 128 off), u - bias otherwise.
template <WeightLayout kLayout>
HWY_INLINE int32_t BiasOf(int16_t sum) {
  constexpr Packed32 kP = Packed32Of(kLayout);
  if constexpr (kLayout == WeightLayout::kQ8_0x16) return 0;
  if constexpr (kP.high_bits != 0) return (16 - kP.bias) * sum;
  return -kP.bias * sum;
}

// The fifth bits of the half group, inverted, if the layout has them.
template <WeightLayout kLayout>
HWY_INLINE void LoadHigh(const uint8_t* blk, int half, uint8x16_t clear[2]) {
  constexpr Packed32 kP = Packed32Of(kLayout);
  KAKEYA_UNROLL
  for (int i = 0; i < 2; ++i) {
    if constexpr (kP.high_bits != 0) {
      clear[i] = LoadInvertedBits(blk + kP.high_bits + 32 * half + 16 * i);
    } else {
      clear[i] = vdupq_n_u8(0);
    }
  }
}

// Each tile row's 32 activations of the block: elements 0-15 and 16-31.
template <int kR>
HWY_INLINE void LoadActivations(const int8_t* const* xq, int8x16_t (*x)[2]) {
  KAKEYA_UNROLL
  for (int r = 0; r < kR; ++r) {
    x[r][0] = vld1q_s8(xq[r]);
    x[r][1] = vld1q_s8(xq[r] + 16);
  }
}

template <WeightLayout kLayout, int kR>
HWY_INLINE void BlockSumsNeon(const uint8_t* blk, int half, const int8_t* const* xq, const int16_t* const* sums,
                              int32x4_t (*isum)[2]) {
  const uint8_t* quants = blk + Packed32Of(kLayout).quants + 32 * half;
  uint8x16_t clear[2];
  LoadHigh<kLayout>(blk, half, clear);
  int8x16_t x[kR][2];  // the block's activations, quads 0-3 and 4-7
  LoadActivations<kR>(xq, x);
  int32x4_t pairs[kR][4];  // columns (0,1), (2,3), (4,5), (6,7): two int32 halves each
  KAKEYA_UNROLL
  for (int r = 0; r < kR; ++r)
    KAKEYA_UNROLL
    for (int i = 0; i < 4; ++i) pairs[r][i] = vdupq_n_s32(0);
  KAKEYA_UNROLL
  for (int q0 = 0; q0 < kQuads; q0 += 2) {
    const int q1 = q0 + 1;
    int8x16_t w0[2], w1[2];
    WeightQuad<kLayout>(quants, clear, q0, w0);
    WeightQuad<kLayout>(quants, clear, q1, w1);
    KAKEYA_UNROLL
    for (int r = 0; r < kR; ++r) {
      const int8x16_t x0 = BroadcastQuad(vreinterpretq_s32_s8(x[r][q0 / 4]), q0 % 4);
      const int8x16_t x1 = BroadcastQuad(vreinterpretq_s32_s8(x[r][q1 / 4]), q1 % 4);
      KAKEYA_UNROLL
      for (int h = 0; h < 2; ++h) {
        const int16x8_t lo = vmlal_s8(vmull_s8(vget_low_s8(w0[h]), vget_low_s8(x0)), vget_low_s8(w1[h]), vget_low_s8(x1));
        const int16x8_t hi = vmlal_high_s8(vmull_high_s8(w0[h], x0), w1[h], x1);
        pairs[r][2 * h] = vpadalq_s16(pairs[r][2 * h], lo);
        pairs[r][2 * h + 1] = vpadalq_s16(pairs[r][2 * h + 1], hi);
      }
    }
  }
  KAKEYA_UNROLL
  for (int r = 0; r < kR; ++r) {
    const int32x4_t bias = vdupq_n_s32(BiasOf<kLayout>(*sums[r]));
    isum[r][0] = vaddq_s32(vpaddq_s32(pairs[r][0], pairs[r][1]), bias);
    isum[r][1] = vaddq_s32(vpaddq_s32(pairs[r][2], pairs[r][3]), bias);
  }
}

template <WeightLayout kLayout, int kR>
HWY_INLINE KAKEYA_DOTPROD void BlockSumsDotprod(const uint8_t* blk, int half, const int8_t* const* xq,
                                                const int16_t* const* sums, int32x4_t (*isum)[2]) {
  const uint8_t* quants = blk + Packed32Of(kLayout).quants + 32 * half;
  uint8x16_t clear[2];
  LoadHigh<kLayout>(blk, half, clear);
  int8x16_t x[kR][2];  // the block's activations, quads 0-3 and 4-7
  LoadActivations<kR>(xq, x);
  KAKEYA_UNROLL
  for (int r = 0; r < kR; ++r) isum[r][0] = isum[r][1] = vdupq_n_s32(BiasOf<kLayout>(*sums[r]));
  KAKEYA_UNROLL
  for (int q = 0; q < kQuads; ++q) {
    int8x16_t w[2];
    WeightQuad<kLayout>(quants, clear, q, w);
    KAKEYA_UNROLL
    for (int r = 0; r < kR; ++r) {
      isum[r][0] = DotQuad(isum[r][0], w[0], x[r][q / 4], q % 4);
      isum[r][1] = DotQuad(isum[r][1], w[1], x[r][q / 4], q % 4);
    }
  }
}

template <WeightLayout kLayout, int kR>
HWY_INLINE KAKEYA_I8MM void BlockSumsI8mm(const uint8_t* blk, int half, const int8_t* const* xq,
                                          const int16_t* const* sums, int32x4_t (*isum)[2]) {
  constexpr int kPairs = (kR + 1) / 2;  // row pairs; an odd last row is paired with itself
  const uint8_t* quants = blk + Packed32Of(kLayout).quants + 32 * half;
  uint8x16_t clear[2];
  LoadHigh<kLayout>(blk, half, clear);
  // m[p][cp]: rows 2p, 2p + 1 by columns 2cp, 2cp + 1, as smmla leaves them
  // (column 2cp row 2p, column 2cp row 2p + 1, column 2cp + 1 row 2p, ...).
  int8x16_t x[kR][2];  // the block's activations, elements 0-15 and 16-31
  LoadActivations<kR>(xq, x);
  int32x4_t m[kPairs][4];
  KAKEYA_UNROLL
  for (int p = 0; p < kPairs; ++p)
    KAKEYA_UNROLL
    for (int cp = 0; cp < 4; ++cp) m[p][cp] = vdupq_n_s32(0);
  // Quads 2e and 2e + 1 are elements 8e .. 8e + 7, of the weights' columns
  // (zipped) and of the activation rows.
  KAKEYA_UNROLL
  for (int e = 0; e < kQuads / 2; ++e) {
    int8x16_t wa[2], wb[2];
    WeightQuad<kLayout>(quants, clear, 2 * e, wa);
    WeightQuad<kLayout>(quants, clear, 2 * e + 1, wb);
    int8x16_t w8[4];  // column pairs (0,1), (2,3), (4,5), (6,7), 8 bytes each
    KAKEYA_UNROLL
    for (int h = 0; h < 2; ++h) {
      const int32x4_t lo = vreinterpretq_s32_s8(wa[h]), hi = vreinterpretq_s32_s8(wb[h]);
      w8[2 * h] = vreinterpretq_s8_s32(vzip1q_s32(lo, hi));
      w8[2 * h + 1] = vreinterpretq_s8_s32(vzip2q_s32(lo, hi));
    }
    KAKEYA_UNROLL
    for (int p = 0; p < kPairs; ++p) {
      // Elements 8e .. 8e + 7 of rows 2p and 2p + 1, one after the other.
      const int64x2_t a = vreinterpretq_s64_s8(x[2 * p][e / 2]);
      const int64x2_t b = vreinterpretq_s64_s8(x[std::min(2 * p + 1, kR - 1)][e / 2]);
      const int8x16_t xe = vreinterpretq_s8_s64(e % 2 == 0 ? vzip1q_s64(a, b) : vzip2q_s64(a, b));
      KAKEYA_UNROLL
      for (int cp = 0; cp < 4; ++cp) m[p][cp] = vmmlaq_s32(m[p][cp], w8[cp], xe);
    }
  }
  KAKEYA_UNROLL
  for (int p = 0; p < kPairs; ++p) {
    KAKEYA_UNROLL
    for (int h = 0; h < 2; ++h) {
      const int32x4_t even = vuzp1q_s32(m[p][2 * h], m[p][2 * h + 1]);  // row 2p, columns 4h .. 4h + 3
      const int32x4_t odd = vuzp2q_s32(m[p][2 * h], m[p][2 * h + 1]);   // row 2p + 1
      isum[2 * p][h] = vaddq_s32(even, vdupq_n_s32(BiasOf<kLayout>(*sums[2 * p])));
      if (2 * p + 1 < kR) isum[2 * p + 1][h] = vaddq_s32(odd, vdupq_n_s32(BiasOf<kLayout>(*sums[2 * p + 1])));
    }
  }
}

// A tile of kR rows by half a group, per form. The forms differ only in the
// BlockSums they call, but each needs its own target attribute (an always-
// inline function with the extension cannot inline into one without it,
// and GCC 12 gave a template helper shared by the three forms the target of
// one of them), so the whole tile is stamped once per form. The plain form
// has no attribute: the compiler may not use sdot or smmla on its own there.
// The float side of a block is the same in every form: acc += isum * (d_w *
// d_x), then the mins' term.
#define KAKEYA_NEON_TILE(Name, BlockSumsForm, ATTR)                                                      \
  template <WeightLayout kLayout, int kR>                                                                 \
  HWY_NOINLINE ATTR void Name(const uint8_t* group, const uint8_t* end, int half, const ActQ8& a,      \
                              int64_t nb, int64_t r0, float (*out)[kGroupCols]) {                        \
    float32x4_t acc[kR][2];                                                                               \
    KAKEYA_UNROLL                                                                                         \
    for (int r = 0; r < kR; ++r) acc[r][0] = acc[r][1] = vdupq_n_f32(0.0f);                               \
    for (int64_t b = 0; b < nb; ++b) {                                                                    \
      const uint8_t* blk = group + b * Packed32Of(kLayout).bytes;                                         \
      if (half == 0) PrefetchAhead<kLayout, kPrefetchLocality<kR>>(blk, end);                             \
      const int8_t* xq[kR];                                                                               \
      const int16_t* sums[kR];                                                                            \
      KAKEYA_UNROLL                                                                                       \
      for (int r = 0; r < kR; ++r) {                                                                      \
        xq[r] = a.qs + ((r0 + r) * nb + b) * kQK;                                                         \
        sums[r] = a.sums + (r0 + r) * nb + b;                                                             \
      }                                                                                                   \
      int32x4_t isum[kR][2];                                                                              \
      BlockSumsForm<kLayout, kR>(blk, half, xq, sums, isum);                                              \
      const float32x4_t dw[2] = {LoadF16x4(blk + 16 * half), LoadF16x4(blk + 16 * half + 8)};            \
      KAKEYA_UNROLL                                                                                       \
      for (int r = 0; r < kR; ++r) {                                                                      \
        const float32x4_t dx = vdupq_n_f32(a.d[(r0 + r) * nb + b]);                                       \
        KAKEYA_UNROLL                                                                                     \
        for (int h = 0; h < 2; ++h) {                                                                     \
          acc[r][h] = vfmaq_f32(acc[r][h], vcvtq_f32_s32(isum[r][h]), vmulq_f32(dw[h], dx));              \
        }                                                                                                 \
      }                                                                                                   \
      if constexpr (constexpr Packed32 kP = Packed32Of(kLayout); kP.mins != 0) {                          \
        const float32x4_t mw[2] = {LoadF16x4(blk + kP.mins + 16 * half),                                  \
                                   LoadF16x4(blk + kP.mins + 16 * half + 8)};                             \
        KAKEYA_UNROLL                                                                                     \
        for (int r = 0; r < kR; ++r) {                                                                    \
          const float32x4_t sx = vdupq_n_f32(a.s[(r0 + r) * nb + b]);                                     \
          KAKEYA_UNROLL                                                                                   \
          for (int h = 0; h < 2; ++h) acc[r][h] = vfmaq_f32(acc[r][h], mw[h], sx);                        \
        }                                                                                                 \
      }                                                                                                   \
    }                                                                                                     \
    KAKEYA_UNROLL                                                                                         \
    for (int r = 0; r < kR; ++r) {                                                                        \
      vst1q_f32(out[r] + 8 * half, acc[r][0]);                                                            \
      vst1q_f32(out[r] + 8 * half + 4, acc[r][1]);                                                        \
    }                                                                                                     \
  }
KAKEYA_NEON_TILE(PackedTileNeon, BlockSumsNeon, )
KAKEYA_NEON_TILE(PackedTileDotprod, BlockSumsDotprod, KAKEYA_DOTPROD)
KAKEYA_NEON_TILE(PackedTileI8mm, BlockSumsI8mm, KAKEYA_I8MM KAKEYA_NO_PRESCHEDULE)
#undef KAKEYA_NEON_TILE

template <WeightLayout kLayout, int kR, ArmDot kDot>
HWY_INLINE void PackedTileArm(const uint8_t* group, const uint8_t* end, int half, const ActQ8& a, int64_t nb,
                              int64_t r0, float (*out)[kGroupCols]) {
  if constexpr (kDot == ArmDot::kNeon) {
    PackedTileNeon<kLayout, kR>(group, end, half, a, nb, r0, out);
  } else if constexpr (kDot == ArmDot::kDotprod || kR == 1) {
    PackedTileDotprod<kLayout, kR>(group, end, half, a, nb, r0, out);
  } else {
    PackedTileI8mm<kLayout, kR>(group, end, half, a, nb, r0, out);
  }
}

template <ArmDot kDot>
struct PackedArm {
  template <WeightLayout kLayout>
  static void Kernel(const MatMulJob& job, int64_t col_begin, int64_t col_end) {
    const int64_t nb = job.w->n_in / kQK;
    ForEachPackedTile<kMaxTileRows>(
        job, col_begin, col_end, nb * Packed32Of(kLayout).bytes,
        [&](const uint8_t* group, const uint8_t* end, int64_t r0, int n, float (*out)[kGroupCols]) {
          WithRowCount<kMaxTileRows>(n, [&](auto rows) {
            for (int half = 0; half < 2; ++half) {
              PackedTileArm<kLayout, decltype(rows)::value, kDot>(group, end, half, job.q8, nb, r0, out);
            }
          });
        });
  }
};
#undef KAKEYA_DOTPROD
#undef KAKEYA_I8MM
#undef KAKEYA_UNROLL
#undef KAKEYA_NO_PRESCHEDULE
#define KAKEYA_PACKED_KERNEL PackedArm<ArmDot::kNeon>::Kernel

// The kernels of the dot-product and i8mm targets (matmul.cc).
MatMulKernel PackedKQuantKernelDotprod(WeightLayout layout);  // matmul_packed_kquant.cc
MatMulKernel PackedKQuantKernelI8mm(WeightLayout layout);

template <ArmDot kDot>
MatMulKernel PackedArmKernel(WeightLayout layout) {
  switch (layout) {
    case WeightLayout::kQ8_0x16: return &PackedArm<kDot>::template Kernel<WeightLayout::kQ8_0x16>;
    case WeightLayout::kQ4_0x16: return &PackedArm<kDot>::template Kernel<WeightLayout::kQ4_0x16>;
    case WeightLayout::kQ4_1x16: return &PackedArm<kDot>::template Kernel<WeightLayout::kQ4_1x16>;
    case WeightLayout::kQ5_0x16: return &PackedArm<kDot>::template Kernel<WeightLayout::kQ5_0x16>;
    case WeightLayout::kQ5_1x16: return &PackedArm<kDot>::template Kernel<WeightLayout::kQ5_1x16>;
    default: return kDot == ArmDot::kI8mm ? PackedKQuantKernelI8mm(layout) : PackedKQuantKernelDotprod(layout);
  }
}
MatMulKernel PackedKernelDotprod(WeightLayout layout) { return PackedArmKernel<ArmDot::kDotprod>(layout); }
MatMulKernel PackedKernelI8mm(WeightLayout layout) { return PackedArmKernel<ArmDot::kI8mm>(layout); }
