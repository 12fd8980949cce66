// ARM NEON tiles of the packed K-quant types (ADR 0011).
// Included by matmul_packed_kquant.cc in its Highway NEON pass, inside namespace
// kakeya::N_NEON (the x86 tiles and the layouts' description are there):
// not a standalone header.
// NEON: a tile is half a group (8 columns = two 128-bit registers, columns
// 0-3 and 4-7, a quad of 4 bytes each) by up to 4 rows, as on AVX2, in the
// three forms of matmul_packed.cc's NEON tiles:
//   kNeon     smull / smlal, one product of each quad per int16 lane (column,
//             byte of the quad), a lane summing a whole sub-block: Q4_K's 8
//             quads |sum| <= 8 * 15 * 127 = 15240, Q5_K's <= 8 * 31 * 127 =
//             31496, Q6_K's 4 quads (16-element sub-blocks) <= 4 * 63 * 127
//             = 32004, all below 32768 (Q8_K activations are in -127..127;
//             even -128 would fit); then saddlp + addp to one int32 per column;
//   kDotprod  sdot: a column's int32 sum of the sub-block directly;
//   kI8mm     smmla: two quads of a sub-block zipped per column pair, rows in
//             pairs; a tile of 1 row is the kDotprod one.
// In every form the sub-block sums are scaled in int32 (mla) and the min
// (Q4_K, Q5_K) and offset (Q6_K, plain form) terms are int16 scale by int16
// block sum into int32 (smlal): sumi, summ and sumb are the portable
// kernel's exact integers (the dot-product forms sum Q6_K's weights as
// 4 (q - 32), which makes sumi - 32 sumb four times over, no offset term),
// and the float steps are its operations in its order, so every form gives
// its bits.
enum class ArmForm { kNeon, kDotprod, kI8mm };
constexpr int kMaxTileRows = 4;
#include "kernels/cpu/neon_common-inl.h"

// Software prefetch of the super-block kPrefetchAhead bytes ahead into L2
// (__builtin_prefetch locality 2, as the x86 tiles' T1), within the thread's
// range [.., end). The distance and level are the x86 measurements'; not
// measured on ARM.
constexpr int kPrefetchAhead = 8192;
HWY_INLINE void PrefetchSuperBlock(const uint8_t* sb, int64_t bytes, const uint8_t* end) {
  const uint8_t* ahead = sb + kPrefetchAhead;
  if (ahead + bytes > end) return;
  // Unrolled: a super-block is 37-53 lines, and a loop spent three
  // instructions on each line's one prfm (6% of a Q6_K row's tile).
  KAKEYA_UNROLL
  for (int64_t l = 0; l < bytes; l += 64) __builtin_prefetch(ahead + l, 0, 2);
}

// The helpers below that every form shares are not templates: writing
// matmul_packed.cc's NEON tiles, GCC 12 gave such a template helper the
// target attribute of the first form to use it, and then refused to inline
// it into the others. Their int arguments need not be constants (GCC keeps
// some of the loops rolled): a variable shift is vshlq by a vector.

// The activation quad at p in every 32-bit lane.
HWY_INLINE int8x16_t XQuad(const int8_t* p) {
  return vreinterpretq_s8_s32(vld1q_dup_s32(reinterpret_cast<const int32_t*>(p)));
}

// Quad j (0..7) of the chunks 8t .. 8t + 7 of a half group, nibble n (0: of
// sub-block 2t, 1: of 2t + 1), as bytes 0..31: w[0] columns 0-3, w[1] 4-7.
// q5: Q5_K, whose fifth bit is bit 2t + n of the qh byte, decoded as in
// Q5_0's tiles (NibbleWithFifthBit): q - 16 as a signed byte. The tile adds
// 16 sc[s] bsum32(s) back (Q4KMinSums).
HWY_INLINE void Q4KQuad(const uint8_t* sb, int half, bool q5, int t, int j, int n, int8x16_t w[2]) {
  for (int h = 0; h < 2; ++h) {
    const uint8x16_t raw = vld1q_u8(sb + kQ4Quants + (8 * t + j) * 64 + 32 * half + 16 * h);
    if (q5) {
      const uint8x16_t clear = LoadInvertedBits(sb + kQ5High + j * 64 + 32 * half + 16 * h);
      w[h] = NibbleWithFifthBit(raw, clear, 2 * t + n, n == 1);
    } else {
      w[h] = vreinterpretq_s8_u8(n == 0 ? vandq_u8(raw, vdupq_n_u8(0x0F)) : vshrq_n_u8(raw, 4));
    }
  }
}

