// x86 tiles of the packed K-quant types (AVX-512 VNNI, and AVX2, also run
// on AVX-512 without VNNI). Included by matmul_packed_kquant.cc in its
// Highway x86 passes, inside namespace kakeya::N_<target> (the layouts'
// description, the portable kernel and the packing are there; the ARM tiles
// are matmul_packed_kquant_neon-inl.h): not a standalone header.
// Software prefetch of the super-block kPrefetchAhead bytes ahead, within the
// thread's range [.., end). Into L2 (T1), not L1: measured on Zen 4 (1.25B
// Q4_K_M, 2 threads, bench verify, alternating), 1 / 4 / 8 rows took
// 23.4 / 42.0 / 64.9 ms with T0 and 19.7 / 25.6 / 43.9 ms with T1.
constexpr int kPrefetchAhead = 8192;

// The super-block to prefetch while computing sb's, or null past the range.
HWY_INLINE const uint8_t* AheadOf(const uint8_t* sb, int64_t bytes, const uint8_t* end) {
  const uint8_t* p = sb + kPrefetchAhead;
  return p + bytes > end ? nullptr : p;
}

// One 64-byte line of it (a tile that spreads the prefetch over its work).
HWY_INLINE void PrefetchLine(const uint8_t* ahead, int line, int64_t bytes) {
  if (ahead != nullptr && line * 64 < bytes) _mm_prefetch(reinterpret_cast<const char*>(ahead + line * 64), _MM_HINT_T1);
}

// All of it at once.
HWY_INLINE void PrefetchSuperBlock(const uint8_t* ahead, int64_t bytes) {
  if (ahead == nullptr) return;
  for (int64_t l = 0; l < bytes; l += 64) _mm_prefetch(reinterpret_cast<const char*>(ahead + l), _MM_HINT_T1);
}

// The tiles' target attribute: VNNI's vpdpbusd needs it named on every
// function that inlines into a tile (AVX2 needs nothing beyond Highway's).
#if HWY_TARGET == HWY_AVX3_DL
#define KAKEYA_TILE_TARGET __attribute__((target("avx512vnni")))
#else
#define KAKEYA_TILE_TARGET
#endif
// A lambda body inlined into its tile (see Unrolled).
#define KAKEYA_UNROLLED __attribute__((always_inline)) KAKEYA_TILE_TARGET

// Calls f(integral_constant<0>), ..., f(integral_constant<kN - 1>): offsets
// and masks become immediates, where GCC's unroll pragma left the sub-block
// loops rolled, with a run-time branch per quad.
template <int kN, typename F>
HWY_INLINE KAKEYA_TILE_TARGET void Unrolled(const F& f) {
  [&]<int... kI>(std::integer_sequence<int, kI...>) KAKEYA_UNROLLED {
    (f(std::integral_constant<int, kI>()), ...);
  }(std::make_integer_sequence<int, kN>());
}

#if HWY_TARGET == HWY_AVX3_DL
// AVX-512 VNNI: a tile is one group (16 columns = one zmm) by up to 4 rows.
// The quants of each 4-element quad are decoded once (a few shifts and
// masks) and meet every row's broadcast activation quad in one vpdpbusd;
// a sub-block's int32 sums are scaled with vpmulld, the min / offset terms
// come from the activation block sums with vpdpwssd.
//
// Tiles have at most 4 rows (8 or 16 rows are tiles of 4 over the same
// group, the second reading it from L2), and prefetch the next super-block
// one line per chunk, spread over their work. 8-row tiles, which prefetched
// in one burst and kept fewer sums at once, were slower both streamed and in
// the model: 1.25B Q4_K_M, bench verify, 5 alternating rounds, 8 rows
// 38.7-44.3 -> 35.9-40.4 ms and 16 rows 72.8-82.1 -> 62.2-73.6 ms; and
// `matmul_bench MatMul/Q4_Kx16|Q6_Kx16` (from DRAM, 2 threads) 8 rows
// 3.42-3.50 -> 3.20-3.30 and 3.25-3.39 -> 3.02 ms.
constexpr int kMaxTileRows = 4;

