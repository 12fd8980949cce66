// The key/value cache of one sequence: one LayerCache per layer, of three
// kinds behind one interface (docs/design.md, invariant 3):
//
//  * full: every position has its own row; trimming moves a length.
//  * ring: a sliding-window layer keeps only the last `window` positions a
//    query can see, in a ring of capacity window + max_pending rows. Position p
//    lives in slot p % capacity. Up to max_pending rows past the committed
//    length can be appended and then dropped again at any time, wrapped or not:
//    appending them overwrites only positions < committed - window + 1, which
//    no query at or after the committed length can see.
//  * coded (ADR 0013): a full-attention layer whose cache types are the
//    codec's keeps the first kCodecSink positions and the latest ones exact
//    (F32, a ring of kCodecExact + kCodedBlock + max_pending rows) and codes
//    every other position once, in blocks of 16, before attention first reads
//    it coded (CodeUpTo; the split is CodedEnd, kernels/cpu/attention.h). A
//    query reads at least kCodecExact of the latest positions exact, which is
//    more than any verify block, so a position is coded only once it is
//    committed and never has to be uncoded; Trim forgets coded rows past the
//    new length all the same, in O(1).
//
// Rows are stored in the layer's key and value types (kv_types.h: f32 by
// default; -ctk / -ctv). Rows are appended as pending; Commit() makes them
// permanent, Trim(n) drops the last n pending rows in O(1). Only the last
// max_pending rows can stay pending: appending past that commits the oldest
// ones, so a trim that would be unsound fails loudly instead. Storage is
// allocated once, at construction.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "cache/compressed_kv.h"
#include "cache/recurrent_state.h"
#include "kernels/cpu/attention.h"
#include "kernels/cpu/kv_types.h"

namespace kakeya {

// The codec's exact positions: the first kCodecSink (attention sinks, which
// take a large share of many heads' weight whatever the distance) and the
// latest kCodecExact, at least. kCodecExact must exceed the largest verify
// block (engine/limits.h checks), and a quarter of a 1k context keeps the
// recent tokens, which carry most of the weight, exact.
inline constexpr int kCodecSink = kCodedBlock;
inline constexpr int kCodecExact = 256;

struct LayerCacheShape {
  int window = 0;     // 0: full attention; > 0: a query at i sees keys j with i - window < j <= i
  int n_head_kv = 0;  // 0: the layer keeps no cache (it reads another layer's)
  int head_dim = 0;   // values per key head
  int value_dim = 0;  // values per value head
  KvType k_type = KvType::kF32;
  KvType v_type = KvType::kF32;
};

class LayerCache {
 public:
  // capacity: rows of the ring (a full or coded layer's exact rows included);
  // n_ctx: positions a coded layer codes at most.
  LayerCache(const LayerCacheShape& shape, int capacity, int n_ctx);

  bool is_ring() const { return shape_.window > 0; }
  // Codes old positions: a full-attention layer whose types are the codec's.
  bool is_coded() const { return split_.exact > 0; }
  const CodecSplit& split() const { return split_; }
  int capacity() const { return capacity_; }
  int window() const { return shape_.window; }
  int k_width() const { return shape_.n_head_kv * shape_.head_dim; }
  int v_width() const { return shape_.n_head_kv * shape_.value_dim; }

  // The keys a query at `pos` attends to: positions [first, pos].
  int FirstVisible(int pos) const { return FirstVisiblePosition(pos, shape_.window); }
  int Slot(int pos) const { return pos % capacity_; }

  // Stores position pos's keys and values (F32 [n_head_kv, head_dim] and
  // [n_head_kv, value_dim]) in the layer's types.
  void Write(int pos, const float* k, const float* v);

  // A coded layer: codes every position below `end` that is not coded yet,
  // from its exact row (which the ring must still hold). Others: nothing.
  void CodeUpTo(int end);
  // Positions from n on are no longer written (a trim, a clear): their
  // coded rows are forgotten.
  void Forget(int n) { coded_end_ = std::min(coded_end_, std::max(n, split_.sink)); }

