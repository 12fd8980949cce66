// Internals shared by matmul.cc (scratch, activation quantization, threading,
// dispatch) and the per-target kernel files matmul_*.cc.
//
// A kernel computes y for ALL activation rows and the output columns
// [col_begin, col_end). Threads get disjoint column ranges; inside a range the
// kernel walks tiles of up to kCols columns x kRows rows, loading each weight
// block once per tile and applying it to every row of the tile. The arithmetic
// of one (row, column) pair is the same sequence of operations whatever the
// tile shape, so results are batch- and thread-invariant.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <type_traits>
#if defined(__x86_64__) || defined(__i386__)
// GCC 12 flags the deliberately undefined pass-through operands inside its
// own AVX-512 intrinsics once inlined (GCC bug 105593): not ours to fix, and
// silenced for those header lines only. Every kernel file includes this
// header first, so this is where immintrin.h is first read.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>
#pragma GCC diagnostic pop
#endif

#include "kernels/cpu/matmul.h"

// Highway targets we compile for (before any hwy include; matmul.cc and every
// kernel file include this header first). SSSE3/SSE4 are skipped to keep the
// 2-core build short: such CPUs run the portable (scalar) target. AVX3_DL
// (Ice Lake / Zen 4+: AVX-512 VNNI, VBMI...) is opt-in in Highway 1.0.3.
// On ARM the kernels are NEON (with the dot-product and i8mm extensions
// chosen inside the NEON build, see matmul.cc), and SVE is left out (ADR
// 0011); the portable target is compiled beside NEON so that every build
// has the reference kernels to force (HWY_COMPILE_ALL_ATTAINABLE; on x86
// it is the static target anyway).
#ifndef HWY_DISABLED_TARGETS
#define HWY_DISABLED_TARGETS (HWY_SSSE3 | HWY_SSE4 | HWY_SVE | HWY_SVE2 | HWY_SVE_256 | HWY_SVE2_128)
#endif
#ifndef HWY_WANT_AVX3_DL
#define HWY_WANT_AVX3_DL
#endif
#if defined(__aarch64__) && !defined(HWY_COMPILE_ALL_ATTAINABLE)
#define HWY_COMPILE_ALL_ATTAINABLE
#endif

