// The key/value cache of one sequence: one LayerCache per layer, of two kinds
// behind one interface (docs/design.md, invariant 3):
//
//  * full: every position has its own row; trimming moves a length.
//  * ring: a sliding-window layer keeps only the last `window` positions a
//    query can see, in a ring of capacity window + max_pending rows. Position p
//    lives in slot p % capacity. Up to max_pending rows past the committed
//    length can be appended and then dropped again at any time, wrapped or not:
//    appending them overwrites only positions < committed - window + 1, which
//    no query at or after the committed length can see.
//
// Rows are appended as pending; Commit() makes them permanent, Trim(n) drops
// the last n pending rows in O(1). Only the last max_pending rows can stay
// pending: appending past that commits the oldest ones, so a trim that would
// be unsound fails loudly instead. Storage is allocated once, at construction.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "kernels/cpu/ops.h"

namespace kakeya {

struct LayerCacheShape {
  int window = 0;   // 0: full attention; > 0: a query at i sees keys j with i - window < j <= i
  int k_width = 0;  // floats per key row (n_head_kv * head_dim)
  int v_width = 0;  // floats per value row (n_head_kv * value_dim)
};

class LayerCache {
 public:
  LayerCache(const LayerCacheShape& shape, int capacity);

  bool is_ring() const { return shape_.window > 0; }
  int capacity() const { return capacity_; }
  int window() const { return shape_.window; }
  int k_width() const { return shape_.k_width; }
  int v_width() const { return shape_.v_width; }

  // The keys a query at `pos` attends to: positions [first, pos].
  int FirstVisible(int pos) const { return FirstVisiblePosition(pos, shape_.window); }
  int Slot(int pos) const { return is_ring() ? pos % capacity_ : pos; }
  float* key(int pos) { return k_.get() + static_cast<size_t>(Slot(pos)) * shape_.k_width; }
  float* value(int pos) { return v_.get() + static_cast<size_t>(Slot(pos)) * shape_.v_width; }
  const float* keys() const { return k_.get(); }    // F32 [capacity, k_width]
  const float* values() const { return v_.get(); }  // F32 [capacity, v_width]

  size_t bytes() const { return static_cast<size_t>(capacity_) * (shape_.k_width + shape_.v_width) * sizeof(float); }

 private:
  struct Free {
    void operator()(float* p) const;
  };
  LayerCacheShape shape_;
  int capacity_;
  std::unique_ptr<float, Free> k_;
  std::unique_ptr<float, Free> v_;
};

class KvCache {
 public:
  // n_ctx: positions the sequence may reach; max_pending: rows that may be
  // appended past the committed length before Commit() or Trim() (the
  // largest forward batch or verify block). Ring layers get capacity
  // min(n_ctx, window + max_pending).
  KvCache(const std::vector<LayerCacheShape>& layers, int n_ctx, int max_pending);

  LayerCache& layer(int il) { return layers_[il]; }
  const LayerCache& layer(int il) const { return layers_[il]; }
  int n_layer() const { return static_cast<int>(layers_.size()); }

  int n_ctx() const { return n_ctx_; }
  int max_pending() const { return max_pending_; }
  int n_past() const { return n_past_; }            // positions written, pending included
  int n_committed() const { return n_committed_; }  // positions that can no longer be trimmed
  int n_pending() const { return n_past_ - n_committed_; }

  // Room for n more rows: at most n_ctx positions, at most max_pending at once.
  bool CanAppend(int n) const { return n >= 0 && n <= max_pending_ && n_past_ + n <= n_ctx_; }
  // Marks positions [n_past, n_past + n) as written (pending), committing the
  // oldest pending rows beyond max_pending. Requires CanAppend(n).
  void Append(int n);
  void Commit() { n_committed_ = n_past_; }
  // Drops the last n pending rows. Requires 0 <= n <= n_pending().
  void Trim(int n);
  void Clear() { n_past_ = n_committed_ = 0; }

  // Memory: bytes of all layers, and per token of context for full layers
  // (ring layers are bounded by their capacity whatever the context length).
  size_t bytes() const;
  size_t full_bytes_per_token() const;
  size_t ring_bytes() const;

 private:
  std::vector<LayerCache> layers_;
  int n_ctx_;
  int max_pending_;
  int n_past_ = 0;
  int n_committed_ = 0;
};

}  // namespace kakeya