// The quad at hi chunk v (0..15) of sub-block v / 4 + 4i (elements 64i + 4v
// .. + 3) of a half group, as bytes 0..63 (w as in Q4KQuad): the low 4 bits
// are nibble i / 2 of lo chunk v + 16 (i % 2), the top 2 bits 2i..2i+1 of
// the hi chunk. The plain form's int16 lanes need these unsigned bytes.
HWY_INLINE void Q6KQuad(const uint8_t* sb, int half, int v, int i, int8x16_t w[2]) {
  for (int h = 0; h < 2; ++h) {
    const uint8x16_t lo_raw = vld1q_u8(sb + kQ6Low + (v + 16 * (i % 2)) * 64 + 32 * half + 16 * h);
    const uint8x16_t hi_raw = vld1q_u8(sb + kQ6High + v * 64 + 32 * half + 16 * h);
    const uint8x16_t lo = i < 2 ? vandq_u8(lo_raw, vdupq_n_u8(0x0F)) : vshrq_n_u8(lo_raw, 4);
    const uint8x16_t top = vshlq_u8(hi_raw, vdupq_n_s8(static_cast<int8_t>(4 - 2 * i)));  // to bits 4-5
    w[h] = vreinterpretq_s8_u8(vbslq_u8(vdupq_n_u8(0x30), top, lo));
  }
}

// The same quad as 4 (q - 32), signed: q's 6 bits in bits 2-7 with bit 7
// (q's bit 5) flipped. The dot-product forms sum these, and the sum over a
// super-block divided by 4 is exactly sumi - 32 sumb: no offset sums per row.
// top: hi chunk v with every top pair's high bit flipped (Q6KFlippedTops,
// one eor for the chunk's four sub-blocks); each quad then costs what
// Q6KQuad's does (sli, sri and bsl merge the nibble with its top bits).
HWY_INLINE void Q6KFlippedTops(const uint8_t* sb, int half, int v, uint8x16_t top[2]) {
  for (int h = 0; h < 2; ++h) top[h] = veorq_u8(vld1q_u8(sb + kQ6High + v * 64 + 32 * half + 16 * h), vdupq_n_u8(0xAA));
}
HWY_INLINE void Q6KQuadTimes4(const uint8_t* sb, int half, int v, int i, const uint8x16_t top[2], int8x16_t w[2]) {
  for (int h = 0; h < 2; ++h) {
    const uint8x16_t lo_raw = vld1q_u8(sb + kQ6Low + (v + 16 * (i % 2)) * 64 + 32 * half + 16 * h);
    uint8x16_t q4;
    if (i == 0) {
      q4 = vsliq_n_u8(vshlq_n_u8(lo_raw, 2), top[h], 6);
    } else if (i == 1) {
      q4 = vbslq_u8(vdupq_n_u8(0xC0), vshlq_n_u8(top[h], 4), vshlq_n_u8(lo_raw, 2));
    } else {
      const uint8x16_t high_nibble = vandq_u8(lo_raw, vdupq_n_u8(0xF0));
      q4 = vsriq_n_u8(i == 2 ? vshlq_n_u8(top[h], 2) : top[h], high_nibble, 2);
    }
    w[h] = vreinterpretq_s8_u8(q4);
  }
}

// The 8 columns' scales of a sub-block at p, u8 (Q4_K, Q5_K) or i8 (Q6_K).
HWY_INLINE int16x8_t Scales16(const uint8_t* p, bool is_signed) {
  return is_signed ? vmovl_s8(vld1_s8(reinterpret_cast<const int8_t*>(p)))
                   : vreinterpretq_s16_u16(vmovl_u8(vld1_u8(p)));
}

// Plain form: acc[0..3] (columns 0-1, 2-3, 4-5, 6-7; a lane per column and
// byte) += the products of one quad. (Starting from smull instead of zeros
// put the accumulators of the 1-row tiles on the stack: GCC 12 kept the
// quad loop rolled, with a branch per quad.)
HWY_INLINE void MulAccQuad(const int8x16_t w[2], int8x16_t x, int16x8_t acc[4]) {
  for (int h = 0; h < 2; ++h) {
    acc[2 * h] = vmlal_s8(acc[2 * h], vget_low_s8(w[h]), vget_low_s8(x));
    acc[2 * h + 1] = vmlal_high_s8(acc[2 * h + 1], w[h], x);
  }
}

// Plain form: sumi (columns 0-3, 4-7) += each column's total of acc times
// its scale.
HWY_INLINE void ScaleLaneSums(const int16x8_t acc[4], int16x8_t sc, int32x4_t sumi[2]) {
  sumi[0] = vmlaq_s32(sumi[0], vpaddq_s32(vpaddlq_s16(acc[0]), vpaddlq_s16(acc[1])), vmovl_s16(vget_low_s16(sc)));
  sumi[1] = vmlaq_s32(sumi[1], vpaddq_s32(vpaddlq_s16(acc[2]), vpaddlq_s16(acc[3])), vmovl_high_s16(sc));
}

