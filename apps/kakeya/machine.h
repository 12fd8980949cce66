// What a benchmark ran on: the CPU, its SIMD features and the process's
// memory, for `kakeya bench verify` and `kakeya bench spec` alike.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace kakeya::cli {

// The CPU's model name from /proc/cpuinfo, with its family and model numbers
// where it has them (x86), or "unknown".
std::string CpuModel();
// The SIMD-related CPU flags (avx2, fma, f16c, avx512*, amx*).
std::vector<std::string> CpuFeatures();
// The highest resident set size since the process started or since the
// last ResetPeakRss().
size_t PeakRssBytes();
// Starts a new peak (Linux /proc/self/clear_refs), so that each benchmark
// configuration reports its own; without it the peak is the process's.
void ResetPeakRss();

}  // namespace kakeya::cli
