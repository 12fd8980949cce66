#pragma once

#include "base/thread_pool.h"

namespace kakeya::cli {

// Best-of-several streaming read bandwidth over a buffer far larger than the
// caches, read by every thread of the pool with the widest loads the CPU has.
double MeasureReadBandwidthGBps(ThreadPool& pool);

}  // namespace kakeya::cli
