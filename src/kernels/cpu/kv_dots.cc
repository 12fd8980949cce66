#include "kernels/cpu/kv_dots.h"

#include <cstring>

#include "kernels/cpu/matmul.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define KAKEYA_X86_DOTS 1
#elif defined(__aarch64__)
#include <arm_neon.h>
#define KAKEYA_NEON_DOTS 1
#endif

namespace kakeya {
namespace {

int32_t Word(const uint8_t* p) {
  int32_t w;
  std::memcpy(&w, p, sizeof w);
  return w;
}
int32_t Word(const int8_t* p) { return Word(reinterpret_cast<const uint8_t*>(p)); }

// The 16-byte lookup tables of the levels, built once: entry c is level c
// (3 bits: 8 entries, the rest never looked up), plus 128 when `offset`
// (VNNI's unsigned side).
const int8_t* LevelBytes(int bits, bool offset) {
  struct Tables {
    alignas(16) int8_t t[2][2][16] = {};  // [bits == 4][offset]
    Tables() {
      for (int b : {3, 4}) {
        for (int c = 0; c < (1 << b); ++c) {
          t[b == 4][0][c] = CodecLevels(b)[c];
          t[b == 4][1][c] = static_cast<int8_t>(CodecLevels(b)[c] + 128);
        }
      }
    }
  };
  static const Tables tables;
  return tables.t[bits == 4][offset];
}

#if !KAKEYA_NEON_DOTS
// The portable loops: the x86 baseline's.
void KeyDotsPortable(const int8_t* const* q, const int32_t*, int n, const uint8_t* codes, int head_dim, int bits,
                     int32_t (*sums)[kCodedBlock]) {
  const int8_t* levels = CodecLevels(bits);
  for (int h = 0; h < n; ++h) std::memset(sums[h], 0, sizeof sums[h]);
  for (int t = 0; t < head_dim / 4; ++t) {
    uint8_t c[kChunkCodes];
    UnpackChunk(codes + t * ChunkBytes(bits), bits, c);
    for (int h = 0; h < n; ++h) {
      for (int j = 0; j < kCodedBlock; ++j) {
        int32_t s = 0;
        for (int i = 0; i < 4; ++i) s += q[h][4 * t + i] * levels[c[4 * j + i]];
        sums[h][j] += s;
      }
    }
  }
}

void ValueDotsPortable(const uint8_t* const* w, const float* factor, int n, const uint8_t* codes, int dim, int bits,
                       float* const* out) {
  const int8_t* levels = CodecLevels(bits);
  for (int u = 0; u < dim / 16; ++u) {
    int32_t acc[kMaxDotVectors][16] = {};
    for (int g = 0; g < 4; ++g) {
      uint8_t c[kChunkCodes];
      UnpackChunk(codes + (4 * u + g) * ChunkBytes(bits), bits, c);
      for (int h = 0; h < n; ++h) {
        for (int i = 0; i < 16; ++i) {
          for (int p = 0; p < 4; ++p) acc[h][i] += w[h][4 * g + p] * levels[c[4 * i + p]];
        }
      }
    }
    for (int h = 0; h < n; ++h) {
      for (int i = 0; i < 16; ++i) out[h][16 * u + i] += float(acc[h][i]) * factor[h];
    }
  }
}
#endif

#if KAKEYA_X86_DOTS
// GCC 12's broadcast intrinsics start from _mm512_undefined_epi32, which it
// then reports as maybe uninitialized.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

// LevelBytes repeated in each 16-byte lane, for vpshufb.
__attribute__((target("avx2"))) __m256i LevelTable256(int bits) {
  return _mm256_broadcastsi128_si256(_mm_load_si128(reinterpret_cast<const __m128i*>(LevelBytes(bits, false))));
}

// --- AVX-512 with VNNI: a chunk's 64 codes in one register, vpdpbusd. ---
#define KAKEYA_VNNI __attribute__((target("avx512f,avx512bw,avx512vnni")))

KAKEYA_VNNI inline __m512i ChunkCodes512(const uint8_t* chunk, int bits) {
  if (bits == 4) {  // codes 0-31 in the low nibbles, 32-63 in the high ones
    const __m512i x = _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(chunk)));
    return _mm512_and_si512(_mm512_srlv_epi64(x, _mm512_set_epi64(4, 4, 4, 4, 0, 0, 0, 0)), _mm512_set1_epi8(15));
  }
  // Low bits: 16-byte lane l takes bits 2l, 2l + 1 of each byte; then the
  // third bits, one per code, straight from a mask register.
  const __m512i x = _mm512_broadcast_i32x4(_mm_loadu_si128(reinterpret_cast<const __m128i*>(chunk)));
  const __m512i low = _mm512_and_si512(_mm512_srlv_epi64(x, _mm512_set_epi64(6, 6, 4, 4, 2, 2, 0, 0)),
                                       _mm512_set1_epi8(3));
  uint64_t high;
  std::memcpy(&high, chunk + 16, sizeof high);
  return _mm512_mask_add_epi8(low, _cvtu64_mask64(high), low, _mm512_set1_epi8(4));
}