// Int16 lane pairs (lo[c], hi[c]) for c = 0..15, from two rows of 16 bytes.
HWY_INLINE __m512i PairBytes16(const uint8_t* lo, const uint8_t* hi, bool is_signed) {
  const __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(lo));
  const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(hi));
  const __m256i ab = _mm256_set_m128i(_mm_unpackhi_epi8(a, b), _mm_unpacklo_epi8(a, b));
  return is_signed ? _mm512_cvtepi8_epi16(ab) : _mm512_cvtepu8_epi16(ab);
}

// Bit kBit of every byte of v at bit 4 (other bits: whatever the 16-bit
// shift brings, for the caller to mask).
template <int kBit>
HWY_INLINE KAKEYA_TILE_TARGET __m512i BitToBit4(__m512i v) {
  if constexpr (kBit < 4) return _mm512_slli_epi16(v, 4 - kBit);
  if constexpr (kBit > 4) return _mm512_srli_epi16(v, kBit - 4);
  return v;
}

// Q4_K, and Q5_K whose fifth bits (a chunk per quad position j, a bit per
// sub-block) go in at bit 4 with one vpternlogd per nibble.
template <WeightLayout kLayout, int kR>
HWY_NOINLINE KAKEYA_TILE_TARGET void Q4KTile(const uint8_t* group, const uint8_t* end, const ActQ8K& a,
                                             int64_t nsb, int64_t r0, float (*out)[kCols]) {
  constexpr int64_t kBytes = GroupBytes(kLayout);
  constexpr int kLines = (kBytes + 63) / 64;
  const __m512i low4 = _mm512_set1_epi8(0x0F), bit4 = _mm512_set1_epi8(0x10);
  // The float sums live in `out` (touched once per super-block), leaving the
  // registers to the integer sums: in registers, they made the 4-row tiles
  // touch the stack 44 (Q4_K) and 70 (Q6_K) times instead of 9 and 53.
  for (int r = 0; r < kR; ++r) _mm512_storeu_ps(out[r], _mm512_setzero_ps());
  for (int64_t b = 0; b < nsb; ++b) {
    const uint8_t* sb = group + b * kBytes;
    const uint8_t* ahead = AheadOf(sb, kBytes, end);
    __m512i sumi[kR], summ[kR];
    const int8_t* xq[kR];
    for (int r = 0; r < kR; ++r) {
      sumi[r] = summ[r] = _mm512_setzero_si512();
      xq[r] = a.qs + ((r0 + r) * nsb + b) * kQKK;
    }
    // Sub-blocks 2t and 2t + 1 are the low and high nibbles of the same 8
    // chunks: each chunk is loaded once for both, and each row gets two
    // independent chains of vpdpbusd (one chain kept a 1-row tile waiting on
    // vpdpbusd's latency: 13.7 -> 9.9 us for MatMulInCache/Q4_Kx16 rows:1).
    Unrolled<4>([&](auto t) KAKEYA_UNROLLED {
      __m512i lo_sum[kR], hi_sum[kR];
      for (int r = 0; r < kR; ++r) lo_sum[r] = hi_sum[r] = _mm512_setzero_si512();
      Unrolled<8>([&](auto j) KAKEYA_UNROLLED {
        constexpr int kChunk = 8 * t + j;
        // Not for one-row Q4_K tiles: their stream is one sequential run,
        // which the hardware prefetcher follows better alone. 1.25B Q4_K_M,
        // bench verify, 6 alternating rounds: 1 row 23.7-25.5 -> 22.7-24.8
        // ms (faster in 5 of the 6 pairs; 80-84% -> 81-88% of the roofline);
        // matmul_bench MatMul/Q4_Kx16, 8 rounds, 1.65-1.89 -> 1.44-1.74 ms.
        // Q5_K (a second stream, its fifth bits), Q6_K (three) and 2-row
        // tiles lost without it: Q6_K 1.33-1.63 -> 4.17-5.34 ms, Q5_K
        // 2.53-2.88 -> 4.01-4.14 ms; so did the AVX2 tiles, which pass over
        // each group twice (half groups).
        if constexpr (!(kLayout == WeightLayout::kQ4_Kx16 && kR == 1)) {
          PrefetchLine(ahead, kChunk, kBytes);  // 37 (Q5_K: 45) lines over 32 chunks
          if constexpr (kChunk < kLines - 32) PrefetchLine(ahead, 32 + kChunk, kBytes);
        }
        const __m512i raw = _mm512_loadu_si512(sb + kQ4Quants + kChunk * 64);
        __m512i lo = _mm512_and_si512(raw, low4);
        __m512i hi = _mm512_and_si512(_mm512_srli_epi16(raw, 4), low4);
        if constexpr (kLayout == WeightLayout::kQ5_Kx16) {
          const __m512i qh = _mm512_loadu_si512(sb + kQ5High + j * 64);
          lo = _mm512_ternarylogic_epi32(bit4, BitToBit4<2 * t>(qh), lo, 0xCA);  // a ? b : c
          hi = _mm512_ternarylogic_epi32(bit4, BitToBit4<2 * t + 1>(qh), hi, 0xCA);
        }
        for (int r = 0; r < kR; ++r) {
          lo_sum[r] = _mm512_dpbusd_epi32(lo_sum[r], lo, BroadcastQuad512(xq[r] + 64 * t + 4 * j));
          hi_sum[r] = _mm512_dpbusd_epi32(hi_sum[r], hi, BroadcastQuad512(xq[r] + 64 * t + 32 + 4 * j));
        }
      });
      const __m512i sc_lo = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(sb + kQ4Scales + 32 * t)));
      const __m512i sc_hi = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(sb + kQ4Scales + 32 * t + 16)));
      for (int r = 0; r < kR; ++r) {
        sumi[r] = _mm512_add_epi32(sumi[r], _mm512_mullo_epi32(lo_sum[r], sc_lo));
        sumi[r] = _mm512_add_epi32(sumi[r], _mm512_mullo_epi32(hi_sum[r], sc_hi));
        Pin(sumi[r]);
      }
    });
    for (int t = 0; t < 4; ++t) {
      const __m512i mn = PairBytes16(sb + kQ4Mins + 32 * t, sb + kQ4Mins + 32 * t + 16, false);
      for (int r = 0; r < kR; ++r) {
        const int16_t* bs = a.bsums + ((r0 + r) * nsb + b) * 16 + 4 * t;
        // (bsum32 of sub-block 2t, of 2t + 1) as one int16 pair.
        const uint32_t pair = static_cast<uint16_t>(bs[0] + bs[1]) |
                              static_cast<uint32_t>(static_cast<uint16_t>(bs[2] + bs[3])) << 16;
        summ[r] = _mm512_dpwssd_epi32(summ[r], mn, _mm512_set1_epi32(static_cast<int>(pair)));
      }
    }
    const __m512 d = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(sb)));
    const __m512 dmin = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(sb + 32)));
    for (int r = 0; r < kR; ++r) {
      const __m512 dx = _mm512_set1_ps(a.d[(r0 + r) * nsb + b]);
      __m512 acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sumi[r]), _mm512_mul_ps(d, dx), _mm512_loadu_ps(out[r]));
      acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(summ[r]), _mm512_mul_ps(_mm512_sub_ps(_mm512_setzero_ps(), dmin), dx), acc);
      _mm512_storeu_ps(out[r], acc);
    }
  }
}