// Dot-product form: sumi += dot (a column's sum per lane) times its scale.
HWY_INLINE void ScaleSums(const int32x4_t dot[2], int16x8_t sc, int32x4_t sumi[2]) {
  sumi[0] = vmlaq_s32(sumi[0], dot[0], vmovl_s16(vget_low_s16(sc)));
  sumi[1] = vmlaq_s32(sumi[1], dot[1], vmovl_high_s16(sc));
}

// i8mm form: the column pairs (0,1), (2,3), (4,5), (6,7) of two quads wa, wb
// (consecutive elements), 8 bytes per column, as smmla takes them.
HWY_INLINE void ZipQuads(const int8x16_t wa[2], const int8x16_t wb[2], int8x16_t w8[4]) {
  for (int h = 0; h < 2; ++h) {
    const int32x4_t a = vreinterpretq_s32_s8(wa[h]), b = vreinterpretq_s32_s8(wb[h]);
    w8[2 * h] = vreinterpretq_s8_s32(vzip1q_s32(a, b));
    w8[2 * h + 1] = vreinterpretq_s8_s32(vzip2q_s32(a, b));
  }
}

// i8mm form: the 8 activation bytes at a (row 2p) and b (row 2p + 1).
HWY_INLINE int8x16_t XPair(const int8_t* a, const int8_t* b) { return vcombine_s8(vld1_s8(a), vld1_s8(b)); }

// i8mm form: msum[cp] (smmla's layout: column 2cp row 2p, column 2cp row
// 2p + 1, column 2cp + 1 row 2p, ...) += m[cp] times the columns' scales.
HWY_INLINE void ScalePairSums(const int32x4_t m[4], int16x8_t sc, int32x4_t msum[4]) {
  const int16x8_t lo = vzip1q_s16(sc, sc), hi = vzip2q_s16(sc, sc);  // each scale twice
  msum[0] = vmlaq_s32(msum[0], m[0], vmovl_s16(vget_low_s16(lo)));
  msum[1] = vmlaq_s32(msum[1], m[1], vmovl_high_s16(lo));
  msum[2] = vmlaq_s32(msum[2], m[2], vmovl_s16(vget_low_s16(hi)));
  msum[3] = vmlaq_s32(msum[3], m[3], vmovl_high_s16(hi));
}

// i8mm form: msum of a row pair as the sums of row 2p (even) and 2p + 1.
HWY_INLINE void UnpairRows(const int32x4_t msum[4], int32x4_t even[2], int32x4_t odd[2]) {
  for (int h = 0; h < 2; ++h) {
    even[h] = vuzp1q_s32(msum[2 * h], msum[2 * h + 1]);
    odd[h] = vuzp2q_s32(msum[2 * h], msum[2 * h + 1]);
  }
}

// acc[0] += the low half of a times lane `lane` of by, acc[1] += its high
// half (smlal by element: no scalar to move into a vector per sub-block). The
// lane is an immediate: the switch folds once the caller's loop is unrolled.
HWY_INLINE void MulAddByLane(int16x8_t a, int16x8_t by, int lane, int32x4_t acc[2]) {
#define KAKEYA_LANE(L)                                             \
  case L:                                                          \
    acc[0] = vmlal_laneq_s16(acc[0], vget_low_s16(a), by, L);      \
    acc[1] = vmlal_high_laneq_s16(acc[1], a, by, L);               \
    return;
  switch (lane) {
    KAKEYA_LANE(0) KAKEYA_LANE(1) KAKEYA_LANE(2) KAKEYA_LANE(3)
    KAKEYA_LANE(4) KAKEYA_LANE(5) KAKEYA_LANE(6) default: KAKEYA_LANE(7)
  }
#undef KAKEYA_LANE
}

// summ of one row, Q4_K and Q5_K: mn[s] by the sub-block's bsum32 (|bsum32|
// <= 32 * 128, an int16; pairwise adds of the 16 bsums put sub-block s in
// lane s) into int32. q5: also fifth, sc[s] by bsum32(s), which 16 times
// over is what Q4KQuad's q - 16 left out of sumi.
HWY_INLINE void Q4KMinSums(const uint8_t* sb, int half, bool q5, const int16_t* bsums, int32x4_t summ[2],
                           int32x4_t fifth[2]) {
  const int16x8_t bsum32 = vpaddq_s16(vld1q_s16(bsums), vld1q_s16(bsums + 8));
  summ[0] = summ[1] = fifth[0] = fifth[1] = vdupq_n_s32(0);
  KAKEYA_UNROLL
  for (int s = 0; s < 8; ++s) {
    MulAddByLane(Scales16(sb + kQ4Mins + 16 * s + 8 * half, false), bsum32, s, summ);
    if (q5) MulAddByLane(Scales16(sb + kQ4Scales + 16 * s + 8 * half, false), bsum32, s, fifth);
  }
}