namespace kakeya {

#if defined(__x86_64__) || defined(__i386__)
// Pins a vector's value at this point of a tile. GCC otherwise reassociates
// a running integer sum (exact, so it may) into a tree over all its terms,
// keeping every term alive to the end: the 4-row AVX2 Q4_K tile touched the
// stack 417 times instead of 63 (an 8-row VNNI Q6_K tile, 355 instead of 85).
template <typename V>
inline __attribute__((always_inline)) void Pin(V& v) {
  asm("" : "+v"(v));
}

// The 4 activation bytes at p (one quad) in every 32-bit lane, to meet the
// quads of 8 or 16 weight columns.
inline __attribute__((always_inline, target("avx2"))) __m256i BroadcastQuad256(const int8_t* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return _mm256_set1_epi32(v);
}
inline __attribute__((always_inline, target("avx512f"))) __m512i BroadcastQuad512(const int8_t* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return _mm512_set1_epi32(v);
}
#endif

// Activation rows quantized in 32-element blocks (for Q4_0 .. Q8_0 weights).
// d and s hold F16-rounded values, as llama.cpp's Q8_0/Q8_1 store them.
struct ActQ8 {
  const int8_t* qs;  // I8  [n_rows, n_in]: round-half-even(x / d), in -127..127
  const float* d;    // F32 [n_rows, n_in / 32]: block scale d = amax / 127
  const float* s;    // F32 [n_rows, n_in / 32]: d * sum(qs of the block), for mins
  const int16_t* sums;  // I16 [n_rows, n_in / 32]: sum(qs of the block)
};

// Activation rows quantized as llama.cpp's Q8_K (docs/formats/quantization.md 2.4),
// for K-quants.
struct ActQ8K {
  const int8_t* qs;      // I8  [n_rows, n_in]
  const float* d;        // F32 [n_rows, n_in / 256]
  const int16_t* bsums;  // I16 [n_rows, n_in / 16]: sum of each 16 qs
};

struct MatMulJob {
  const WeightMatrix* w;
  int64_t n_rows;
  const float* x;  // F32 [n_rows, n_in]
  ActQ8 q8;        // set for Q4_0 .. Q8_0 weights
  ActQ8K q8k;      // set for K-quant weights
  float* y;        // F32 [n_rows, n_out]
};

using MatMulKernel = void (*)(const MatMulJob& job, int64_t col_begin, int64_t col_end);

// Packing, per layout (matmul_packed.cc, matmul_packed_kquant.cc).
// The layouts of the 32-element block types (matmul_packed.cc); the others
// are the K-quants' (matmul_packed_kquant.cc).
inline bool IsPacked32(WeightLayout l) {
  return l == WeightLayout::kQ8_0x16 || l == WeightLayout::kQ4_0x16 || l == WeightLayout::kQ4_1x16 ||
         l == WeightLayout::kQ5_0x16 || l == WeightLayout::kQ5_1x16;
}
size_t Packed32Bytes(const WeightMatrix& w, WeightLayout layout);
void Pack32(const WeightMatrix& w, WeightLayout layout, uint8_t* out);
size_t PackedKQuantBytes(const WeightMatrix& w, WeightLayout layout);
void PackKQuant(const WeightMatrix& w, WeightLayout layout, uint8_t* out);

// Each kernel file defines, per compiled target namespace, a function returning
// its kernel for a weight type (nullptr for types it does not handle), and
// quantize_act.cc the activation-row quantizers (ActQ8, ActQ8K; n_in a
// multiple of 32 / 256). A row's quantization depends only on that row, and
// every target produces the same bits; they run in the active target's
// build like the kernels, so the tests that force each target reach them.
#define KAKEYA_DECLARE_KERNELS(NS)                                                                   \
  namespace NS {                                                                                     \
  MatMulKernel FloatKernel(DType type);                                                              \
  MatMulKernel LegacyQuantKernel(DType type);                                                        \
  MatMulKernel KQuantKernel(DType type);                                                             \
  MatMulKernel PackedKernel(WeightLayout layout);                                                    \
  void QuantizeRowQ8(const float* x, int64_t n_in, int8_t* qs, float* d, float* s, int16_t* sums); \
  void QuantizeRowQ8K(const float* x, int64_t n_in, int8_t* qs, float* d, int16_t* bsums);           \
  }

#if defined(__aarch64__)
// The NEON build's packed kernels with the Arm extensions (matmul.cc picks
// them by the CPU's features): the dot product's sdot, and i8mm's smmla for
// tiles of 2 rows and more.
namespace N_NEON {
MatMulKernel PackedKernelDotprod(WeightLayout layout);
MatMulKernel PackedKernelI8mm(WeightLayout layout);
}  // namespace N_NEON
#endif

// Rows per cache block for activation rows of `row_bytes` bytes: with many
// rows (prefill) a kernel sweeps one block of rows over all its columns before
// the next block, so that block's activations stay in L2 instead of being
// streamed again from L3 for every column tile; the range's weights are read
// once per block instead. Verify batches (<= 16 rows) are a single block.
inline int64_t RowBlock(int64_t row_bytes) {
  constexpr int64_t kBudget = 256 * 1024;
  return std::max<int64_t>(16, kBudget / std::max<int64_t>(1, row_bytes));
}

// Calls f(b0, b1) for the cache blocks [b0, b1) of n_rows rows (RowBlock).
template <class F>
void ForEachRowBlock(int64_t n_rows, int64_t row_bytes, const F& f) {
  const int64_t block = RowBlock(row_bytes);
  for (int64_t b0 = 0; b0 < n_rows; b0 += block) f(b0, std::min(n_rows, b0 + block));
}

// Rows of the next row tile with `left` rows to go: kMaxRows, but 4 where
// kMaxRows would leave 1..3 behind (8 rows as 4 + 4, not 6 + 2, was 4%
// faster on the F16 bench model), then 4, then 1..3; never above kMaxRows.
template <int kMaxRows>
constexpr int RowsInNextTile(int64_t left) {
  if (left == kMaxRows || left >= kMaxRows + 4) return kMaxRows;
  return static_cast<int>(std::min<int64_t>(left >= 4 ? 4 : left, kMaxRows));
}

// Walks the rows in cache blocks (RowBlock), and in a block the columns
// [col_begin, col_end) in tiles of kCols and the rows in tiles of
// RowsInNextTile, calling
//   tile(w_rows, r0, n_rows, out)
// where w_rows[c] points at weight row (column) o + c, padded by repeating the
// last column of the range (computed, not stored), and the tile writes
// out[r][c] = y of row r0 + r, column o + c. How rows and columns are grouped
// never changes the arithmetic of a (row, column) pair.
template <int kCols, int kMaxRows, class Tile>
void ForEachTile(const MatMulJob& job, int64_t col_begin, int64_t col_end, const Tile& tile) {
  const WeightMatrix& w = *job.w;
  const auto* data = static_cast<const uint8_t*>(w.data);
  ForEachRowBlock(job.n_rows, w.n_in * static_cast<int64_t>(sizeof(float)), [&](int64_t b0, int64_t b1) {
    for (int64_t o = col_begin; o < col_end; o += kCols) {
      const uint8_t* w_rows[kCols];
      for (int c = 0; c < kCols; ++c) w_rows[c] = data + std::min(o + c, col_end - 1) * w.row_bytes;
      const int n_cols = static_cast<int>(std::min<int64_t>(kCols, col_end - o));
      for (int64_t r0 = b0; r0 < b1;) {
        const int n_rows = RowsInNextTile<kMaxRows>(b1 - r0);
        float out[kMaxRows][kCols];
        tile(w_rows, r0, n_rows, out);
        for (int r = 0; r < n_rows; ++r) {
          for (int c = 0; c < n_cols; ++c) job.y[(r0 + r) * w.n_out + o + c] = out[r][c];
        }
        r0 += n_rows;
      }
    }
  });
}

// Calls f(std::integral_constant<int, n>()) for a runtime 1 <= n <= kMax, so
// a tile kernel templated on its row count is chosen without a switch.
template <int kMax, class F>
void WithRowCount(int n, const F& f) {
  if constexpr (kMax > 1) {
    if (n < kMax) return WithRowCount<kMax - 1>(n, f);
  }
  f(std::integral_constant<int, kMax>());
}

// The driver of every packed layout (16 columns per group, each group
// group_bytes long): walks the rows in cache blocks (RowBlock), and in a block
// the groups of [col_begin, col_end) and the rows in tiles of up to kMaxRows,
// calling
//   tile(group, end, r0, n_rows, out)
// where `end` is the end of the thread's range (prefetching stops there) and
// the tile writes out[r][c] = y of row r0 + r, column (group's first) + c.
inline constexpr int kPackedGroupCols = 16;  // columns per group of a packed layout

template <int kMaxRows, class Tile>
void ForEachPackedTile(const MatMulJob& job, int64_t col_begin, int64_t col_end,
                       int64_t group_bytes, const Tile& tile) {
  constexpr int kGroup = kPackedGroupCols;
  const WeightMatrix& w = *job.w;
  const auto* data = static_cast<const uint8_t*>(w.data);
  const uint8_t* end = data + (col_end + kGroup - 1) / kGroup * group_bytes;
  ForEachRowBlock(job.n_rows, w.n_in /* int8 activations */, [&](int64_t b0, int64_t b1) {
    for (int64_t o = col_begin; o < col_end; o += kGroup) {
      const uint8_t* group = data + o / kGroup * group_bytes;
      const int n_cols = static_cast<int>(std::min<int64_t>(kGroup, col_end - o));
      for (int64_t r0 = b0; r0 < b1;) {
        const int n = static_cast<int>(std::min<int64_t>(kMaxRows, b1 - r0));
        float out[kMaxRows][kGroup];
        tile(group, end, r0, n, out);
        // A whole group as a fixed-size copy: with a run-time size the copy
        // became `rep movsq`, whose start-up cost made it 5% of a verify step.
        for (int r = 0; r < n; ++r) {
          float* y = &job.y[(r0 + r) * w.n_out + o];
          if (n_cols == kGroup) {
            std::memcpy(y, out[r], sizeof out[r]);
          } else {
            std::memcpy(y, out[r], n_cols * sizeof(float));
          }
        }
        r0 += n;
      }
    }
  });
}

}  // namespace kakeya
