// MatMul kernels for F32, F16 and BF16 weights, compiled once per SIMD target.
//
// Tile: kC weight rows (output columns) x kR activation rows; kCols x kRows,
// or kDecodeCols x 1 for a decode step. Each step converts one vector of
// every weight row in the tile to F32 (vcvtph2ps / bf16 shift) and feeds it
// to all kR activation rows, so weights are read once per tile.
// Every (row, column) pair owns one vector accumulator: lane l sums the
// products at i = l mod Lanes in order of i, with one MulAdd per step; the
// tail is zero-padded to a full vector; lanes are summed by SumOfLanes at the
// end. This sequence is the same for every tile shape, so a row's result does
// not depend on the batch or the column split.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/cpu/matmul_float.cc"
#include "kernels/cpu/matmul_internal.h"  // must precede hwy (target set)

#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include <algorithm>

HWY_BEFORE_NAMESPACE();
namespace kakeya {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

using DF = hn::ScalableTag<float>;
using VF = hn::Vec<DF>;

// Accumulators for kRows x kCols pairs plus kCols weight vectors fit the
// register file: 32 registers with AVX-512, 16 otherwise.
constexpr int kRows = HWY_MAX_BYTES >= 64 ? 6 : 4;
constexpr int kCols = HWY_MAX_BYTES >= 64 ? 4 : 2;
// A decode step (one row) is bound by how many weight bytes are in flight,
// not by arithmetic: 8 columns are 8 streams and 8 independent FMA chains.
// Zen 4 (1.25B F16, 2 threads, bench verify, alternating): 1 row 43.7 ->
// 39.3 ms while memory was fast, 56.0 -> 55.5 ms while slow; 6, 12 and 16
// columns were slower than 8. 2-4 rows as 8 columns x 2 rows measured slower
// (4 rows / 1 row 1.27-1.45 against 1.02-1.21 with the 4 x 4 tile).
constexpr int kDecodeCols = HWY_MAX_BYTES >= 64 ? 8 : kCols;
constexpr size_t kMaxLanes = HWY_MAX_BYTES / sizeof(float);

HWY_INLINE VF LoadW(DF df, const float* p) { return hn::LoadU(df, p); }
HWY_INLINE VF LoadW(DF df, const hwy::float16_t* p) {
  return hn::PromoteTo(df, hn::LoadU(hn::Rebind<hwy::float16_t, DF>(), p));
}
HWY_INLINE VF LoadW(DF df, const hwy::bfloat16_t* p) {
  return hn::PromoteTo(df, hn::LoadU(hn::Rebind<hwy::bfloat16_t, DF>(), p));
}

// out[r][c] = dot(w[c][0..n_in), x[r][0..n_in)). `next` (or null): the
// weight rows of the thread's next tile, prefetched while this one computes.
template <typename T, int kR, int kC>
HWY_NOINLINE void FloatTile(const T* const* w, const T* next, const float* const* x, int64_t n_in,
                            float (*out)[kC]) {
  const DF df;
  const int64_t N = static_cast<int64_t>(hn::Lanes(df));
  VF acc[kR][kC];
  for (int r = 0; r < kR; ++r) {
    for (int c = 0; c < kC; ++c) acc[r][c] = hn::Zero(df);
  }
  const auto step = [&](const T* const* wp, const float* const* xp, int64_t i) HWY_ATTR {
    VF wv[kC];
    for (int c = 0; c < kC; ++c) wv[c] = LoadW(df, wp[c] + i);
    for (int r = 0; r < kR; ++r) {
      const VF xv = hn::LoadU(df, xp[r] + i);
      for (int c = 0; c < kC; ++c) acc[r][c] = hn::MulAdd(wv[c], xv, acc[r][c]);
    }
  };
  int64_t i = 0;
  for (; i + N <= n_in; i += N) {
    // Software prefetch, once per 64-byte line, of the next tile's rows (they
    // follow this tile's in memory). Prefetching 1 KiB ahead within this
    // tile's rows instead left each tile's start to the hardware: measured on
    // Zen 5 (1.25B F16, 2 threads, bench verify) decode went 63 -> 48 ms.
    // Into L2 (locality 2, prefetcht1), not L1: the kC rows of a tile are n_in apart,
    // often a multiple of 4 KiB, so with the next tile's lines they fall in
    // one L1 set and evict each other. Measured on Zen 4 (same bench,
    // alternating): 1 / 4 / 8 rows 73 / 82 / 111 ms -> 49.5 / 56 / 102 ms.
    if (next != nullptr && (i * static_cast<int64_t>(sizeof(T))) % 64 == 0) {
      for (int c = 0; c < kC; ++c) __builtin_prefetch(next + c * n_in + i, 0, 2);
    }
    step(w, x, i);
  }
  if (i < n_in) {
    // Zero-padded copies of the tail: the same MulAdd step on a full vector.
    T wt[kC][kMaxLanes] = {};
    float xt[kR][kMaxLanes] = {};
    const T* wp[kC];
    const float* xp[kR];
    for (int c = 0; c < kC; ++c) {
      std::copy(w[c] + i, w[c] + n_in, wt[c]);
      wp[c] = wt[c];
    }
    for (int r = 0; r < kR; ++r) {
      std::copy(x[r] + i, x[r] + n_in, xt[r]);
      xp[r] = xt[r];
    }
    step(wp, xp, 0);
  }
  for (int r = 0; r < kR; ++r) {
    for (int c = 0; c < kC; ++c) out[r][c] = hn::GetLane(hn::SumOfLanes(df, acc[r][c]));
  }
}

// Tiles of kC columns x up to kR rows over the thread's columns.
template <typename T, int kC, int kR>
void FloatTiles(const MatMulJob& job, int64_t col_begin, int64_t col_end) {
  const int64_t n_in = job.w->n_in;
  const T* last = static_cast<const T*>(job.w->data) + (col_end - 1) * n_in;
  // The first row tile of each cache block of rows walks the range's weights.
  const int64_t block = RowBlock(n_in * static_cast<int64_t>(sizeof(float)));
  ForEachTile<kC, kR>(
      job, col_begin, col_end,
      [&](const uint8_t* const* w_bytes, int64_t r0, int n_rows, float (*out)[kC]) HWY_ATTR {
        const T* w[kC];
        for (int c = 0; c < kC; ++c) w[c] = reinterpret_cast<const T*>(w_bytes[c]);
        const T* next = r0 % block == 0 && w[0] + kC * n_in <= last ? w[0] + kC * n_in : nullptr;
        const float* x[kR];
        for (int r = 0; r < n_rows; ++r) x[r] = job.x + (r0 + r) * n_in;
        WithRowCount<kR>(n_rows, [&](auto rows) HWY_ATTR { FloatTile<T, rows(), kC>(w, next, x, n_in, out); });
      });
}

template <typename T>
void FloatMatMul(const MatMulJob& job, int64_t col_begin, int64_t col_end) {
  if (kDecodeCols > kCols && job.n_rows == 1) return FloatTiles<T, kDecodeCols, 1>(job, col_begin, col_end);
  FloatTiles<T, kCols, kRows>(job, col_begin, col_end);
}

MatMulKernel FloatKernel(DType type) {
  switch (type) {
    case DType::kF32: return &FloatMatMul<float>;
    case DType::kF16: return &FloatMatMul<hwy::float16_t>;
    case DType::kBF16: return &FloatMatMul<hwy::bfloat16_t>;
    default: return nullptr;
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace kakeya
HWY_AFTER_NAMESPACE();
