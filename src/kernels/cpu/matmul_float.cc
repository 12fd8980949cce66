// MatMul kernels for F32, F16 and BF16 weights, compiled once per SIMD target.
//
// Tile: kC weight rows (output columns) x kR activation rows; kCols x kRows,
// or kDecodeCols x 1 for a decode step. Each step converts one vector of
// every weight row in the tile to F32 (vcvtph2ps / bf16 shift) and feeds it
// to all kR activation rows, so weights are read once per tile.
//
// Every target computes the same bits (ADR 0014): a (row, column) pair's dot
// product is 16 running sums, sum l taking the products at i = l mod 16 in
// order of i, each product fused into its sum (one rounding); the tail is
// zero-padded to 16; the 16 sums are then added in one fixed tree (l + 8,
// + 4, + 2, + 1). A target with 16 lanes holds a pair's sums in one vector,
// AVX2 in two (kParts), NEON and the portable target in four. The sequence is
// also the same for every tile shape, so a row's result does not depend on
// the batch or the column split.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/cpu/matmul_float.cc"
#include "kernels/cpu/matmul_internal.h"  // must precede hwy (target set)

#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include <algorithm>
#include <cmath>

HWY_BEFORE_NAMESPACE();
namespace kakeya {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

using DF = hn::ScalableTag<float>;
using VF = hn::Vec<DF>;

constexpr int kSums = 16;  // the running sums of a dot product, on every target
constexpr int kLanes = static_cast<int>(hn::MaxLanes(DF()));
static_assert(kLanes <= kSums && kSums % kLanes == 0);
constexpr int kParts = kSums / kLanes;  // vectors per (row, column) pair

// Accumulators (kRows x kCols x kParts) plus kCols weight vectors and one
// activation vector fit the register file: 32 registers with AVX-512 and
// NEON, 16 with AVX2. AVX2's two vectors a pair left it 2 rows x 3 columns
// (12 accumulators): on Zen 5 forced to AVX2 (1.25B F16 and BF16, 2 threads,
// bench verify, 3 rounds alternating with the 4 x 2 tile of one vector a pair
// it replaced), 4 rows 81-84 ms against 81-91, 8 rows 136-156 against
// 141-149 (BF16 135-146 against 135-165); 3 x 2 (8 rows as 3 + 3 + 2) and
// 4 x 2 (spilling) took 145-166, 4 x 1 (the activation rows streamed once per
// column) 150-175.
constexpr int kRows = HWY_MAX_BYTES >= 64 ? 6 : 2;
constexpr int kCols = HWY_MAX_BYTES >= 64 ? 4 : 3;
// A decode step (one row) is bound by how many weight bytes are in flight,
// not by arithmetic: 8 columns are 8 streams and 8 independent FMA chains.
// Zen 4 (1.25B F16, 2 threads, bench verify, alternating): 1 row 43.7 ->
// 39.3 ms while memory was fast, 56.0 -> 55.5 ms while slow; 6, 12 and 16
// columns were slower than 8. 2-4 rows as 8 columns x 2 rows measured slower
// (4 rows / 1 row 1.27-1.45 against 1.02-1.21 with the 4 x 4 tile). AVX2's 4
// columns (8 accumulators) against its former 2: 1 row 46-60 ms against
// 60-78 in the runs above.
constexpr int kDecodeCols = HWY_MAX_BYTES >= 64 ? 8 : 4;

HWY_INLINE VF LoadW(DF df, const float* p) { return hn::LoadU(df, p); }
HWY_INLINE VF LoadW(DF df, const hwy::float16_t* p) {
  return hn::PromoteTo(df, hn::LoadU(hn::Rebind<hwy::float16_t, DF>(), p));
}
HWY_INLINE VF LoadW(DF df, const hwy::bfloat16_t* p) {
  return hn::PromoteTo(df, hn::LoadU(hn::Rebind<hwy::bfloat16_t, DF>(), p));
}

// a * b + c rounded once. Targets without an FMA instruction (the portable
// one) call std::fma per lane, which is exact on every CPU (a hardware FMA
// where there is one, glibc's exact emulation elsewhere).
HWY_INLINE VF FusedMulAdd(VF a, VF b, VF c) {
#if HWY_NATIVE_FMA
  return hn::MulAdd(a, b, c);
#else
  const DF df;
  HWY_ALIGN float la[kLanes], lb[kLanes], lc[kLanes];
  hn::Store(a, df, la);
  hn::Store(b, df, lb);
  hn::Store(c, df, lc);
  for (int l = 0; l < kLanes; ++l) lc[l] = std::fma(la[l], lb[l], lc[l]);
  return hn::Load(df, lc);
#endif
}

// The sum of v's lanes in the tree that pairs lane l with lane l + width / 2
// at every level.
template <class D>
HWY_INLINE float FoldLanes(D d, hn::Vec<D> v) {
#if HWY_TARGET == HWY_SCALAR  // one lane, and no UpperHalf
  return hn::GetLane(v);
#else
  if constexpr (hn::MaxLanes(D()) == 1) {
    return hn::GetLane(v);
  } else {
    const hn::Half<D> dh;
    return FoldLanes(dh, hn::Add(hn::LowerHalf(dh, v), hn::UpperHalf(dh, v)));
  }
#endif
}

// The 16 sums of a pair (kParts vectors, part p holding sums p * kLanes ..)
// added in the fixed tree: the first levels add whole parts (sum l + 8 lives
// kParts / 2 parts above sum l), the rest fold lanes.
HWY_INLINE float SumOf16(VF (&parts)[kParts]) {
  for (int half = kParts / 2; half >= 1; half /= 2) {
    for (int p = 0; p < half; ++p) parts[p] = hn::Add(parts[p], parts[p + half]);
  }
  return FoldLanes(DF(), parts[0]);
}

// out[r][c] = dot(w[c][0..n_in), x[r][0..n_in)). `next` (or null): the
// weight rows of the thread's next tile, prefetched while this one computes.
template <typename T, int kR, int kC>
HWY_NOINLINE void FloatTile(const T* const* w, const T* next, const float* const* x, int64_t n_in,
                            float (*out)[kC]) {
  const DF df;
  VF acc[kR][kC][kParts];
  for (int r = 0; r < kR; ++r) {
    for (int c = 0; c < kC; ++c) {
      for (int p = 0; p < kParts; ++p) acc[r][c][p] = hn::Zero(df);
    }
  }
  // The 16 products at i .. i + 15 of every pair, part by part.
  const auto step = [&](const T* const* wp, const float* const* xp, int64_t i) HWY_ATTR {
    for (int p = 0; p < kParts; ++p) {
      VF wv[kC];
      for (int c = 0; c < kC; ++c) wv[c] = LoadW(df, wp[c] + i + p * kLanes);
      for (int r = 0; r < kR; ++r) {
        const VF xv = hn::LoadU(df, xp[r] + i + p * kLanes);
        for (int c = 0; c < kC; ++c) acc[r][c][p] = FusedMulAdd(wv[c], xv, acc[r][c][p]);
      }
    }
  };
  int64_t i = 0;
  for (; i + kSums <= n_in; i += kSums) {
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
    // Zero-padded copies of the tail: the same step on 16 elements.
    T wt[kC][kSums] = {};
    float xt[kR][kSums] = {};
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
    for (int c = 0; c < kC; ++c) out[r][c] = SumOf16(acc[r][c]);
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