template <int kR>
HWY_NOINLINE KAKEYA_TILE_TARGET void Q6KTile(const uint8_t* group, const uint8_t* end, const ActQ8K& a,
                                             int64_t nsb, int64_t r0, float (*out)[kCols]) {
  const __m512i low4 = _mm512_set1_epi8(0x0F), bits_from_lo = _mm512_set1_epi8(static_cast<char>(0xCF));
  // The float sums live in `out`, as in Q4KTile.
  for (int r = 0; r < kR; ++r) _mm512_storeu_ps(out[r], _mm512_setzero_ps());
  for (int64_t b = 0; b < nsb; ++b) {
    const uint8_t* sb = group + b * kQ6Bytes;
    const uint8_t* ahead = AheadOf(sb, kQ6Bytes, end);
    __m512i sumi[kR], sumb[kR];
    const int8_t* xq[kR];
    for (int r = 0; r < kR; ++r) {
      sumi[r] = sumb[r] = _mm512_setzero_si512();
      xq[r] = a.qs + ((r0 + r) * nsb + b) * kQKK;
    }
    // Hi chunk v holds the top bits of quads v, v + 16, v + 32 and v + 48,
    // whose low bits are in lo chunks v, v + 16, v and v + 16 (low nibbles,
    // then high): quad v + 16i is quad v % 4 of sub-block v / 4 + 4i. So the
    // hi chunks 4g .. 4g + 3 complete sub-blocks g, g + 4, g + 8, g + 12,
    // summed at once: three loads per four quads, four chains per row.
    Unrolled<4>([&](auto g) KAKEYA_UNROLLED {
      __m512i sub_sum[4][kR];
      for (int i = 0; i < 4; ++i)
        for (int r = 0; r < kR; ++r) sub_sum[i][r] = _mm512_setzero_si512();
      Unrolled<4>([&](auto m) KAKEYA_UNROLLED {
        constexpr int v = 4 * g + m;
        for (int k = 0; k < 4; ++k) PrefetchLine(ahead, 4 * v + k, kQ6Bytes);  // 53 lines over 16 steps
        const __m512i hi_raw = _mm512_loadu_si512(sb + kQ6High + v * 64);
        const __m512i lo_raw[2] = {_mm512_loadu_si512(sb + kQ6Low + v * 64),
                                   _mm512_loadu_si512(sb + kQ6Low + (v + 16) * 64)};
        for (int i = 0; i < 4; ++i) {
          const __m512i lo = i < 2 ? _mm512_and_si512(lo_raw[i % 2], low4)
                                   : _mm512_and_si512(_mm512_srli_epi16(lo_raw[i % 2], 4), low4);
          // The top 2 bits (at bits 2i..2i+1) shifted to bits 4-5; whatever
          // the 16-bit shift drags in from the next byte lands elsewhere, and
          // one vpternlogd takes bits 4-5 from it and the rest from lo (whose
          // bits 6-7 are 0). With shift, mask, shift and or per quad this
          // tile was compute-bound at 36 GB/s per core in L2.
          const __m512i hi = i < 2 ? _mm512_slli_epi16(hi_raw, 4 - 2 * i)
                             : i == 2 ? hi_raw : _mm512_srli_epi16(hi_raw, 2);
          const __m512i q = _mm512_ternarylogic_epi32(bits_from_lo, lo, hi, 0xCA);  // a ? b : c
          const int e = 16 * (g + 4 * i) + 4 * m;
          for (int r = 0; r < kR; ++r) sub_sum[i][r] = _mm512_dpbusd_epi32(sub_sum[i][r], q, BroadcastQuad512(xq[r] + e));
        }
      });
      for (int i = 0; i < 4; ++i) {
        const __m512i sc = _mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(sb + kQ6Scales + 16 * (g + 4 * i))));
        for (int r = 0; r < kR; ++r) {
          sumi[r] = _mm512_add_epi32(sumi[r], _mm512_mullo_epi32(sub_sum[i][r], sc));
          Pin(sumi[r]);
        }
      }
    });
    for (int t = 0; t < 8; ++t) {
      const __m512i sc = PairBytes16(sb + kQ6Scales + 32 * t, sb + kQ6Scales + 32 * t + 16, true);
      for (int r = 0; r < kR; ++r) {
        int32_t pair;
        std::memcpy(&pair, a.bsums + ((r0 + r) * nsb + b) * 16 + 2 * t, 4);
        sumb[r] = _mm512_dpwssd_epi32(sumb[r], sc, _mm512_set1_epi32(pair));
      }
    }
    const __m512 d = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(sb)));
    for (int r = 0; r < kR; ++r) {
      const __m512i total = _mm512_sub_epi32(sumi[r], _mm512_slli_epi32(sumb[r], 5));
      const __m512 dx = _mm512_set1_ps(a.d[(r0 + r) * nsb + b]);
      _mm512_storeu_ps(out[r], _mm512_fmadd_ps(_mm512_cvtepi32_ps(total), _mm512_mul_ps(d, dx), _mm512_loadu_ps(out[r])));
    }
  }
}

