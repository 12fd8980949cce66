#include "roofline.h"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <vector>

#include "base/huge_pages.h"

namespace kakeya::cli {
namespace {

// XOR-folds a range with eight independent lanes, so loads are never waiting
// on a dependency chain; compiled for AVX-512, AVX2 and baseline and chosen by
// the CPU at the first call. (Not GCC's target_clones: its load-time resolver
// runs before ThreadSanitizer's runtime and crashed every TSan build.)
inline __attribute__((always_inline)) uint64_t FoldRangeBody(const uint64_t* p, size_t n) {
  uint64_t acc[8] = {};
  for (size_t i = 0; i + 8 <= n; i += 8) {
    for (int k = 0; k < 8; ++k) acc[k] ^= p[i + k];
  }
  uint64_t r = 0;
  for (uint64_t a : acc) r ^= a;
  return r;
}

#if defined(__x86_64__) && defined(__GNUC__)
__attribute__((target("avx512f"))) uint64_t FoldRangeAvx512(const uint64_t* p, size_t n) {
  return FoldRangeBody(p, n);
}
__attribute__((target("avx2"))) uint64_t FoldRangeAvx2(const uint64_t* p, size_t n) { return FoldRangeBody(p, n); }
#endif

uint64_t FoldRange(const uint64_t* p, size_t n) {
#if defined(__x86_64__) && defined(__GNUC__)
  if (__builtin_cpu_supports("avx512f")) return FoldRangeAvx512(p, n);
  if (__builtin_cpu_supports("avx2")) return FoldRangeAvx2(p, n);
#endif
  return FoldRangeBody(p, n);
}

}  // namespace

double MeasureReadBandwidthGBps(ThreadPool& pool, size_t n_bytes) {
  const size_t n_words = n_bytes / sizeof(uint64_t);
  // 2 MiB pages, as the model's weight buffer has: read through 4 KiB pages
  // the fold paid a TLB miss per page and measured below what the engines
  // stream. Zen 4, 2 threads, alternating, memory in its slow phase:
  // 33.4-35.1 GB/s with 4 KiB pages, 36.7-37.2 with 2 MiB ones, while
  // llama.cpp's F16 decode implied 37 GB/s and ours 34.7.
  const HugePageBuffer bytes = AllocateHugePages(n_bytes);
  if (!bytes) return 0.0;
  auto* buf = reinterpret_cast<uint64_t*>(bytes.get());
  std::memset(buf, 1, n_bytes);  // touch every page before timing
  const int64_t n_chunks = 256;
  const size_t chunk = n_words / n_chunks;
  std::vector<uint64_t> sink(pool.size());
  double best = 0.0;
  for (int pass = 0; pass < 5; ++pass) {
    const auto t0 = std::chrono::steady_clock::now();
    pool.Run(n_chunks, [&](int64_t c, int thread) { sink[thread] ^= FoldRange(buf + c * chunk, chunk); });
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    best = std::max(best, n_bytes / s / 1e9);
  }
  volatile uint64_t keep = 0;
  for (uint64_t v : sink) keep = keep ^ v;
  (void)keep;
  return best;
}

}  // namespace kakeya::cli
