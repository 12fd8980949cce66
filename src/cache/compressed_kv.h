// DeepSeek-V4's per-sequence attention state (docs/formats/deepseek4.md 4,
// ADR 0015): for each layer, the roped keys of a raw window, and for its
// compressed layers the projected inputs of the latest positions (what the
// next block is made of) and the compressed blocks made so far, for the
// attention and for the lightning indexer.
//
// Everything is keyed by position, never by a running state: the raw keys
// and the inputs live in rings with room for the positions a block or a
// query still reads plus max_pending more, and block b sits at row b. A
// rollback (KvCache::Trim) therefore costs nothing here: the positions after
// the new length are rewritten before anything reads them (a block is made
// when its last position is written, and a query at p reads only blocks that
// end at or before p), and what the rewritten rows read was committed
// already and is still in its ring (the ring layers' rule, kv_cache.h).
// All rows are F32, allocated once.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "base/huge_pages.h"  // FreeDeleter

namespace kakeya {

struct CompressedLayerShape {
  int window = 0;      // raw keys a query sees: positions p - window < j <= p
  int key_dim = 0;     // values of a key (raw and compressed)
  int ratio = 0;       // 0: raw window only; 4 or 128: positions per block
  int input_span = 0;  // positions a block is made of (8 for ratio 4, which overlaps)
  int input_width = 0;  // per position: the projected inputs (kv, then gate scores), each this wide
  int index_dim = 0;    // ratio 4: the indexer's key length (its inputs are 2 * index_dim wide)
};

class CompressedKv {
 public:
  CompressedKv(const std::vector<CompressedLayerShape>& layers, int n_ctx, int max_pending);

  const CompressedLayerShape& shape(int il) const { return layers_[il].shape; }
  // F32 [key_dim]: the raw key of `pos`.
  float* raw_key(int il, int pos) const { return Row(layers_[il].raw, pos); }
  // F32 [2 * input_width]: the kv projection of `pos`, then its gate scores.
  float* inputs(int il, int pos) const { return Row(layers_[il].inputs, pos); }
  // F32 [key_dim]: block b (positions b * ratio .. (b + 1) * ratio - 1).
  float* block(int il, int b) const { return Row(layers_[il].blocks, b); }
  // The indexer's: F32 [4 * index_dim] inputs, F32 [index_dim] blocks.
  float* index_inputs(int il, int pos) const { return Row(layers_[il].index_inputs, pos); }
  float* index_block(int il, int b) const { return Row(layers_[il].index_blocks, b); }
  // Blocks 0, 1, ... as consecutive rows: a block row for every block of the context.
  const float* index_blocks(int il) const { return layers_[il].index_blocks.data; }

  size_t bytes() const { return bytes_; }
  // What each position of context adds: the blocks' rows (a block row per
  // `ratio` positions), rounded; the rest (rings) does not grow.
  size_t bytes_per_position() const { return bytes_per_position_; }
  // Benchmarks only (Context::FillCacheForBenchmark): every row of every
  // part random (unit Gaussian), as if a long prefill had written them.
  void FillRandom(uint64_t seed);

 private:
  struct Rows {
    float* data = nullptr;
    int slots = 0;  // row p at p % slots
    int width = 0;
  };
  struct Layer {
    CompressedLayerShape shape;
    Rows raw, inputs, blocks, index_inputs, index_blocks;
  };
  static float* Row(const Rows& r, int i) { return r.data + size_t(i % r.slots) * r.width; }

  std::vector<Layer> layers_;
  size_t bytes_ = 0;
  size_t bytes_per_position_ = 0;
  std::unique_ptr<float, FreeDeleter> storage_;  // calloc: pages are committed as they are written
};

// Bytes a CompressedKv of these layers allocates, known before allocating it.
size_t CompressedKvBytes(const std::vector<CompressedLayerShape>& layers, int n_ctx, int max_pending);

}  // namespace kakeya
