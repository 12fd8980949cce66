#include "cache/kv_cache.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "base/error.h"

namespace kakeya {

void LayerCache::Free::operator()(float* p) const { std::free(p); }

LayerCache::LayerCache(const LayerCacheShape& shape, int capacity) : shape_(shape), capacity_(capacity) {
  auto alloc = [&](int width) {
    const size_t bytes = ((static_cast<size_t>(capacity) * width * sizeof(float) + 63) / 64) * 64;
    float* p = static_cast<float*>(std::aligned_alloc(64, std::max<size_t>(bytes, 64)));
    if (p == nullptr) Fail("out of memory allocating a KV cache of ", bytes, " bytes");
    std::memset(p, 0, std::max<size_t>(bytes, 64));
    return p;
  };
  k_.reset(alloc(shape.k_width));
  v_.reset(alloc(shape.v_width));
}

KvCache::KvCache(const std::vector<LayerCacheShape>& layers, int n_ctx, int max_pending)
    : n_ctx_(n_ctx), max_pending_(max_pending) {
  layers_.reserve(layers.size());
  for (const LayerCacheShape& s : layers) {
    const int capacity = s.window > 0 ? std::min(n_ctx, s.window + max_pending) : n_ctx;
    layers_.emplace_back(s, capacity);
  }
}

void KvCache::Append(int n) {
  if (!CanAppend(n)) {
    Fail("KV cache cannot take ", n, " more rows (", n_past_, " of ", n_ctx_, " positions used, ",
         max_pending_, " rows per append)");
  }
  n_past_ += n;
  n_committed_ = std::max(n_committed_, n_past_ - max_pending_);
}

void KvCache::Trim(int n) {
  if (n < 0 || n > n_pending()) {
    Fail("cannot trim ", n, " rows: only ", n_pending(), " rows are pending");
  }
  n_past_ -= n;
}

size_t KvCache::bytes() const {
  size_t total = 0;
  for (const LayerCache& l : layers_) total += l.bytes();
  return total;
}

size_t KvCache::full_bytes_per_token() const {
  size_t total = 0;
  for (const LayerCache& l : layers_) {
    if (!l.is_ring()) total += static_cast<size_t>(l.k_width() + l.v_width()) * sizeof(float);
  }
  return total;
}

size_t KvCache::ring_bytes() const {
  size_t total = 0;
  for (const LayerCache& l : layers_) {
    if (l.is_ring()) total += l.bytes();
  }
  return total;
}

}  // namespace kakeya
