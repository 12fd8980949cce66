#include "cache/kv_cache.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "base/error.h"

namespace kakeya {

void LayerCache::Free::operator()(uint8_t* p) const { std::free(p); }

LayerCache::Buffer LayerCache::Allocate(size_t bytes) {
  const size_t rounded = std::max<size_t>((bytes + 63) / 64 * 64, 64);
  auto* p = static_cast<uint8_t*>(std::aligned_alloc(64, rounded));
  if (p == nullptr) Fail("out of memory allocating a KV cache of ", bytes, " bytes");
  std::memset(p, 0, rounded);
  return Buffer(p);
}

LayerCache::LayerCache(const LayerCacheShape& shape, int capacity, int n_ctx)
    : shape_(shape), capacity_(capacity), positions_(shape.window > 0 ? 0 : n_ctx) {
  const int n_head = shape.n_head_kv;
  const bool coded = shape.window == 0 && IsCodec(shape.k_type) && IsCodec(shape.v_type) && n_head > 0;
  // A coded layer keeps its exact rows in F32; a ring layer with the codec's
  // types too (the window bounds it: coding it would not save its bytes).
  k_row_type_ = IsCodec(shape.k_type) ? KvType::kF32 : shape.k_type;
  v_row_type_ = IsCodec(shape.v_type) ? KvType::kF32 : shape.v_type;
  k_row_bytes_ = n_head * KvHeadBytes(k_row_type_, shape.head_dim);
  v_row_bytes_ = n_head * KvHeadBytes(v_row_type_, shape.value_dim);
  k_ = Allocate(size_t(capacity) * k_row_bytes_);
  v_ = Allocate(size_t(capacity) * v_row_bytes_);
  if (!coded) return;
  split_ = {kCodecSink, kCodecExact};
  coded_end_ = split_.sink;
  coded_k_row_bytes_ = n_head * KvHeadBytes(shape.k_type, shape.head_dim);
  coded_v_row_bytes_ = n_head * KvHeadBytes(shape.v_type, shape.value_dim);
  coded_k_ = Allocate(size_t(n_ctx) * coded_k_row_bytes_);
  coded_v_ = Allocate(size_t(n_ctx) * coded_v_row_bytes_);
  sink_k_ = Allocate(size_t(split_.sink) * k_row_bytes_);
  sink_v_ = Allocate(size_t(split_.sink) * v_row_bytes_);
}

void LayerCache::Write(int pos, const float* k, const float* v) {
  uint8_t* k_row = k_.get() + size_t(Slot(pos)) * k_row_bytes_;
  uint8_t* v_row = v_.get() + size_t(Slot(pos)) * v_row_bytes_;
  const int64_t k_head = k_row_bytes_ / shape_.n_head_kv, v_head = v_row_bytes_ / shape_.n_head_kv;
  for (int h = 0; h < shape_.n_head_kv; ++h) {
    EncodeKvHead(k_row_type_, k + size_t(h) * shape_.head_dim, shape_.head_dim, k_row + h * k_head);
    EncodeKvHead(v_row_type_, v + size_t(h) * shape_.value_dim, shape_.value_dim, v_row + h * v_head);
  }
  if (is_coded() && pos < split_.sink) {
    std::memcpy(sink_k_.get() + size_t(pos) * k_row_bytes_, k_row, k_row_bytes_);
    std::memcpy(sink_v_.get() + size_t(pos) * v_row_bytes_, v_row, v_row_bytes_);
  }
}

void LayerCache::CodeUpTo(int end) {
  if (!is_coded()) return;
  const int64_t k_head = coded_k_row_bytes_ / shape_.n_head_kv, v_head = coded_v_row_bytes_ / shape_.n_head_kv;
  for (; coded_end_ < end; ++coded_end_) {
    const int pos = coded_end_;
    const float* k = key(pos);
    const float* v = value(pos);
    uint8_t* ck = coded_k_.get() + size_t(pos) * coded_k_row_bytes_;
    uint8_t* cv = coded_v_.get() + size_t(pos) * coded_v_row_bytes_;
    for (int h = 0; h < shape_.n_head_kv; ++h) {
      EncodeKvHead(shape_.k_type, k + size_t(h) * shape_.head_dim, shape_.head_dim, ck + h * k_head);
      EncodeKvHead(shape_.v_type, v + size_t(h) * shape_.value_dim, shape_.value_dim, cv + h * v_head);
    }
  }
}

KvView LayerCache::view() const {
  KvView kv{k_.get(), k_row_bytes_, k_row_type_, v_.get(), v_row_bytes_, v_row_type_, capacity_};
  if (!is_coded()) return kv;
  kv.split = split_;
  kv.coded_through = coded_end_;
  kv.coded_k = coded_k_.get();
  kv.coded_k_row_bytes = coded_k_row_bytes_;
  kv.coded_k_type = shape_.k_type;
  kv.coded_v = coded_v_.get();
  kv.coded_v_row_bytes = coded_v_row_bytes_;
  kv.coded_v_type = shape_.v_type;
  kv.sink_k = reinterpret_cast<const float*>(sink_k_.get());
  kv.sink_v = reinterpret_cast<const float*>(sink_v_.get());
  return kv;
}

size_t LayerCache::bytes_per_position() const {
  if (is_ring()) return 0;
  return is_coded() ? coded_k_row_bytes_ + coded_v_row_bytes_ : k_row_bytes_ + v_row_bytes_;
}

size_t LayerCache::fixed_bytes() const {
  if (is_coded()) return size_t(capacity_ + split_.sink) * (k_row_bytes_ + v_row_bytes_);
  return is_ring() ? size_t(capacity_) * (k_row_bytes_ + v_row_bytes_) : 0;
}

KvCache::KvCache(const std::vector<LayerCacheShape>& layers, int n_ctx, int max_pending)
    : n_ctx_(n_ctx), max_pending_(max_pending) {
  layers_.reserve(layers.size());
  for (const LayerCacheShape& s : layers) {
    const bool coded = s.window == 0 && IsCodec(s.k_type) && IsCodec(s.v_type);
    const int capacity = s.window > 0 ? std::min(n_ctx, s.window + max_pending)
                         : coded      ? std::min(n_ctx, kCodecExact + kCodedBlock + max_pending)
                                      : n_ctx;
    layers_.emplace_back(s, capacity, n_ctx);
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
  for (LayerCache& l : layers_) l.Forget(n_past_);
}

void KvCache::Clear() {
  n_past_ = n_committed_ = 0;
  for (LayerCache& l : layers_) l.Forget(0);
}

size_t KvCache::bytes() const {
  size_t total = 0;
  for (const LayerCache& l : layers_) total += l.bytes();
  return total;
}

size_t KvCache::full_bytes_per_token() const {
  size_t total = 0;
  for (const LayerCache& l : layers_) total += l.bytes_per_position();
  return total;
}

size_t KvCache::ring_bytes() const {
  size_t total = 0;
  for (const LayerCache& l : layers_) total += l.fixed_bytes();
  return total;
}

}  // namespace kakeya