template <WeightLayout kLayout, int kR>
HWY_INLINE void KTile(const uint8_t* group, const uint8_t* end, const ActQ8K& a, int64_t nsb,
                      int64_t r0, float (*out)[kCols]) {
  if constexpr (kLayout == WeightLayout::kQ6_Kx16) {
    Q6KTile<kR>(group, end, a, nsb, r0, out);
  } else {
    Q4KTile<kLayout, kR>(group, end, a, nsb, r0, out);
  }
}

template <WeightLayout kLayout>
void PackedKVnni(const MatMulJob& job, int64_t col_begin, int64_t col_end) {
  const int64_t nsb = job.w->n_in / kQKK;
  ForEachPackedTile<kMaxTileRows>(
      job, col_begin, col_end, nsb * GroupBytes(kLayout),
      [&](const uint8_t* group, const uint8_t* end, int64_t r0, int n, float (*out)[kCols]) HWY_ATTR {
        WithRowCount<kMaxTileRows>(n, [&](auto rows) HWY_ATTR {
          KTile<kLayout, decltype(rows)::value>(group, end, job.q8k, nsb, r0, out);
        });
      });
}

MatMulKernel PackedKQuantKernel(WeightLayout layout) {
  if (layout == WeightLayout::kQ4_Kx16) return &PackedKVnni<WeightLayout::kQ4_Kx16>;
  if (layout == WeightLayout::kQ5_Kx16) return &PackedKVnni<WeightLayout::kQ5_Kx16>;
  if (layout == WeightLayout::kQ6_Kx16) return &PackedKVnni<WeightLayout::kQ6_Kx16>;
  return nullptr;
}
#else  // AVX2, and AVX-512 without VNNI
// AVX2 (also AVX-512 without VNNI): a tile is half a group (8 columns = one
// ymm) by up to 4 rows, so it fits in 16 registers. maddubs multiplies the
// unsigned quants by the signed activations into int16 pairs; Q4_K's pair
// sums of a whole 32-element sub-block (8 quads, |sum| <= 8 * 2 * 15 * 127),
// Q5_K's of half a one (<= 4 * 2 * 31 * 127) and Q6_K's of two quads
// (<= 2 * 2 * 63 * 127) fit int16 exactly, and one
// madd with the column's scale in both halves of its pair makes them int32.
// So sumi, summ and sumb are the same exact integers as on the other targets,
// and the float steps are the same: every target gives the same bits.
constexpr int kMaxTileRows = 4;

