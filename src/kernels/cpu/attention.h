// Attention of a batch of rows over one layer's KV cache, in every cache
// type (kv_types.h), with a fixed reduction order per row.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/cpu/kv_codec.h"
#include "kernels/cpu/kv_types.h"

namespace kakeya {

// The first position a query at `pos` attends to with a sliding window of
// `window` positions (0: every earlier position). One definition for both
// sides of the ring's soundness: attention (AttendKvHead) reads exactly these
// positions, and the cache (cache/kv_cache.h) keeps them.
inline int FirstVisiblePosition(int pos, int window) { return window > 0 && pos >= window ? pos - window + 1 : 0; }

// Attention of rows of one sequence for the query heads of one KV head.
// Row r is the token at position first_pos + r; it sees the keys of positions
// [FirstVisiblePosition(first_pos + r, window), first_pos + r] (above; the
// cache's rule for what a ring keeps too), read from the cache as KvView
// says. Keys are visited in position order, so a ring and a full cache give
// the same bits, and a row's result does not depend on the other rows of the
// call.
// Query head h reads KV head h / (n_head / n_head_kv); row r's queries are
// F32 [n_head, head_dim] at q + r * q_stride, and the call writes heads
// kv_head * group .. + group - 1 of its outputs, F32 [n_head, value_dim] at
// out + r * out_stride. scratch: AttendScratchFloats(s, n_rows, keys of the
// last row) floats.
struct AttentionShape {
  int n_head;
  int n_head_kv;
  int head_dim;
  int value_dim;
  float scale;    // multiplies q.k
  float softcap;  // > 0: scores become softcap * tanh(score / softcap) (gemma2)
};
struct AttentionRows {
  int n_rows;
  int first_pos;
  int window;  // 0: every earlier position
  const float* q;
  int64_t q_stride;
  float* out;
  int64_t out_stride;
  // >= 0: every row sees the keys up to this position instead of up to its
  // own (a block drafter's non-causal block); the scratch is sized by it.
  int block_end = -1;
};
// The codec's split of a row's keys and values (ADR 0013): a query at `pos`
// reads the positions [sink, CodedEnd(pos)) coded and every other one exact,
// so that at least `exact` of the latest positions are exact. CodedEnd is a
// multiple of kCodedBlock, as are the 16-position blocks attention reads (of
// a full-attention layer, the codec's only kind), so that a block is coded or
// exact as a whole for a row. One definition for the cache, which codes the
// positions before attention reads them (LayerCache::CodeUpTo), and for
// attention.
struct CodecSplit {
  int sink = 0;
  int exact = 0;  // 0: no codec
};
inline int CodedEnd(int pos, const CodecSplit& c) {
  const int span = pos + 1 - c.exact - c.sink;
  return c.exact == 0 || span <= 0 ? c.sink : c.sink + span / kCodedBlock * kCodedBlock;
}

// One kind of row of one side (keys or values) of a layer's cache: the head
// vector of KV head h at slot i is at data + i * pos_stride + h * head_stride,
// stored as `type`.
struct KvRows {
  const uint8_t* data = nullptr;
  int64_t pos_stride = 0;
  int64_t head_stride = 0;
  KvType type = KvType::kF32;
  const uint8_t* at(int slot, int head) const { return data + slot * pos_stride + head * head_stride; }
};

// Where attention finds one layer's keys and values (LayerCache::view()).
// Position p is slot p % capacity of k and of v. With the codec
// (split.exact > 0) those are the exact F32 rows of the latest positions,
// sink_k / sink_v hold the F32 rows of the positions below split.sink (slot
// p), and coded_k / coded_v the coded rows (slot p), written for every
// position below coded_through (a reader that is not the target's forward,
// such as Gemma 4's assistant, may come before the cache coded a block; it
// reads it exact).
struct KvView {
  KvRows k, v;
  int capacity;
  CodecSplit split = {};
  int coded_through = 0;
  KvRows coded_k, coded_v, sink_k, sink_v;
};
// A view of F32 rows with every head of a position together (k: F32
// [capacity, k_stride], head h at h * head_dim; v likewise): the drafters'
// own caches and the tests.
KvView F32KvView(const float* k, int64_t k_stride, int head_dim, const float* v, int64_t v_stride, int value_dim,
                 int capacity);

size_t AttendScratchFloats(const AttentionShape& s, int n_rows, int max_keys);
void AttendKvHead(const AttentionShape& s, int kv_head, const AttentionRows& rows, const KvView& kv,
                  float* scratch);


}  // namespace kakeya