// sumb of one row, Q6_K's plain form: sc[s] by the sub-block's bsum16 into
// int32.
HWY_INLINE void Q6KOffsetSums(const uint8_t* sb, int half, const int16_t* bsums, int32x4_t sumb[2]) {
  const int16x8_t bsum16[2] = {vld1q_s16(bsums), vld1q_s16(bsums + 8)};
  sumb[0] = sumb[1] = vdupq_n_s32(0);
  KAKEYA_UNROLL
  for (int s = 0; s < 16; ++s) MulAddByLane(Scales16(sb + kQ6Scales + 16 * s + 8 * half, true), bsum16[s / 8], s % 8, sumb);
}

// sumi of kR rows over one super-block, per form. Q4_K and Q5_K: sub-blocks
// 2t and 2t + 1 are the two nibbles of the chunks 8t .. 8t + 7; tiles of up
// to 2 rows sum both at once (more independent chains), larger ones one at
// a time, reading the chunks again from L1, so the sums fit in registers
// (at most 16 accumulators in every form).
template <WeightLayout kLayout, int kR>
HWY_INLINE void Q4KSumsNeon(const uint8_t* sb, int half, const int8_t* const* xq, int32x4_t (*sumi)[2]) {
  constexpr bool kQ5 = kLayout == WeightLayout::kQ5_Kx16;
  constexpr int kNibbles = kR <= 2 ? 2 : 1;
  for (int r = 0; r < kR; ++r) sumi[r][0] = sumi[r][1] = vdupq_n_s32(0);
  for (int t = 0; t < 4; ++t) {
    for (int n0 = 0; n0 < 2; n0 += kNibbles) {
      int16x8_t acc[kNibbles][kR][4];
      for (int n = 0; n < kNibbles; ++n)
        for (int r = 0; r < kR; ++r)
          for (int i = 0; i < 4; ++i) acc[n][r][i] = vdupq_n_s16(0);
      for (int j = 0; j < 8; ++j) {
        for (int n = 0; n < kNibbles; ++n) {
          int8x16_t w[2];
          Q4KQuad(sb, half, kQ5, t, j, n0 + n, w);
          for (int r = 0; r < kR; ++r) MulAccQuad(w, XQuad(xq[r] + 64 * t + 32 * (n0 + n) + 4 * j), acc[n][r]);
        }
      }
      for (int n = 0; n < kNibbles; ++n) {
        const int16x8_t sc = Scales16(sb + kQ4Scales + 16 * (2 * t + n0 + n) + 8 * half, false);
        for (int r = 0; r < kR; ++r) ScaleLaneSums(acc[n][r], sc, sumi[r]);
      }
    }
  }
}

template <WeightLayout kLayout, int kR>
HWY_INLINE KAKEYA_DOTPROD void Q4KSumsDotprod(const uint8_t* sb, int half, const int8_t* const* xq,
                                              int32x4_t (*sumi)[2]) {
  constexpr bool kQ5 = kLayout == WeightLayout::kQ5_Kx16;
  constexpr int kNibbles = kR <= 2 ? 2 : 1;
  for (int r = 0; r < kR; ++r) sumi[r][0] = sumi[r][1] = vdupq_n_s32(0);
  for (int t = 0; t < 4; ++t) {
    KAKEYA_UNROLL
    for (int n0 = 0; n0 < 2; n0 += kNibbles) {
      int32x4_t dot[kNibbles][kR][2];
      // The sub-blocks' 32 activation bytes per row, quad j in lane j % 4
      // of register j / 4: sdot by lane, no broadcast per quad and row.
      int8x16_t x[kNibbles][kR][2];
      KAKEYA_UNROLL
      for (int n = 0; n < kNibbles; ++n) {
        KAKEYA_UNROLL
        for (int r = 0; r < kR; ++r) {
          dot[n][r][0] = dot[n][r][1] = vdupq_n_s32(0);
          x[n][r][0] = vld1q_s8(xq[r] + 64 * t + 32 * (n0 + n));
          x[n][r][1] = vld1q_s8(xq[r] + 64 * t + 32 * (n0 + n) + 16);
        }
      }
      KAKEYA_UNROLL
      for (int j = 0; j < 8; ++j) {
        KAKEYA_UNROLL
        for (int n = 0; n < kNibbles; ++n) {
          int8x16_t w[2];
          Q4KQuad(sb, half, kQ5, t, j, n0 + n, w);
          KAKEYA_UNROLL
          for (int r = 0; r < kR; ++r) {
            KAKEYA_UNROLL
            for (int h = 0; h < 2; ++h) dot[n][r][h] = DotQuad(dot[n][r][h], w[h], x[n][r][j / 4], j % 4);
          }
        }
      }
      for (int n = 0; n < kNibbles; ++n) {
        const int16x8_t sc = Scales16(sb + kQ4Scales + 16 * (2 * t + n0 + n) + 8 * half, false);
        for (int r = 0; r < kR; ++r) ScaleSums(dot[n][r], sc, sumi[r]);
      }
    }
  }
}