KAKEYA_VNNI __m512i LevelTable512(int bits, bool offset) {
  return _mm512_broadcast_i32x4(_mm_load_si128(reinterpret_cast<const __m128i*>(LevelBytes(bits, offset))));
}

// vpdpbusd multiplies unsigned by signed bytes: the levels, offset by 128,
// are the unsigned side, and 128 * q_sum comes off at the end.
template <int N>
KAKEYA_VNNI inline void KeyDotsVnniN(const int8_t* const* q, const int32_t* q_sum, const uint8_t* codes, int head_dim,
                                     int bits, int32_t (*sums)[kCodedBlock]) {
  const __m512i table = LevelTable512(bits, true);
  __m512i acc[N];
  for (int h = 0; h < N; ++h) acc[h] = _mm512_setzero_si512();
  for (int t = 0; t < head_dim / 4; ++t) {
    const __m512i levels = _mm512_shuffle_epi8(table, ChunkCodes512(codes + t * ChunkBytes(bits), bits));
    for (int h = 0; h < N; ++h) acc[h] = _mm512_dpbusd_epi32(acc[h], levels, _mm512_set1_epi32(Word(q[h] + 4 * t)));
  }
  for (int h = 0; h < N; ++h) {
    _mm512_storeu_si512(sums[h], _mm512_sub_epi32(acc[h], _mm512_set1_epi32(128 * q_sum[h])));
  }
}

KAKEYA_VNNI void KeyDotsVnni(const int8_t* const* q, const int32_t* q_sum, int n, const uint8_t* codes, int head_dim,
                             int bits, int32_t (*sums)[kCodedBlock]) {
  switch (n) {
    case 4: return KeyDotsVnniN<4>(q, q_sum, codes, head_dim, bits, sums);
    case 3: return KeyDotsVnniN<3>(q, q_sum, codes, head_dim, bits, sums);
    case 2: return KeyDotsVnniN<2>(q, q_sum, codes, head_dim, bits, sums);
    default: return KeyDotsVnniN<1>(q, q_sum, codes, head_dim, bits, sums);
  }
}

template <int N>
KAKEYA_VNNI inline void ValueDotsVnniN(const uint8_t* const* w, const float* factor, const uint8_t* codes, int dim,
                                       int bits, float* const* out) {
  const __m512i table = LevelTable512(bits, false);
  for (int u = 0; u < dim / 16; ++u) {
    __m512i sum[N];
    for (int h = 0; h < N; ++h) sum[h] = _mm512_setzero_si512();
    for (int g = 0; g < 4; ++g) {
      const __m512i levels = _mm512_shuffle_epi8(table, ChunkCodes512(codes + (4 * u + g) * ChunkBytes(bits), bits));
      for (int h = 0; h < N; ++h) sum[h] = _mm512_dpbusd_epi32(sum[h], _mm512_set1_epi32(Word(w[h] + 4 * g)), levels);
    }
    for (int h = 0; h < N; ++h) {  // out += float(sum) * factor: a multiply, then an add
      float* o = out[h] + 16 * u;
      const __m512 scaled = _mm512_mul_ps(_mm512_cvtepi32_ps(sum[h]), _mm512_set1_ps(factor[h]));
      _mm512_storeu_ps(o, _mm512_add_ps(_mm512_loadu_ps(o), scaled));
    }
  }
}

KAKEYA_VNNI void ValueDotsVnni(const uint8_t* const* w, const float* factor, int n, const uint8_t* codes, int dim,
                               int bits, float* const* out) {
  switch (n) {
    case 4: return ValueDotsVnniN<4>(w, factor, codes, dim, bits, out);
    case 3: return ValueDotsVnniN<3>(w, factor, codes, dim, bits, out);
    case 2: return ValueDotsVnniN<2>(w, factor, codes, dim, bits, out);
    default: return ValueDotsVnniN<1>(w, factor, codes, dim, bits, out);
  }
}

