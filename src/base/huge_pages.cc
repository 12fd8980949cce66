#include "base/huge_pages.h"

#include <sys/mman.h>

namespace kakeya {

HugePageBuffer AllocateHugePages(size_t bytes) {
  const size_t rounded = RoundUpToHugePages(bytes);
  HugePageBuffer buffer(static_cast<uint8_t*>(std::aligned_alloc(kHugePageBytes, rounded)));
#if defined(MADV_HUGEPAGE)  // Linux; macOS has no such advice
  if (buffer) madvise(buffer.get(), rounded, MADV_HUGEPAGE);
#endif
  return buffer;
}

}  // namespace kakeya
