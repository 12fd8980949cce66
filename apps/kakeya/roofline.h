#pragma once

#include "base/thread_pool.h"

namespace kakeya::cli {

#include <cstddef>

// Best-of-several streaming read bandwidth over a buffer far larger than the
// caches, read by every thread of the pool with the widest loads the CPU has.
// The default 1 GiB takes about a second; `kakeya run` reads 256 MiB (still
// eight times the largest L3 here) to keep its summary quick.
double MeasureReadBandwidthGBps(ThreadPool& pool, size_t bytes = size_t{1} << 30);

}  // namespace kakeya::cli
