#include "cache/kv_cache.h"

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "base/error.h"

namespace kakeya {
namespace {

// Codes old positions: a full-attention layer whose types are both the codec's.
bool CodesOldPositions(const LayerCacheShape& s) { return s.window == 0 && IsCodec(s.k_type) && IsCodec(s.v_type); }
// The type of the ring's rows: a codec type's exact rows are F32 (a ring
// layer with the codec's types too: its window bounds it, coding it would
// not save its bytes).
KvType ExactRowType(KvType t) { return IsCodec(t) ? KvType::kF32 : t; }
// Slots of the coded planes: whole blocks (kv_codec.h).
int CodedSlots(int n_ctx) { return (n_ctx + kCodedBlock - 1) / kCodedBlock * kCodedBlock; }

}  // namespace

void LayerCache::Free::operator()(uint8_t*) const { std::free(block); }

// Zeroed by calloc, which takes large blocks straight from the kernel as
// zero pages and so writes nothing: a 1M-token context's cache was a memset of
// gigabytes (19 s) before the first token; now each page is touched when the
// position that lives there is first written.
LayerCache::Buffer LayerCache::Allocate(size_t bytes) {
  constexpr size_t kAlign = 64;
  void* block = std::calloc(bytes + kAlign, 1);
  if (block == nullptr) Fail("out of memory allocating a KV cache of ", bytes, " bytes");
  const auto at = (reinterpret_cast<uintptr_t>(block) + kAlign - 1) / kAlign * kAlign;
  return Buffer(reinterpret_cast<uint8_t*>(at), Free{block});
}

LayerCache::Plane LayerCache::MakePlane(KvType type, int dim, int slots) const {
  Plane p{type, KvHeadBytes(type, dim), slots, nullptr};
  p.data = Allocate(size_t(shape_.n_head_kv) * slots * p.head_bytes);
  return p;
}

LayerCache::LayerCache(const LayerCacheShape& shape, int capacity, int n_ctx)
    : shape_(shape), capacity_(capacity), positions_(shape.window > 0 ? 0 : n_ctx) {
  k_ = MakePlane(ExactRowType(shape.k_type), shape.head_dim, capacity);
  v_ = MakePlane(ExactRowType(shape.v_type), shape.value_dim, capacity);
  if (!CodesOldPositions(shape) || shape.n_head_kv == 0) return;
  split_ = {kCodecSink, kCodecExact};
  coded_end_ = split_.sink;
  positions_ = CodedSlots(n_ctx);
  coded_k_ = MakePlane(shape.k_type, shape.head_dim, positions_);
  coded_v_ = MakePlane(shape.v_type, shape.value_dim, positions_);
  sink_k_ = MakePlane(KvType::kF32, shape.head_dim, split_.sink);
  sink_v_ = MakePlane(KvType::kF32, shape.value_dim, split_.sink);
}

void LayerCache::Write(int pos, const float* k, const float* v) {
  for (int h = 0; h < shape_.n_head_kv; ++h) {
    const float* kh = k + size_t(h) * shape_.head_dim;
    const float* vh = v + size_t(h) * shape_.value_dim;
    EncodeKvHead(k_.type, kh, shape_.head_dim, k_.at(Slot(pos), h));
    EncodeKvHead(v_.type, vh, shape_.value_dim, v_.at(Slot(pos), h));
    if (is_coded() && pos < split_.sink) {
      std::memcpy(sink_k_.at(pos, h), kh, sizeof(float) * shape_.head_dim);
      std::memcpy(sink_v_.at(pos, h), vh, sizeof(float) * shape_.value_dim);
    }
  }
}

void LayerCache::CodeUpTo(int end) {
  if (!is_coded()) return;
  for (; coded_end_ < end; ++coded_end_) {
    const int pos = coded_end_;
    const int block = pos / kCodedBlock * kCodedBlock;
    for (int h = 0; h < shape_.n_head_kv; ++h) {
      CodecEncode(reinterpret_cast<const float*>(k_.at(Slot(pos), h)), shape_.head_dim, CodecBits(coded_k_.type),
                  CodecSide::kKeys, coded_k_.at(block, h), pos - block);
      CodecEncode(reinterpret_cast<const float*>(v_.at(Slot(pos), h)), shape_.value_dim, CodecBits(coded_v_.type),
                  CodecSide::kValues, coded_v_.at(block, h), pos - block);
    }
  }
}

KvView LayerCache::view() const {
  KvView kv{};
  kv.k = k_.rows();
  kv.v = v_.rows();
  kv.capacity = capacity_;
  if (!is_coded()) return kv;
  kv.split = split_;
  kv.coded_through = coded_end_;
  kv.coded_k = coded_k_.rows();
  kv.coded_v = coded_v_.rows();
  kv.sink_k = sink_k_.rows();
  kv.sink_v = sink_v_.rows();
  return kv;
}

size_t LayerCache::bytes_per_position() const {
  if (is_ring()) return 0;
  const Plane& k = is_coded() ? coded_k_ : k_;
  const Plane& v = is_coded() ? coded_v_ : v_;
  return size_t(shape_.n_head_kv) * (k.head_bytes + v.head_bytes);
}

size_t LayerCache::fixed_bytes() const {
  const size_t row = size_t(shape_.n_head_kv) * (k_.head_bytes + v_.head_bytes);
  if (is_coded()) return size_t(capacity_ + split_.sink) * row;
  return is_ring() ? size_t(capacity_) * row : 0;
}

int LayerCapacity(const LayerCacheShape& s, int n_ctx, int max_pending) {
  return s.window > 0             ? std::min(n_ctx, s.window + max_pending)
         : CodesOldPositions(s) ? std::min(n_ctx, kCodecExact + kCodedBlock + max_pending)
                                : n_ctx;
}

size_t KvCacheBytes(const std::vector<LayerCacheShape>& layers, int n_ctx, int max_pending) {
  size_t total = 0;
  for (const LayerCacheShape& s : layers) {
    const size_t ring = size_t(LayerCapacity(s, n_ctx, max_pending)) * s.n_head_kv;
    total += ring * (KvHeadBytes(ExactRowType(s.k_type), s.head_dim) + KvHeadBytes(ExactRowType(s.v_type), s.value_dim));
    if (CodesOldPositions(s)) {  // coded rows, sink rows
      total += size_t(CodedSlots(n_ctx)) * s.n_head_kv * (KvHeadBytes(s.k_type, s.head_dim) + KvHeadBytes(s.v_type, s.value_dim));
      total += size_t(kCodecSink) * s.n_head_kv * sizeof(float) * (s.head_dim + s.value_dim);
    }
  }
  return total;
}

KvCache::KvCache(const std::vector<LayerCacheShape>& layers, int n_ctx, int max_pending,
                 const std::vector<CompressedLayerShape>& compressed,
                 const std::vector<RecurrentLayerShape>& recurrent, int max_rollback)
    : n_ctx_(n_ctx), max_pending_(max_pending) {
  layers_.reserve(layers.size());
  for (const LayerCacheShape& s : layers) layers_.emplace_back(s, LayerCapacity(s, n_ctx, max_pending), n_ctx);
  if (!compressed.empty()) compressed_ = std::make_unique<CompressedKv>(compressed, n_ctx, max_pending);
  if (!recurrent.empty()) recurrent_ = std::make_unique<RecurrentState>(recurrent, max_rollback);
}

void KvCache::Append(int n) {
  if (!CanAppend(n)) {
    Fail("KV cache cannot take ", n, " more rows (", n_past_, " of ", n_ctx_, " positions used, ",
         max_pending_, " rows per append)");
  }
  // The forward that wrote these rows planned the same (recurrent_state.h).
  if (recurrent_) recurrent_->Advance(recurrent_->Plan(n_past_, n, n_committed_));
  n_past_ += n;
  n_committed_ = std::max(n_committed_, n_past_ - max_pending_);
}

void KvCache::Trim(int n) {
  if (n < 0 || n > n_pending()) {
    Fail("cannot trim ", n, " rows: only ", n_pending(), " rows are pending");
  }
  if (recurrent_ && n_past_ - n < recurrent_->base_pos()) {
    Fail("cannot trim ", n, " rows: the recurrent state rolls back to position ", recurrent_->base_pos(),
         " at most (it keeps what rolling back ", recurrent_->max_rollback(), " rows needs)");
  }
  n_past_ -= n;
  for (LayerCache& l : layers_) l.Forget(n_past_);
}

void KvCache::Clear() {
  n_past_ = n_committed_ = 0;
  for (LayerCache& l : layers_) l.Forget(0);
  if (recurrent_) recurrent_->Clear();
}

size_t KvCache::bytes() const {
  size_t total = compressed_ ? compressed_->bytes() : 0;
  if (recurrent_) total += recurrent_->bytes();
  for (const LayerCache& l : layers_) total += l.bytes();
  return total;
}

size_t KvCache::full_bytes_per_token() const {
  size_t total = compressed_ ? compressed_->bytes_per_position() : 0;
  for (const LayerCache& l : layers_) total += l.bytes_per_position();
  return total;
}

size_t KvCache::ring_bytes() const {
  size_t total = compressed_ ? compressed_->bytes() - compressed_->bytes_per_position() * size_t(n_ctx_) : 0;
  if (recurrent_) total += recurrent_->bytes();
  for (const LayerCache& l : layers_) total += l.fixed_bytes();
  return total;
}

}  // namespace kakeya