// Int16 lane pairs (a[c], b[c]) for the 8 columns c of one half group.
HWY_INLINE __m256i PairBytes8(const uint8_t* a, const uint8_t* b, bool is_signed) {
  const __m128i ab = _mm_unpacklo_epi8(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(a)),
                                       _mm_loadl_epi64(reinterpret_cast<const __m128i*>(b)));
  return is_signed ? _mm256_cvtepi8_epi16(ab) : _mm256_cvtepu8_epi16(ab);
}

// The 8 F16 values at p as floats.
HWY_INLINE __m256 LoadF16x8(const uint8_t* p) {
  return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}

// As BitToBit4 in the VNNI part.
template <int kBit>
HWY_INLINE __m256i BitToBit4(__m256i v) {
  if constexpr (kBit < 4) return _mm256_slli_epi16(v, 4 - kBit);
  if constexpr (kBit > 4) return _mm256_srli_epi16(v, kBit - 4);
  return v;
}

// Q4_K, and Q5_K (fifth bits as in the VNNI tile). A Q5_K sub-block's pair
// sums can reach 8 * 2 * 31 * 127 > 32767, so they go to int32 every 4 quads.
template <WeightLayout kLayout, int kR>
HWY_NOINLINE void Q4KTileAvx2(const uint8_t* group, const uint8_t* end, int half, const ActQ8K& a,
                              int64_t nsb, int64_t r0, float (*out)[kCols]) {
  constexpr int64_t kBytes = GroupBytes(kLayout);
  constexpr bool kQ5 = kLayout == WeightLayout::kQ5_Kx16;
  constexpr int kQuadsPerSum = kQ5 ? 4 : 8;
  const __m256i low4 = _mm256_set1_epi8(0x0F), bit4 = _mm256_set1_epi8(0x10);
  // The float sums live in `out`, as in the VNNI tile.
  for (int r = 0; r < kR; ++r) _mm256_storeu_ps(out[r] + 8 * half, _mm256_setzero_ps());
  for (int64_t b = 0; b < nsb; ++b) {
    const uint8_t* sb = group + b * kBytes;
    if (half == 0) PrefetchSuperBlock(AheadOf(sb, kBytes, end), kBytes);
    const uint8_t* sb_half = sb + 8 * half;  // column 8 * half of each 16-byte row
    __m256i sumi[kR], summ[kR];
    const int8_t* xq[kR];
    for (int r = 0; r < kR; ++r) {
      sumi[r] = summ[r] = _mm256_setzero_si256();
      xq[r] = a.qs + ((r0 + r) * nsb + b) * kQKK;
    }
    // As in the VNNI tile: sub-blocks 2t and 2t + 1 are the two nibbles of
    // the same chunks, loaded once for both, two independent sums per row.
    Unrolled<4>([&](auto t) KAKEYA_UNROLLED {
      __m256i lo_sum[kR], hi_sum[kR];  // int16 pairs
      for (int r = 0; r < kR; ++r) lo_sum[r] = hi_sum[r] = _mm256_setzero_si256();
      Unrolled<8>([&](auto j) KAKEYA_UNROLLED {
        const __m256i raw =
            _mm256_loadu_si256(reinterpret_cast<const __m256i*>(sb + kQ4Quants + (8 * t + j) * 64 + 32 * half));
        __m256i lo = _mm256_and_si256(raw, low4);
        __m256i hi = _mm256_and_si256(_mm256_srli_epi16(raw, 4), low4);
        if constexpr (kQ5) {
          const __m256i qh = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(sb + kQ5High + j * 64 + 32 * half));
          lo = _mm256_or_si256(lo, _mm256_and_si256(BitToBit4<2 * t>(qh), bit4));
          hi = _mm256_or_si256(hi, _mm256_and_si256(BitToBit4<2 * t + 1>(qh), bit4));
        }
        for (int r = 0; r < kR; ++r) {
          lo_sum[r] = _mm256_add_epi16(lo_sum[r], _mm256_maddubs_epi16(lo, BroadcastQuad256(xq[r] + 64 * t + 4 * j)));
          hi_sum[r] = _mm256_add_epi16(hi_sum[r], _mm256_maddubs_epi16(hi, BroadcastQuad256(xq[r] + 64 * t + 32 + 4 * j)));
          Pin(lo_sum[r]);  // chains, not trees over all 8 products
          Pin(hi_sum[r]);
        }
        if constexpr ((j + 1) % kQuadsPerSum == 0) {
          const uint8_t* sc = sb_half + kQ4Scales + 32 * t;
          const __m256i sc_lo = PairBytes8(sc, sc, false), sc_hi = PairBytes8(sc + 16, sc + 16, false);
          for (int r = 0; r < kR; ++r) {
            sumi[r] = _mm256_add_epi32(sumi[r], _mm256_madd_epi16(lo_sum[r], sc_lo));
            sumi[r] = _mm256_add_epi32(sumi[r], _mm256_madd_epi16(hi_sum[r], sc_hi));
            Pin(sumi[r]);
            lo_sum[r] = hi_sum[r] = _mm256_setzero_si256();
          }
        }
      });
    });
    for (int t = 0; t < 4; ++t) {
      const __m256i mn = PairBytes8(sb_half + kQ4Mins + 32 * t, sb_half + kQ4Mins + 32 * t + 16, false);
      for (int r = 0; r < kR; ++r) {
        const int16_t* bs = a.bsums + ((r0 + r) * nsb + b) * 16 + 4 * t;
        // (bsum32 of sub-block 2t, of 2t + 1) as one int16 pair.
        const uint32_t pair = static_cast<uint16_t>(bs[0] + bs[1]) |
                              static_cast<uint32_t>(static_cast<uint16_t>(bs[2] + bs[3])) << 16;
        summ[r] = _mm256_add_epi32(summ[r], _mm256_madd_epi16(mn, _mm256_set1_epi32(static_cast<int>(pair))));
        Pin(summ[r]);
      }
    }
    const __m256 d = LoadF16x8(sb + 16 * half);
    const __m256 dmin = LoadF16x8(sb + 32 + 16 * half);
    for (int r = 0; r < kR; ++r) {
      const __m256 dx = _mm256_set1_ps(a.d[(r0 + r) * nsb + b]);
      __m256 acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sumi[r]), _mm256_mul_ps(d, dx), _mm256_loadu_ps(out[r] + 8 * half));
      acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(summ[r]), _mm256_mul_ps(_mm256_sub_ps(_mm256_setzero_ps(), dmin), dx), acc);
      _mm256_storeu_ps(out[r] + 8 * half, acc);
    }
  }
}