// --- AVX2 (and AVX-512 without VNNI): halves of 32 codes, vpmaddubsw. ---
#define KAKEYA_AVX2 __attribute__((target("avx2")))

// 32 bits, one per byte: 4 where set, 0 where not.
KAKEYA_AVX2 inline __m256i ThirdBits(uint32_t bits) {
  const __m256i select = _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 2, 2, 3,
                                          3, 3, 3, 3, 3, 3, 3);
  const __m256i bit = _mm256_set1_epi64x(0x8040201008040201);
  const __m256i spread = _mm256_and_si256(_mm256_shuffle_epi8(_mm256_set1_epi32(int(bits)), select), bit);
  return _mm256_and_si256(_mm256_cmpeq_epi8(spread, bit), _mm256_set1_epi8(4));
}

// Codes 0-31 of a chunk into lo, 32-63 into hi.
KAKEYA_AVX2 inline void ChunkCodes256(const uint8_t* chunk, int bits, __m256i* lo, __m256i* hi) {
  if (bits == 4) {
    const __m256i x = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(chunk));
    *lo = _mm256_and_si256(x, _mm256_set1_epi8(15));
    *hi = _mm256_and_si256(_mm256_srli_epi16(x, 4), _mm256_set1_epi8(15));
    return;
  }
  const __m256i x = _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(chunk)));
  uint64_t high;
  std::memcpy(&high, chunk + 16, sizeof high);
  const __m256i three = _mm256_set1_epi8(3);
  *lo = _mm256_or_si256(_mm256_and_si256(_mm256_srlv_epi64(x, _mm256_set_epi64x(2, 2, 0, 0)), three),
                        ThirdBits(uint32_t(high)));
  *hi = _mm256_or_si256(_mm256_and_si256(_mm256_srlv_epi64(x, _mm256_set_epi64x(6, 6, 4, 4)), three),
                        ThirdBits(uint32_t(high >> 32)));
}

// vpmaddubsw multiplies unsigned by signed bytes: |q| is the unsigned side
// and the levels take q's signs (each pair of products stays within 16 bits:
// 2 * 127 * 127), then vpmaddwd by ones adds the pairs.
template <int N>
KAKEYA_AVX2 inline void KeyDotsAvx2N(const int8_t* const* q, const uint8_t* codes, int head_dim, int bits,
                                     int32_t (*sums)[kCodedBlock]) {
  const __m256i table = LevelTable256(bits);
  const __m256i ones = _mm256_set1_epi16(1);
  __m256i lo_acc[N], hi_acc[N];
  for (int h = 0; h < N; ++h) lo_acc[h] = hi_acc[h] = _mm256_setzero_si256();
  for (int t = 0; t < head_dim / 4; ++t) {
    __m256i lo, hi;
    ChunkCodes256(codes + t * ChunkBytes(bits), bits, &lo, &hi);
    lo = _mm256_shuffle_epi8(table, lo);
    hi = _mm256_shuffle_epi8(table, hi);
    for (int h = 0; h < N; ++h) {
      const __m256i qh = _mm256_set1_epi32(Word(q[h] + 4 * t));
      const __m256i magnitude = _mm256_abs_epi8(qh);
      lo_acc[h] = _mm256_add_epi32(
          lo_acc[h], _mm256_madd_epi16(_mm256_maddubs_epi16(magnitude, _mm256_sign_epi8(lo, qh)), ones));
      hi_acc[h] = _mm256_add_epi32(
          hi_acc[h], _mm256_madd_epi16(_mm256_maddubs_epi16(magnitude, _mm256_sign_epi8(hi, qh)), ones));
    }
  }
  for (int h = 0; h < N; ++h) {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(sums[h]), lo_acc[h]);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(sums[h] + 8), hi_acc[h]);
  }
}

KAKEYA_AVX2 void KeyDotsAvx2(const int8_t* const* q, const int32_t*, int n, const uint8_t* codes, int head_dim,
                             int bits, int32_t (*sums)[kCodedBlock]) {
  switch (n) {
    case 4: return KeyDotsAvx2N<4>(q, codes, head_dim, bits, sums);
    case 3: return KeyDotsAvx2N<3>(q, codes, head_dim, bits, sums);
    case 2: return KeyDotsAvx2N<2>(q, codes, head_dim, bits, sums);
    default: return KeyDotsAvx2N<1>(q, codes, head_dim, bits, sums);
  }
}

