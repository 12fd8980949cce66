// Buffers the CPU streams (weights, the bandwidth roofline): whole 2 MiB
// pages, 2 MiB-aligned and advised for transparent huge pages (Linux THP in
// "madvise" mode; ordinary pages elsewhere). Read through 4 KiB pages, every
// page is a TLB miss: a 2048-wide F16 weight row is a page of its own.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>

namespace kakeya {

struct FreeDeleter {
  void operator()(void* p) const { std::free(p); }
};

using HugePageBuffer = std::unique_ptr<uint8_t, FreeDeleter>;

inline constexpr size_t kHugePageBytes = size_t{1} << 21;

// `bytes` rounded up to whole huge pages.
inline size_t RoundUpToHugePages(size_t bytes) {
  return (bytes + kHugePageBytes - 1) / kHugePageBytes * kHugePageBytes;
}

// RoundUpToHugePages(bytes) bytes, not initialised; null if out of memory.
HugePageBuffer AllocateHugePages(size_t bytes);

}  // namespace kakeya