// Quads 2e and 2e + 1 of a sub-block are its elements 8e .. 8e + 7: one
// smmla per column pair and row pair takes both. An odd last row is paired
// with itself.
template <WeightLayout kLayout, int kR>
HWY_INLINE KAKEYA_I8MM void Q4KSumsI8mm(const uint8_t* sb, int half, const int8_t* const* xq,
                                        int32x4_t (*sumi)[2]) {
  constexpr bool kQ5 = kLayout == WeightLayout::kQ5_Kx16;
  constexpr int kPairs = (kR + 1) / 2;
  constexpr int kNibbles = kPairs == 1 ? 2 : 1;
  int32x4_t msum[kPairs][4];
  for (int p = 0; p < kPairs; ++p)
    for (int cp = 0; cp < 4; ++cp) msum[p][cp] = vdupq_n_s32(0);
  for (int t = 0; t < 4; ++t) {
    KAKEYA_UNROLL
    for (int n0 = 0; n0 < 2; n0 += kNibbles) {
      int32x4_t m[kNibbles][kPairs][4];
      for (int n = 0; n < kNibbles; ++n)
        for (int p = 0; p < kPairs; ++p)
          for (int cp = 0; cp < 4; ++cp) m[n][p][cp] = vdupq_n_s32(0);
      KAKEYA_UNROLL
      for (int e = 0; e < 4; ++e) {
        KAKEYA_UNROLL
        for (int n = 0; n < kNibbles; ++n) {
          int8x16_t wa[2], wb[2], w8[4];
          Q4KQuad(sb, half, kQ5, t, 2 * e, n0 + n, wa);
          Q4KQuad(sb, half, kQ5, t, 2 * e + 1, n0 + n, wb);
          ZipQuads(wa, wb, w8);
          const int x_at = 64 * t + 32 * (n0 + n) + 8 * e;
          KAKEYA_UNROLL
          for (int p = 0; p < kPairs; ++p) {
            const int8x16_t x = XPair(xq[2 * p] + x_at, xq[std::min(2 * p + 1, kR - 1)] + x_at);
            KAKEYA_UNROLL
            for (int cp = 0; cp < 4; ++cp) m[n][p][cp] = vmmlaq_s32(m[n][p][cp], w8[cp], x);
          }
        }
      }
      for (int n = 0; n < kNibbles; ++n) {
        const int16x8_t sc = Scales16(sb + kQ4Scales + 16 * (2 * t + n0 + n) + 8 * half, false);
        for (int p = 0; p < kPairs; ++p) ScalePairSums(m[n][p], sc, msum[p]);
      }
    }
  }
  for (int p = 0; p < kPairs; ++p) {
    int32x4_t odd[2];
    UnpairRows(msum[p], sumi[2 * p], 2 * p + 1 < kR ? sumi[2 * p + 1] : odd);
  }
}