// Weights of 7 bits are the unsigned side as they are.
template <int N>
KAKEYA_AVX2 inline void ValueDotsAvx2N(const uint8_t* const* w, const float* factor, const uint8_t* codes, int dim,
                                       int bits, float* const* out) {
  const __m256i table = LevelTable256(bits);
  const __m256i ones = _mm256_set1_epi16(1);
  for (int u = 0; u < dim / 16; ++u) {
    __m256i lo_acc[N], hi_acc[N];
    for (int h = 0; h < N; ++h) lo_acc[h] = hi_acc[h] = _mm256_setzero_si256();
    for (int g = 0; g < 4; ++g) {
      __m256i lo, hi;
      ChunkCodes256(codes + (4 * u + g) * ChunkBytes(bits), bits, &lo, &hi);
      lo = _mm256_shuffle_epi8(table, lo);
      hi = _mm256_shuffle_epi8(table, hi);
      for (int h = 0; h < N; ++h) {
        const __m256i wh = _mm256_set1_epi32(Word(w[h] + 4 * g));
        lo_acc[h] = _mm256_add_epi32(lo_acc[h], _mm256_madd_epi16(_mm256_maddubs_epi16(wh, lo), ones));
        hi_acc[h] = _mm256_add_epi32(hi_acc[h], _mm256_madd_epi16(_mm256_maddubs_epi16(wh, hi), ones));
      }
    }
    for (int h = 0; h < N; ++h) {  // out += float(sum) * factor: a multiply, then an add
      float* o = out[h] + 16 * u;
      const __m256 f = _mm256_set1_ps(factor[h]);
      _mm256_storeu_ps(o, _mm256_add_ps(_mm256_loadu_ps(o), _mm256_mul_ps(_mm256_cvtepi32_ps(lo_acc[h]), f)));
      _mm256_storeu_ps(o + 8, _mm256_add_ps(_mm256_loadu_ps(o + 8), _mm256_mul_ps(_mm256_cvtepi32_ps(hi_acc[h]), f)));
    }
  }
}

KAKEYA_AVX2 void ValueDotsAvx2(const uint8_t* const* w, const float* factor, int n, const uint8_t* codes, int dim,
                               int bits, float* const* out) {
  switch (n) {
    case 4: return ValueDotsAvx2N<4>(w, factor, codes, dim, bits, out);
    case 3: return ValueDotsAvx2N<3>(w, factor, codes, dim, bits, out);
    case 2: return ValueDotsAvx2N<2>(w, factor, codes, dim, bits, out);
    default: return ValueDotsAvx2N<1>(w, factor, codes, dim, bits, out);
  }
}
#pragma GCC diagnostic pop
#endif

#if KAKEYA_NEON_DOTS
// --- ARM NEON (every ARMv8-A core, so every ARM target): quarters of 16
// codes, vmull_s8 and pairwise adds. A product pair stays within 16 bits
// (2 * 127 * 127), as with AVX2's vpmaddubsw. ---

// Codes 16q .. 16q + 15 of a chunk into c[q].
inline void ChunkCodes128(const uint8_t* chunk, int bits, uint8x16_t (&c)[4]) {
  if (bits == 4) {
    const uint8x16_t x0 = vld1q_u8(chunk), x1 = vld1q_u8(chunk + 16), low = vdupq_n_u8(15);
    c[0] = vandq_u8(x0, low), c[1] = vandq_u8(x1, low), c[2] = vshrq_n_u8(x0, 4), c[3] = vshrq_n_u8(x1, 4);
    return;
  }
  const uint8x16_t x = vld1q_u8(chunk), three = vdupq_n_u8(3), four = vdupq_n_u8(4);
  static const uint8_t kBit[16] = {1, 2, 4, 8, 16, 32, 64, 128, 1, 2, 4, 8, 16, 32, 64, 128};
  const uint8x16_t bit = vld1q_u8(kBit);
  uint8_t high[8];
  std::memcpy(high, chunk + 16, sizeof high);
  const uint8x16_t low[4] = {vandq_u8(x, three), vandq_u8(vshrq_n_u8(x, 2), three), vandq_u8(vshrq_n_u8(x, 4), three),
                             vshrq_n_u8(x, 6)};
  for (int q = 0; q < 4; ++q) {
    const uint8x16_t bytes = vcombine_u8(vdup_n_u8(high[2 * q]), vdup_n_u8(high[2 * q + 1]));
    c[q] = vorrq_u8(low[q], vandq_u8(vtstq_u8(bytes, bit), four));
  }
}