  KvView view() const;
  // Memory: all of it; what each position of context adds (a full layer's
  // rows, a coded layer's coded rows; 0 for a ring); the rest (a ring, a
  // coded layer's exact rows).
  size_t bytes() const { return fixed_bytes() + bytes_per_position() * positions_; }
  size_t bytes_per_position() const;
  size_t fixed_bytes() const;

 private:
  struct Free {
    void* block;  // what calloc returned; the buffer starts at its first 64-byte boundary
    void operator()(uint8_t* p) const;
  };
  using Buffer = std::unique_ptr<uint8_t, Free>;
  static Buffer Allocate(size_t bytes);

  // Head-major planes: each KV head's vectors of consecutive slots lie
  // together, so that attention, which works one KV head at a time, streams
  // them in order (with a position's heads together a head's vectors were
  // 2 KiB apart, and decoding 32k positions waited on the memory).
  struct Plane {
    KvType type = KvType::kF32;
    int64_t head_bytes = 0;  // one head vector
    int slots = 0;
    Buffer data;             // [n_head_kv, slots, head_bytes]
    uint8_t* at(int slot, int head) const { return data.get() + (size_t(head) * slots + slot) * head_bytes; }
    KvRows rows() const { return {data.get(), head_bytes, slots * head_bytes, type}; }
  };
  Plane MakePlane(KvType type, int dim, int slots) const;

  LayerCacheShape shape_;
  int capacity_;
  int positions_;  // a full layer's positions (the context); a coded layer's coded slots (whole blocks)
  CodecSplit split_;
  Plane k_, v_;  // position p at slot p % capacity (the exact rows, F32, of a coded layer)
  // A coded layer's coded rows (slot p) and the F32 rows of its sink positions.
  Plane coded_k_, coded_v_, sink_k_, sink_v_;
  int coded_end_ = 0;  // positions below it are coded (at least split_.sink)
};

// Rows of the exact ring a layer of this shape keeps (KvCache's rule below).
int LayerCapacity(const LayerCacheShape& shape, int n_ctx, int max_pending);
// Bytes a KvCache of these layers allocates, known before allocating it.
size_t KvCacheBytes(const std::vector<LayerCacheShape>& layers, int n_ctx, int max_pending);

class KvCache {
 public:
  // n_ctx: positions the sequence may reach; max_pending: rows that may be
  // appended past the committed length before Commit() or Trim() (the
  // largest forward batch or verify block). Ring layers get capacity
  // min(n_ctx, window + max_pending), coded layers min(n_ctx, kCodecExact +
  // kCodedBlock + max_pending) exact rows.
  // `compressed`: deepseek4's layers (compressed_kv.h), whose state is
  // keyed by position as well, so that Trim and Commit need nothing of it.
  // `recurrent`: qwen35's Gated DeltaNet layers (recurrent_state.h), whose
  // state rolls back by up to max_rollback rows; a trim past that fails.
  KvCache(const std::vector<LayerCacheShape>& layers, int n_ctx, int max_pending,
          const std::vector<CompressedLayerShape>& compressed = {},
          const std::vector<RecurrentLayerShape>& recurrent = {}, int max_rollback = 0);

  LayerCache& layer(int il) { return layers_[il]; }
  // Null unless the model's attention is deepseek4's.
  const CompressedKv* compressed() const { return compressed_.get(); }
  CompressedKv* compressed() { return compressed_.get(); }
  // Null unless the model has recurrent layers.
  const RecurrentState* recurrent() const { return recurrent_.get(); }
  RecurrentState* recurrent() { return recurrent_.get(); }
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
  // Drops the last n pending rows. Requires 0 <= n <= n_pending(), and with
  // recurrent layers at most their max_rollback rows since the last commit.
  void Trim(int n);
  void Clear();

  // Memory: bytes of all layers; what each position of context adds (full
  // layers' rows, coded layers' coded rows); and the rest, whatever the
  // context length (ring layers, coded layers' exact rows).
  size_t bytes() const;
  size_t full_bytes_per_token() const;
  size_t ring_bytes() const;

 private:
  std::vector<LayerCache> layers_;
  std::unique_ptr<CompressedKv> compressed_;
  std::unique_ptr<RecurrentState> recurrent_;
  int n_ctx_;
  int max_pending_;
  int n_past_ = 0;
  int n_committed_ = 0;
};

}  // namespace kakeya
