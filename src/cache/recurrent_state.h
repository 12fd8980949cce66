// The per-sequence state of Qwen3.5's Gated DeltaNet layers (ADR 0017,
// docs/formats/qwen35.md 4): each layer's delta-rule state (a [head_k_dim,
// head_v_dim] matrix per value head) and the inputs of its causal
// convolution.
//
// The convolution's inputs are keyed by position, in a ring with room for
// the kernel's reach plus the rows a trim may drop, so rolling them back
// costs nothing (the ring layers' rule, kv_cache.h). The delta state is not:
// every row rewrites all of it. It rolls back by replay instead of by
// snapshots: the state is kept twice, at a `base` position no trim can go
// below and at the `head` (the end of the last forward), together with each
// row's small inputs of the rule (key, value, decay, beta) since the base.
// A forward that starts where the last one ended continues from the head;
// one that starts after a trim continues from the base and first replays
// the kept rows, each exactly as it ran the first time, so the state is the
// one plain decoding leaves, bit for bit. A trim itself is O(1); a replay
// costs the rule's arithmetic of the replayed rows on a state that stays in
// the core's cache, never a copy of the state per draft row.
#pragma once

#include <cstddef>
#include <memory>
#include <vector>

#include "base/huge_pages.h"  // FreeDeleter

namespace kakeya {

// The most rows a recurrent state can roll back: a verify block's
// (engine/limits.h checks that its largest fits).
inline constexpr int kMaxRecurrentRollback = 64;

struct RecurrentLayerShape {
  int conv_channels = 0;  // 0: the layer is not recurrent
  int conv_kernel = 0;
  int n_k_heads = 0, n_v_heads = 0;
  int head_k_dim = 0, head_v_dim = 0;
  int state_floats() const { return n_v_heads * head_k_dim * head_v_dim; }
  // One row's inputs of the rule: keys [n_k_heads, head_k_dim], values
  // [n_v_heads, head_v_dim], then the decay factor e^g and beta of each value head.
  int step_floats() const { return n_k_heads * head_k_dim + n_v_heads * head_v_dim + 2 * n_v_heads; }
};

// What one forward over positions [first, first + rows) does with the state,
// the same for every layer (RecurrentState::Plan).
struct RecurrentPlan {
  int first = 0, rows = 0;
  bool from_head = false;  // the state at `first` is the head; else the base, replayed from base_pos
  int base_pos = 0;        // where the base is before the forward
  int new_base = 0;        // where it is after: the state there is written to the base buffer,
  bool swap = false;       // ... or, when the head is that state, the head buffer becomes the base
  int base_buffer = 0;     // the buffer of the base before the forward
  int head_buffer = 0;     // the buffer the forward writes the state at its end to
};

class RecurrentState {
 public:
  // max_rollback: rows a trim may drop at most (after a forward, or after
  // several without a commit between them).
  RecurrentState(const std::vector<RecurrentLayerShape>& layers, int max_rollback);

  const RecurrentLayerShape& shape(int il) const { return layers_[il].shape; }
  int max_rollback() const { return max_rollback_; }
  // The lowest position a trim may go back to.
  int base_pos() const { return base_pos_; }
  // Where the last forward ended (-1: none since a clear), and the state it
  // left there (F32 [n_v_heads, head_k_dim, head_v_dim]).
  int head_pos() const { return head_pos_; }
  const float* head_state(int il) const { return layers_[il].state[1 - base_buffer_]; }

  // The plan of a forward at positions [first, first + rows), with positions
  // below `committed` never trimmed again. Pure: Advance applies it.
  RecurrentPlan Plan(int first, int rows, int committed) const;
  void Advance(const RecurrentPlan& plan);
  // Back to position 0: a zero state.
  void Clear();

  // F32 [n_v_heads, head_k_dim, head_v_dim]: the state in buffer b (0 or 1).
  float* state(int il, int b) const { return layers_[il].state[b]; }
  // F32 [conv_channels]: the convolution's input at `pos`.
  float* conv_input(int il, int pos) const {
    const Layer& L = layers_[il];
    return L.conv + size_t(pos % L.conv_slots) * L.shape.conv_channels;
  }
  int conv_slots(int il) const { return layers_[il].conv_slots; }
  // F32 [step_floats]: the rule's inputs of `pos`, kept from the base on.
  float* step_inputs(int il, int pos) const {
    const Layer& L = layers_[il];
    return L.steps + size_t(pos % step_slots_) * L.shape.step_floats();
  }

  size_t bytes() const { return bytes_; }

 private:
  struct Layer {
    RecurrentLayerShape shape;
    float* state[2] = {nullptr, nullptr};
    float* conv = nullptr;
    int conv_slots = 0;
    float* steps = nullptr;
  };
  std::vector<Layer> layers_;
  int max_rollback_;
  int step_slots_;
  int base_pos_ = 0;
  int base_buffer_ = 0;
  int head_pos_ = -1;  // -1: no head (after a clear, or a trim below it)
  size_t bytes_ = 0;
  std::unique_ptr<float, FreeDeleter> storage_;
};

// Bytes a RecurrentState of these layers allocates, known before allocating it.
size_t RecurrentStateBytes(const std::vector<RecurrentLayerShape>& layers, int max_rollback);

}  // namespace kakeya