// Q6_K: hi chunks 4g .. 4g + 3 complete sub-blocks g + 4i (i = 0..3), one
// quad per chunk (Q6KQuad, Q6KQuadTimes4); as many of the four at once as
// fit 16 accumulators (plain form: 4 per row and sub-block, dot product: 2,
// i8mm: 4 per row pair), the others reading the chunks again from L1. i8mm's
// tiles of two row pairs take one sub-block at a time: with two, the
// sub-block sums and the tile's 8 scaled sums spilled (1.06 against 1.02
// instructions per byte).
template <int kR>
HWY_INLINE void Q6KSumsNeon(const uint8_t* sb, int half, const int8_t* const* xq, int32x4_t (*sumi)[2]) {
  constexpr int kSubs = kR == 1 ? 4 : kR == 2 ? 2 : 1;
  for (int r = 0; r < kR; ++r) sumi[r][0] = sumi[r][1] = vdupq_n_s32(0);
  for (int g = 0; g < 4; ++g) {
    for (int i0 = 0; i0 < 4; i0 += kSubs) {
      int16x8_t acc[kSubs][kR][4];
      for (int s = 0; s < kSubs; ++s)
        for (int r = 0; r < kR; ++r)
          for (int i = 0; i < 4; ++i) acc[s][r][i] = vdupq_n_s16(0);
      for (int m = 0; m < 4; ++m) {
        const int v = 4 * g + m;
        for (int s = 0; s < kSubs; ++s) {
          int8x16_t w[2];
          Q6KQuad(sb, half, v, i0 + s, w);
          for (int r = 0; r < kR; ++r) MulAccQuad(w, XQuad(xq[r] + 64 * (i0 + s) + 4 * v), acc[s][r]);
        }
      }
      for (int s = 0; s < kSubs; ++s) {
        const int16x8_t sc = Scales16(sb + kQ6Scales + 16 * (g + 4 * (i0 + s)) + 8 * half, true);
        for (int r = 0; r < kR; ++r) ScaleLaneSums(acc[s][r], sc, sumi[r]);
      }
    }
  }
}

template <int kR>
HWY_INLINE KAKEYA_DOTPROD void Q6KSumsDotprod(const uint8_t* sb, int half, const int8_t* const* xq,
                                              int32x4_t (*sumi)[2]) {
  constexpr int kSubs = kR <= 2 ? 4 : 2;
  for (int r = 0; r < kR; ++r) sumi[r][0] = sumi[r][1] = vdupq_n_s32(0);
  for (int g = 0; g < 4; ++g) {
    KAKEYA_UNROLL
    for (int i0 = 0; i0 < 4; i0 += kSubs) {
      int32x4_t dot[kSubs][kR][2];
      int8x16_t x[kSubs][kR];  // a sub-block's 16 activation bytes per row, quad m in lane m
      KAKEYA_UNROLL
      for (int s = 0; s < kSubs; ++s) {
        KAKEYA_UNROLL
        for (int r = 0; r < kR; ++r) {
          dot[s][r][0] = dot[s][r][1] = vdupq_n_s32(0);
          x[s][r] = vld1q_s8(xq[r] + 64 * (i0 + s) + 16 * g);
        }
      }
      KAKEYA_UNROLL
      for (int m = 0; m < 4; ++m) {
        const int v = 4 * g + m;
        uint8x16_t top[2];
        Q6KFlippedTops(sb, half, v, top);
        KAKEYA_UNROLL
        for (int s = 0; s < kSubs; ++s) {
          int8x16_t w[2];
          Q6KQuadTimes4(sb, half, v, i0 + s, top, w);
          KAKEYA_UNROLL
          for (int r = 0; r < kR; ++r) {
            KAKEYA_UNROLL
            for (int h = 0; h < 2; ++h) dot[s][r][h] = DotQuad(dot[s][r][h], w[h], x[s][r], m);
          }
        }
      }
      for (int s = 0; s < kSubs; ++s) {
        const int16x8_t sc = Scales16(sb + kQ6Scales + 16 * (g + 4 * (i0 + s)) + 8 * half, true);
        for (int r = 0; r < kR; ++r) ScaleSums(dot[s][r], sc, sumi[r]);
      }
    }
  }
}

