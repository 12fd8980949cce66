#include "base/huge_pages.h"

#include <sys/mman.h>

namespace kakeya {

HugePageBuffer AllocateHugePages(size_t bytes) {
  const size_t rounded = RoundUpToHugePages(bytes);
  HugePageBuffer buffer(static_cast<uint8_t*>(std::aligned_alloc(kHugePageBytes, rounded)));
  if (buffer) madvise(buffer.get(), rounded, MADV_HUGEPAGE);
  return buffer;
}

}  // namespace kakeya
