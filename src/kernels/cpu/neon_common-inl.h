// What the ARM NEON tiles of both packed-layout files share (ADR 0011):
// the extensions' target attributes and the lane-indexed quad operations.
// Included inside namespace kakeya::N_NEON by matmul_packed_neon-inl.h and
// matmul_packed_kquant_neon-inl.h: not a standalone header.

// GCC needs the architecture the intrinsics' own pragma names, plus
// Highway's NEON pragma (+crypto); clang takes the features. The user of
// this header #undefs them at its end.
#if defined(__clang__)
#define KAKEYA_DOTPROD __attribute__((target("dotprod")))
#define KAKEYA_I8MM __attribute__((target("dotprod,i8mm")))
#else
#define KAKEYA_DOTPROD __attribute__((target("arch=armv8.2-a+crypto+dotprod")))
#define KAKEYA_I8MM __attribute__((target("arch=armv8.2-a+crypto+dotprod+i8mm")))
#endif
// GCC 12 schedules instructions before register allocation on aarch64 and
// hoisted the tiles' loads so far ahead that accumulators spilled (ADR
// 0011): the tiles that measured lighter without that pass turn it off for
// themselves. An attribute, not a file's flag, because in one file the
// 1-row sdot tile is lighter with it (Q8_0: 0.254 against 0.279
// instructions per weight byte). The flag is GCC's: clang builds skip it.
#if defined(__clang__)
#define KAKEYA_NO_PRESCHEDULE
#else
#define KAKEYA_NO_PRESCHEDULE __attribute__((optimize("no-schedule-insns")))
#endif
// GCC 12 left the loops over rows and quads rolled on ARM (accumulators on
// the stack, a quad's lane a run-time value): the tiles unroll them.
#define KAKEYA_UNROLL _Pragma("GCC unroll 16")

// Quad `lane` of x in every lane, and sdot against it. The lane of these
// instructions is an immediate: clang wants a literal, which the switch
// gives it (after unrolling, GCC folds it to the one case).
HWY_INLINE int8x16_t BroadcastQuad(int32x4_t x, int lane) {
  switch (lane) {
    case 0: return vreinterpretq_s8_s32(vdupq_laneq_s32(x, 0));
    case 1: return vreinterpretq_s8_s32(vdupq_laneq_s32(x, 1));
    case 2: return vreinterpretq_s8_s32(vdupq_laneq_s32(x, 2));
    default: return vreinterpretq_s8_s32(vdupq_laneq_s32(x, 3));
  }
}
HWY_INLINE KAKEYA_DOTPROD int32x4_t DotQuad(int32x4_t acc, int8x16_t w, int8x16_t x, int lane) {
  switch (lane) {
    case 0: return vdotq_laneq_s32(acc, w, x, 0);
    case 1: return vdotq_laneq_s32(acc, w, x, 1);
    case 2: return vdotq_laneq_s32(acc, w, x, 2);
    default: return vdotq_laneq_s32(acc, w, x, 3);
  }
}

HWY_INLINE float32x4_t LoadF16x4(const uint8_t* p) {
  return vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(reinterpret_cast<const uint16_t*>(p))));
}

// 16 fifth-bit bytes, inverted, for NibbleWithFifthBit. Left visible, GCC 12
// turns each cmtst of ~h into bic + cmtst (one more instruction a use): the
// empty asm hides where the bits came from.
HWY_INLINE uint8x16_t LoadInvertedBits(const uint8_t* p) {
  uint8x16_t bits = vmvnq_u8(vld1q_u8(p));
  asm("" : "+w"(bits));
  return bits;
}

// The low (or high) nibbles of raw with their fifth bit, bit `bit` of the
// inverted bits clear, as the signed bytes u + 16 b - 16: cmtst makes 0xFF
// under each clear bit and one bsl (low nibbles) or sri (high) puts the
// nibble beneath it. Two instructions, where shifting the bit into place
// took three or four (sli would do for bsl, but it overwrites the chunk
// both nibbles need: GCC 12 then copies it first).
HWY_INLINE int8x16_t NibbleWithFifthBit(uint8x16_t raw, uint8x16_t clear, int bit, bool high) {
  const uint8x16_t fill = vtstq_u8(clear, vdupq_n_u8(static_cast<uint8_t>(1 << bit)));
  return vreinterpretq_s8_u8(high ? vsriq_n_u8(fill, raw, 4) : vbslq_u8(vdupq_n_u8(0x0F), raw, fill));
}
