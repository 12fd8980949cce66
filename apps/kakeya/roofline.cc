#include "roofline.h"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <vector>

namespace kakeya::cli {
namespace {

// XOR-folds a range with eight independent lanes, so loads are never waiting
// on a dependency chain; compiled for AVX-512, AVX2 and baseline and chosen at
// run time by the loader (GCC function multi-versioning).
__attribute__((target_clones("avx512f", "avx2", "default"))) uint64_t FoldRange(
    const uint64_t* p, size_t n) {
  uint64_t acc[8] = {};
  for (size_t i = 0; i + 8 <= n; i += 8) {
    for (int k = 0; k < 8; ++k) acc[k] ^= p[i + k];
  }
  uint64_t r = 0;
  for (uint64_t a : acc) r ^= a;
  return r;
}

}  // namespace

double MeasureReadBandwidthGBps(ThreadPool& pool) {
  constexpr size_t kBytes = size_t{1} << 30;  // 1 GiB: far beyond any cache
  constexpr size_t kWords = kBytes / sizeof(uint64_t);
  std::unique_ptr<uint64_t, decltype(&std::free)> buf(
      static_cast<uint64_t*>(std::aligned_alloc(64, kBytes)), &std::free);
  if (!buf) return 0.0;
  std::memset(buf.get(), 1, kBytes);  // touch every page before timing
  const int64_t n_chunks = 256;
  const size_t chunk = kWords / n_chunks;
  std::vector<uint64_t> sink(pool.size());
  double best = 0.0;
  for (int pass = 0; pass < 5; ++pass) {
    const auto t0 = std::chrono::steady_clock::now();
    pool.Run(n_chunks, [&](int64_t c, int thread) { sink[thread] ^= FoldRange(buf.get() + c * chunk, chunk); });
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    best = std::max(best, kBytes / s / 1e9);
  }
  volatile uint64_t keep = 0;
  for (uint64_t v : sink) keep = keep ^ v;
  (void)keep;
  return best;
}

}  // namespace kakeya::cli