template <int kR>
HWY_NOINLINE void Q6KTileAvx2(const uint8_t* group, const uint8_t* end, int half, const ActQ8K& a,
                              int64_t nsb, int64_t r0, float (*out)[kCols]) {
  const __m256i low4 = _mm256_set1_epi8(0x0F), top2 = _mm256_set1_epi8(0x30);
  // The float sums live in `out`, as in the VNNI tile.
  for (int r = 0; r < kR; ++r) _mm256_storeu_ps(out[r] + 8 * half, _mm256_setzero_ps());
  for (int64_t b = 0; b < nsb; ++b) {
    const uint8_t* sb = group + b * kQ6Bytes;
    if (half == 0) PrefetchSuperBlock(AheadOf(sb, kQ6Bytes, end), kQ6Bytes);
    const uint8_t* sb_half = sb + 8 * half;
    __m256i sumi[kR], sumb[kR];
    const int8_t* xq[kR];
    for (int r = 0; r < kR; ++r) {
      sumi[r] = sumb[r] = _mm256_setzero_si256();
      xq[r] = a.qs + ((r0 + r) * nsb + b) * kQKK;
    }
    // As in the VNNI tile: hi chunks 4g .. 4g + 3 complete sub-blocks g,
    // g + 4, g + 8 and g + 12 (i = 0 .. 3), two quads (one int16 pair sum)
    // at a time. With 16 ymm registers, tiles of 1-2 rows sum two of them at
    // once (i = iset and iset + 2, which share a lo chunk), 4 rows one (all
    // four at once for 1 row: 20.4 vs 19.0 us in MatMulInCache).
    constexpr int kSumsAtOnce = kR <= 2 ? 2 : 1;
    constexpr int kISets = 4 / kSumsAtOnce;
    Unrolled<4 * 2 * kISets>([&](auto step) KAKEYA_UNROLLED {
      constexpr int g = step / (2 * kISets), k = step / kISets % 2, iset = step % kISets;
      __m256i p[kSumsAtOnce][kR];  // int16 pairs
      for (int h = 0; h < kSumsAtOnce; ++h)
        for (int r = 0; r < kR; ++r) p[h][r] = _mm256_setzero_si256();
      Unrolled<2>([&](auto n) KAKEYA_UNROLLED {
        constexpr int v = 4 * g + 2 * k + n;
        const __m256i hi_raw = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(sb + kQ6High + v * 64 + 32 * half));
        // Every i of the set has the parity of iset: one lo chunk, v or v + 16.
        const __m256i lo_raw =
            _mm256_loadu_si256(reinterpret_cast<const __m256i*>(sb + kQ6Low + (v + 16 * (iset % 2)) * 64 + 32 * half));
        for (int h = 0; h < kSumsAtOnce; ++h) {
          const int i = iset + kISets * h;
          const __m256i lo = i < 2 ? _mm256_and_si256(lo_raw, low4)
                                   : _mm256_and_si256(_mm256_srli_epi16(lo_raw, 4), low4);
          // The top 2 bits (bits 2i..2i+1) to bits 4-5; what the 16-bit
          // shift drags in from the next byte is masked off.
          const __m256i hi_shifted = i < 2 ? _mm256_slli_epi16(hi_raw, 4 - 2 * i)
                                     : i == 2 ? hi_raw : _mm256_srli_epi16(hi_raw, 2);
          const __m256i q = _mm256_or_si256(lo, _mm256_and_si256(hi_shifted, top2));
          const int e = 16 * (g + 4 * i) + 4 * (2 * k + n);
          for (int r = 0; r < kR; ++r) {
            p[h][r] = _mm256_add_epi16(p[h][r], _mm256_maddubs_epi16(q, BroadcastQuad256(xq[r] + e)));
            Pin(p[h][r]);
          }
        }
      });
      for (int h = 0; h < kSumsAtOnce; ++h) {
        const uint8_t* sc = sb_half + kQ6Scales + 16 * (g + 4 * (iset + kISets * h));
        const __m256i sc2 = PairBytes8(sc, sc, true);
        for (int r = 0; r < kR; ++r) {
          sumi[r] = _mm256_add_epi32(sumi[r], _mm256_madd_epi16(p[h][r], sc2));
          Pin(sumi[r]);
        }
      }
    });
    for (int t = 0; t < 8; ++t) {
      const __m256i sc = PairBytes8(sb_half + kQ6Scales + 32 * t, sb_half + kQ6Scales + 32 * t + 16, true);
      for (int r = 0; r < kR; ++r) {
        int32_t pair;
        std::memcpy(&pair, a.bsums + ((r0 + r) * nsb + b) * 16 + 2 * t, 4);
        sumb[r] = _mm256_add_epi32(sumb[r], _mm256_madd_epi16(sc, _mm256_set1_epi32(pair)));
        Pin(sumb[r]);
      }
    }
    const __m256 d = LoadF16x8(sb + 16 * half);
    for (int r = 0; r < kR; ++r) {
      const __m256i total = _mm256_sub_epi32(sumi[r], _mm256_slli_epi32(sumb[r], 5));
      const __m256 dx = _mm256_set1_ps(a.d[(r0 + r) * nsb + b]);
      _mm256_storeu_ps(out[r] + 8 * half, _mm256_fmadd_ps(_mm256_cvtepi32_ps(total), _mm256_mul_ps(d, dx),
                                                          _mm256_loadu_ps(out[r] + 8 * half)));
    }
  }
}