template <int kR>
HWY_INLINE KAKEYA_I8MM void Q6KSumsI8mm(const uint8_t* sb, int half, const int8_t* const* xq,
                                        int32x4_t (*sumi)[2]) {
  constexpr int kPairs = (kR + 1) / 2;
  constexpr int kSubs = kPairs == 1 ? 4 : 1;
  int32x4_t msum[kPairs][4];
  for (int p = 0; p < kPairs; ++p)
    for (int cp = 0; cp < 4; ++cp) msum[p][cp] = vdupq_n_s32(0);
  for (int g = 0; g < 4; ++g) {
    KAKEYA_UNROLL
    for (int i0 = 0; i0 < 4; i0 += kSubs) {
      int32x4_t m[kSubs][kPairs][4];
      for (int s = 0; s < kSubs; ++s)
        for (int p = 0; p < kPairs; ++p)
          for (int cp = 0; cp < 4; ++cp) m[s][p][cp] = vdupq_n_s32(0);
      KAKEYA_UNROLL
      for (int e = 0; e < 2; ++e) {  // hi chunks 4g + 2e, 4g + 2e + 1: elements 8e .. 8e + 7 of each sub-block
        uint8x16_t top[2][2];
        Q6KFlippedTops(sb, half, 4 * g + 2 * e, top[0]);
        Q6KFlippedTops(sb, half, 4 * g + 2 * e + 1, top[1]);
        KAKEYA_UNROLL
        for (int s = 0; s < kSubs; ++s) {
          const int i = i0 + s;
          int8x16_t wa[2], wb[2], w8[4];
          Q6KQuadTimes4(sb, half, 4 * g + 2 * e, i, top[0], wa);
          Q6KQuadTimes4(sb, half, 4 * g + 2 * e + 1, i, top[1], wb);
          ZipQuads(wa, wb, w8);
          const int x_at = 64 * i + 16 * g + 8 * e;
          KAKEYA_UNROLL
          for (int p = 0; p < kPairs; ++p) {
            const int8x16_t x = XPair(xq[2 * p] + x_at, xq[std::min(2 * p + 1, kR - 1)] + x_at);
            KAKEYA_UNROLL
            for (int cp = 0; cp < 4; ++cp) m[s][p][cp] = vmmlaq_s32(m[s][p][cp], w8[cp], x);
          }
        }
      }
      for (int s = 0; s < kSubs; ++s) {
        const int16x8_t sc = Scales16(sb + kQ6Scales + 16 * (g + 4 * (i0 + s)) + 8 * half, true);
        for (int p = 0; p < kPairs; ++p) ScalePairSums(m[s][p], sc, msum[p]);
      }
    }
  }
  for (int p = 0; p < kPairs; ++p) {
    int32x4_t odd[2];
    UnpairRows(msum[p], sumi[2 * p], 2 * p + 1 < kR ? sumi[2 * p + 1] : odd);
  }
}

// A tile of kR rows by half a group, stamped once per form as in
// matmul_packed.cc (each form's sums need its own target attribute). The
// float sums live in `out`, as in the x86 tiles, leaving the registers to
// the integer ones.
#define KAKEYA_NEON_KTILE(Name, Q4KSumsForm, Q6KSumsForm, kQ6Times4, ATTR)                               \
  template <WeightLayout kLayout, int kR>                                                                 \
  HWY_NOINLINE ATTR void Name(const uint8_t* group, const uint8_t* end, int half, const ActQ8K& a,     \
                              int64_t nsb, int64_t r0, float (*out)[kCols]) {                            \
    constexpr int64_t kBytes = GroupBytes(kLayout);                                                       \
    for (int r = 0; r < kR; ++r) {                                                                        \
      vst1q_f32(out[r] + 8 * half, vdupq_n_f32(0.0f));                                                    \
      vst1q_f32(out[r] + 8 * half + 4, vdupq_n_f32(0.0f));                                                \
    }                                                                                                     \
    for (int64_t b = 0; b < nsb; ++b) {                                                                   \
      const uint8_t* sb = group + b * kBytes;                                                             \
      if (half == 0) PrefetchSuperBlock(sb, kBytes, end);                                                 \
      const int8_t* xq[kR];                                                                               \
      for (int r = 0; r < kR; ++r) xq[r] = a.qs + ((r0 + r) * nsb + b) * kQKK;                            \
      int32x4_t sumi[kR][2];                                                                              \
      const float32x4_t d[2] = {LoadF16x4(sb + 16 * half), LoadF16x4(sb + 16 * half + 8)};               \
      if constexpr (kLayout == WeightLayout::kQ6_Kx16) {                                                  \
        Q6KSumsForm<kR>(sb, half, xq, sumi);                                                              \
        for (int r = 0; r < kR; ++r) {                                                                    \
          const int64_t xb = (r0 + r) * nsb + b;                                                          \
          int32x4_t sumb[2];                                                                              \
          if constexpr (!kQ6Times4) Q6KOffsetSums(sb, half, a.bsums + xb * 16, sumb);                     \
          const float32x4_t dx = vdupq_n_f32(a.d[xb]);                                                    \
          for (int h = 0; h < 2; ++h) {                                                                   \
            const int32x4_t total = kQ6Times4 ? vshrq_n_s32(sumi[r][h], 2)                                \
                                              : vsubq_s32(sumi[r][h], vshlq_n_s32(sumb[h], 5));           \
            float* y = out[r] + 8 * half + 4 * h;                                                         \
            vst1q_f32(y, vfmaq_f32(vld1q_f32(y), vcvtq_f32_s32(total), vmulq_f32(d[h], dx)));             \
          }                                                                                               \
        }                                                                                                 \
      } else {                                                                                            \
        Q4KSumsForm<kLayout, kR>(sb, half, xq, sumi);                                                     \
        const float32x4_t neg_dmin[2] = {vnegq_f32(LoadF16x4(sb + 32 + 16 * half)),                       \
                                         vnegq_f32(LoadF16x4(sb + 32 + 16 * half + 8))};                  \
        for (int r = 0; r < kR; ++r) {                                                                    \
          const int64_t xb = (r0 + r) * nsb + b;                                                          \
          int32x4_t summ[2], fifth[2];                                                                    \
          Q4KMinSums(sb, half, kLayout == WeightLayout::kQ5_Kx16, a.bsums + xb * 16, summ, fifth);        \
          const float32x4_t dx = vdupq_n_f32(a.d[xb]);                                                    \
          for (int h = 0; h < 2; ++h) {                                                                   \
            float* y = out[r] + 8 * half + 4 * h;                                                         \
            const int32x4_t total = vaddq_s32(sumi[r][h], vshlq_n_s32(fifth[h], 4));                      \
            float32x4_t acc = vfmaq_f32(vld1q_f32(y), vcvtq_f32_s32(total), vmulq_f32(d[h], dx));         \
            acc = vfmaq_f32(acc, vcvtq_f32_s32(summ[h]), vmulq_f32(neg_dmin[h], dx));                     \
            vst1q_f32(y, acc);                                                                            \
          }                                                                                               \
        }                                                                                                 \
      }                                                                                                   \
    }                                                                                                     \
  }