// acc's lane l += the sum of the 4 products of bytes 4l .. 4l + 3.
inline int32x4_t DotQuads(int32x4_t acc, int8x16_t a, int8x16_t b) {
  const int16x8_t pairs = vpaddq_s16(vmull_s8(vget_low_s8(a), vget_low_s8(b)), vmull_high_s8(a, b));
  return vpadalq_s16(acc, pairs);
}

int8x16_t LevelTable128(int bits) { return vld1q_s8(LevelBytes(bits, false)); }

void KeyDotsNeon(const int8_t* const* q, const int32_t*, int n, const uint8_t* codes, int head_dim, int bits,
                 int32_t (*sums)[kCodedBlock]) {
  const int8x16_t table = LevelTable128(bits);
  int32x4_t acc[kMaxDotVectors][4];
  for (int h = 0; h < n; ++h) {
    for (int quarter = 0; quarter < 4; ++quarter) acc[h][quarter] = vdupq_n_s32(0);
  }
  for (int t = 0; t < head_dim / 4; ++t) {
    uint8x16_t c[4];
    ChunkCodes128(codes + t * ChunkBytes(bits), bits, c);
    int8x16_t levels[4];
    for (int quarter = 0; quarter < 4; ++quarter) levels[quarter] = vqtbl1q_s8(table, c[quarter]);
    for (int h = 0; h < n; ++h) {
      const int8x16_t qh = vreinterpretq_s8_s32(vdupq_n_s32(Word(q[h] + 4 * t)));
      for (int quarter = 0; quarter < 4; ++quarter) acc[h][quarter] = DotQuads(acc[h][quarter], levels[quarter], qh);
    }
  }
  for (int h = 0; h < n; ++h) {
    for (int quarter = 0; quarter < 4; ++quarter) vst1q_s32(sums[h] + 4 * quarter, acc[h][quarter]);
  }
}

void ValueDotsNeon(const uint8_t* const* w, const float* factor, int n, const uint8_t* codes, int dim, int bits,
                   float* const* out) {
  const int8x16_t table = LevelTable128(bits);
  for (int u = 0; u < dim / 16; ++u) {
    int32x4_t acc[kMaxDotVectors][4];
    for (int h = 0; h < n; ++h) {
      for (int quarter = 0; quarter < 4; ++quarter) acc[h][quarter] = vdupq_n_s32(0);
    }
    for (int g = 0; g < 4; ++g) {
      uint8x16_t c[4];
      ChunkCodes128(codes + (4 * u + g) * ChunkBytes(bits), bits, c);
      int8x16_t levels[4];
      for (int quarter = 0; quarter < 4; ++quarter) levels[quarter] = vqtbl1q_s8(table, c[quarter]);
      for (int h = 0; h < n; ++h) {  // weights of 7 bits are signed bytes as they are
        const int8x16_t wh = vreinterpretq_s8_s32(vdupq_n_s32(Word(w[h] + 4 * g)));
        for (int quarter = 0; quarter < 4; ++quarter) acc[h][quarter] = DotQuads(acc[h][quarter], levels[quarter], wh);
      }
    }
    for (int h = 0; h < n; ++h) {  // out += float(sum) * factor: a multiply, then an add
      for (int quarter = 0; quarter < 4; ++quarter) {
        float* o = out[h] + 16 * u + 4 * quarter;
        const float32x4_t scaled = vmulq_n_f32(vcvtq_f32_s32(acc[h][quarter]), factor[h]);
        vst1q_f32(o, vaddq_f32(vld1q_f32(o), scaled));
      }
    }
  }
}
#endif

}  // namespace

const CodedDots& ActiveCodedDots() {
#if KAKEYA_NEON_DOTS
  static const CodedDots neon{&KeyDotsNeon, &ValueDotsNeon};
  return neon;
#else
  static const CodedDots portable{&KeyDotsPortable, &ValueDotsPortable};
#if KAKEYA_X86_DOTS
  static const CodedDots vnni{&KeyDotsVnni, &ValueDotsVnni};
  static const CodedDots avx2{&KeyDotsAvx2, &ValueDotsAvx2};
  if (ActiveVectorIsa() != VectorIsa::kBaseline) {
    return std::strcmp(ActiveCpuTarget(), "avx512_vnni") == 0 ? vnni : avx2;
  }
#endif
  return portable;
#endif
}

}  // namespace kakeya