template <WeightLayout kLayout>
void PackedKAvx2(const MatMulJob& job, int64_t col_begin, int64_t col_end) {
  const int64_t nsb = job.w->n_in / kQKK;
  ForEachPackedTile<kMaxTileRows>(
      job, col_begin, col_end, nsb * GroupBytes(kLayout),
      [&](const uint8_t* group, const uint8_t* end, int64_t r0, int n, float (*out)[kCols]) HWY_ATTR {
        WithRowCount<kMaxTileRows>(n, [&](auto rows) HWY_ATTR {
          for (int half = 0; half < 2; ++half) {
            if constexpr (kLayout == WeightLayout::kQ6_Kx16) {
              Q6KTileAvx2<decltype(rows)::value>(group, end, half, job.q8k, nsb, r0, out);
            } else {
              Q4KTileAvx2<kLayout, decltype(rows)::value>(group, end, half, job.q8k, nsb, r0, out);
            }
          }
        });
      });
}

MatMulKernel PackedKQuantKernel(WeightLayout layout) {
  if (layout == WeightLayout::kQ4_Kx16) return &PackedKAvx2<WeightLayout::kQ4_Kx16>;
  if (layout == WeightLayout::kQ5_Kx16) return &PackedKAvx2<WeightLayout::kQ5_Kx16>;
  if (layout == WeightLayout::kQ6_Kx16) return &PackedKAvx2<WeightLayout::kQ6_Kx16>;
  return nullptr;
}
#endif
#undef KAKEYA_TILE_TARGET
#undef KAKEYA_UNROLLED
