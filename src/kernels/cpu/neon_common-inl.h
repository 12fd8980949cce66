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