KAKEYA_NEON_KTILE(KTileNeon, Q4KSumsNeon, Q6KSumsNeon, false, KAKEYA_NO_PRESCHEDULE)
KAKEYA_NEON_KTILE(KTileDotprod, Q4KSumsDotprod, Q6KSumsDotprod, true, KAKEYA_DOTPROD KAKEYA_NO_PRESCHEDULE)
KAKEYA_NEON_KTILE(KTileI8mm, Q4KSumsI8mm, Q6KSumsI8mm, true, KAKEYA_I8MM KAKEYA_NO_PRESCHEDULE)
#undef KAKEYA_NEON_KTILE

template <WeightLayout kLayout, int kR, ArmForm kForm>
HWY_INLINE void KTileArm(const uint8_t* group, const uint8_t* end, int half, const ActQ8K& a, int64_t nsb,
                         int64_t r0, float (*out)[kCols]) {
  if constexpr (kForm == ArmForm::kNeon) {
    KTileNeon<kLayout, kR>(group, end, half, a, nsb, r0, out);
  } else if constexpr (kForm == ArmForm::kDotprod || kR == 1) {
    KTileDotprod<kLayout, kR>(group, end, half, a, nsb, r0, out);
  } else {
    KTileI8mm<kLayout, kR>(group, end, half, a, nsb, r0, out);
  }
}

template <ArmForm kForm>
struct PackedKArm {
  template <WeightLayout kLayout>
  static void Kernel(const MatMulJob& job, int64_t col_begin, int64_t col_end) {
    const int64_t nsb = job.w->n_in / kQKK;
    ForEachPackedTile<kMaxTileRows>(
        job, col_begin, col_end, nsb * GroupBytes(kLayout),
        [&](const uint8_t* group, const uint8_t* end, int64_t r0, int n, float (*out)[kCols]) {
          WithRowCount<kMaxTileRows>(n, [&](auto rows) {
            for (int half = 0; half < 2; ++half) {
              KTileArm<kLayout, decltype(rows)::value, kForm>(group, end, half, job.q8k, nsb, r0, out);
            }
          });
        });
  }
};

template <ArmForm kForm>
MatMulKernel PackedKArmKernel(WeightLayout layout) {
  if (layout == WeightLayout::kQ4_Kx16) return &PackedKArm<kForm>::template Kernel<WeightLayout::kQ4_Kx16>;
  if (layout == WeightLayout::kQ5_Kx16) return &PackedKArm<kForm>::template Kernel<WeightLayout::kQ5_Kx16>;
  if (layout == WeightLayout::kQ6_Kx16) return &PackedKArm<kForm>::template Kernel<WeightLayout::kQ6_Kx16>;
  return nullptr;
}
#undef KAKEYA_DOTPROD
#undef KAKEYA_I8MM
#undef KAKEYA_UNROLL
#undef KAKEYA_NO_PRESCHEDULE

MatMulKernel PackedKQuantKernel(WeightLayout layout) { return PackedKArmKernel<ArmForm::kNeon>(layout); }
MatMulKernel PackedKQuantKernelDotprod(WeightLayout layout) { return PackedKArmKernel<ArmForm::kDotprod>(layout); }
MatMulKernel PackedKQuantKernelI8mm(WeightLayout layout) { return PackedKArmKernel<ArmForm::kI8mm>(layout); }
