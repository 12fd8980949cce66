// The blocks a decoder layer is composed of (attention, dense FFN, mixture of
// experts, norms, residual adds), over the rows of one Context::Forward call.
// The architecture files (model/arch/) compose them in their own order.
//
// Every block works row by row, or splits output columns or (row, head)
// pairs over threads, so a row's bits never depend on the batch it came in
// or on the thread count (docs/design.md, invariant 1). No block allocates: every
// buffer is sized once, for the largest layer, by ForwardBuffers.
#pragma once

#include <memory>
#include <span>
#include <vector>

#include "base/huge_pages.h"
#include "base/thread_pool.h"
#include "cache/kv_cache.h"
#include "model/layer.h"
#include "model/model.h"

namespace kakeya {

// Layer `layer`, row `row` of the next forward takes its router's runner-up
// for its last expert (Context::TakeRunnerUpExpert).
struct RoutingOverride {
  int layer;
  int row;
  bool operator==(const RoutingOverride&) const = default;
};

// 64-byte aligned, zero-initialised storage allocated once.
template <typename T>
class Buffer {
 public:
  Buffer() = default;
  explicit Buffer(size_t n);
  T* get() const { return data_.get(); }

 private:
  std::unique_ptr<T, FreeDeleter> data_;
};

// Rows first_row .. first_row + n_rows - 1 of a forward belong to one
// sequence: they sit at positions first_pos .. first_pos + n_rows - 1 of its
// cache.
struct SequenceSlice {
  KvCache* cache;
  int first_row;
  int n_rows;
  int first_pos;
};

// The scratch of one Workspace, sized at its construction for the largest layer
// of the model and max_rows rows per forward (forward_pass.cc).
struct ForwardBuffers {
  ForwardBuffers(const Model& model, int max_rows, int max_logit_rows, int n_ctx, int n_threads);
  void AllocateHybrid(const Model& model, int n_ctx, int n_threads);  // forward_pass_deepseek4.cc
  void AllocateDeltaNet(const Model& model, int n_threads);            // forward_pass_deltanet.cc

  int max_rows;
  Buffer<TokenId> tokens;                 // [max_rows] the batch's tokens, all sequences
  std::vector<SequenceSlice> slices;      // reserved for kMaxSequences
  static constexpr int kMaxSequences = 256;
  Buffer<float> x, xn, xn2, proj, proj2;  // F32 [max_rows, n_embd]: ForwardPass's row buffers
  Buffer<float> q, k, v, attn;            // F32 [max_rows, widest layer's width]
  Buffer<float> attn_gate;                // F32 [max_rows, 2 * q width] gated attention's query and gate (qwen35)
  Buffer<float> gate, up;                 // F32 [max_rows, widest dense FFN]
  Buffer<float> logits;                   // F32 [max_logit_rows, n_logits]
  size_t attention_floats = 0;            // AttendKvHead scratch per thread
  Buffer<float> scores;                   // F32 [n_threads, attention_floats]
  Buffer<uint8_t> matmul;                 // MatMul scratch (activation rows quantized)
  // RoPE: the distinct rotations of the model's layers, their angles per row.
  std::vector<RopeSpec> ropes;
  std::vector<int> rope_of_layer;  // index into ropes
  int rope_floats = 0;             // per row and rotation: the widest rotation's dims
  Buffer<float> rope;              // F32 [max_rows, ropes.size(), rope_floats]
  // Mixtures of experts; a "pair" is one (row, chosen expert), and max_pairs
  // is max_rows times the most experts a row uses.
  Buffer<float> router_logits;        // F32 [max_rows, n_expert]
  Buffer<int> chosen_expert;          // [max_pairs] row r's k-th expert at r * n_used + k
  Buffer<float> chosen_weight;        // [max_pairs]
  Buffer<int> pair_slot;              // [max_pairs] where (r, k)'s rows sit, grouped by expert
  Buffer<int> expert_rows;            // [2 * (n_expert + 1)] each expert's first slot, next free slot
  Buffer<float> expert_in;            // F32 [max_pairs, n_embd] input rows grouped by expert
  Buffer<float> expert_gate, expert_up;  // F32 [max_pairs, expert n_ff]
  Buffer<float> expert_out;           // F32 [max_pairs, n_embd]
  std::vector<MatMulGroup> groups;    // [2 * n_expert], reserved
  int experts_touched = 0;            // distinct (layer, expert) pairs the last forward ran
  size_t expert_bytes_read = 0;       // and the bytes of their matrices
  // Router near-ties (Context::routing_margin, TakeRunnerUpExpert).
  Buffer<float> routing_margins;      // F32 [n_layer, max_rows]
  std::vector<RoutingOverride> routing_overrides;
  // Gemma 4 per-layer embeddings: each row's inputs of every layer.
  Buffer<float> per_layer_inputs;     // F32 [max_rows, n_layer * n_embd_per_layer]
  Buffer<float> per_layer_token;      // F32 [n_layer * n_embd_per_layer] one token's table row
  // deepseek4 (HParams::n_hyper > 0; forward_pass_deepseek4.cc).
  Buffer<float> streams;          // F32 [max_rows, n_hyper * n_embd] the residual's streams
  Buffer<float> streams_normed;   // the same, RMS-normed: the mixers' input
  Buffer<float> mixes;            // F32 [max_rows, kHyperMixes] pre, post and comb weights of the last mixer
  Buffer<float> low_rank;         // F32 [max_rows, widest q_lora or groups * o_lora]
  Buffer<float> group_in, group_out;  // F32 [max_rows, one output group's width / o_lora]
  Buffer<float> block_kv, block_score;  // F32 [max_rows, widest compressor width]
  Buffer<float> index_kv, index_score;  // F32 [max_rows, 2 * index dim]
  Buffer<float> index_q;          // F32 [max_rows, index_heads * index dim]
  Buffer<float> index_weights;    // F32 [max_rows, index_heads]
  Buffer<int> selected_blocks;    // [max_rows, widest index top-k]
  Buffer<float> index_dots;       // F32 [index_heads, n_ctx / 4 + 2] one row's indexer heads . every block
  size_t hybrid_floats = 0;       // per thread: one query's scores (raw window and blocks)
  Buffer<float> hybrid_scores;    // F32 [n_threads, hybrid_floats]
  Buffer<int> hybrid_order;       // [n_threads, hybrid_floats] block numbers, for the top-k
  Buffer<const float*> hybrid_rows;  // [n_threads, hybrid_floats] one query's keys
  Buffer<float> hybrid_angles;    // F32 [max_rows, 2 * rope dims] each row's rotation, then its inverse
  // qwen35's Gated DeltaNet layers (forward_pass_deltanet.cc).
  Buffer<float> deltanet_mixed, deltanet_conv;  // F32 [max_rows, conv channels] the projections, convolved
  Buffer<float> deltanet_z, deltanet_out;       // F32 [max_rows, value width] the output's gate, the output
  Buffer<float> deltanet_beta, deltanet_decay;  // F32 [max_rows, value heads]
  Buffer<float> deltanet_scratch;               // F32 [n_threads, head_v_dim + head_k_dim * 64]
  std::vector<RecurrentPlan> recurrent_plans;   // one per sequence, reserved for kMaxSequences
};

class ForwardPass {
 public:
  // The rows of one or more sequences, each slice's rows contiguous and the
  // slices in row order; a cache appears in at most one slice.
  ForwardPass(const Model& model, ForwardBuffers& buffers, std::span<const SequenceSlice> slices, ThreadPool& pool);

  int n_rows() const { return n_rows_; }
  const Model& model() const { return model_; }

  // Row buffers, F32 [n_rows, n_embd] each: the residual stream, two normed
  // inputs and two sub-layer outputs.
  float* residual() const;
  // F32 [n_rows, hidden_width]: the hidden state between layers (the
  // residual, or deepseek4's streams), which taps copy and input rows replace.
  float* hidden() const;
  float* normed() const;
  float* normed2() const;
  float* branch() const;
  float* branch2() const;

  // Over n_rows rows of n_embd (out may alias in): RMSNorm with weight
  // (null: none), x += y, x *= s, x *= w element-wise.
  void RmsNorm(const float* in, const float* weight, float* out) const;
  void Add(float* x, const float* y) const;
  void Scale(float* x, float s) const;
  void Multiply(float* x, const float* w) const;
  // Each row of x times sigmoid(w . that row of in) (w: F32 [n_embd]).
  void ScaleRowsBySigmoidOf(float* x, const float* w, const float* in) const;

  // Self-attention of layer il on its normed input: projections, biases,
  // q/k (and v) norms, RoPE, keys and values into the cache (unless the
  // layer reads another layer's), attention, output projection.
  void Attention(const Layer& layer, int il, const float* in, float* out);
  // From here on, Ffn and Experts run on rows `first` .. n_rows - 1 only and
  // leave the others' outputs unset: in a forward's last layer, rows that
  // get no logits need only their keys and values (RunForward,
  // ContextOptions::unread_rows_fill_cache_only).
  void SetFeedForwardFirstRow(int first) { feed_forward_first_row_ = first; }
  // down(act(gate in) * up in).
  void Ffn(const DenseFfn& ffn, FfnActivation act, const float* in, float* out);
  // The mixture: route each row (router_in) to its experts, run every
  // touched expert once on all of its rows (in), and sum each row's expert
  // outputs with their weights.
  void Experts(const MixtureOfExperts& moe, int il, FfnActivation act, const float* in, const float* router_in,
               float* out);
  // Gemma 4 per-layer embeddings: the residual += rms(proj(gelu(gate x) *
  // this layer's input), post_norm). The inputs come from
  // PreparePerLayerInputs.
  void AddPerLayerInput(const Layer& layer, int il);

  // deepseek4 (docs/formats/deepseek4.md; forward_pass_deepseek4.cc), no-ops
  // for other models. Begin: every stream starts as the embedding row; End:
  // the residual becomes the output head mixer's sum of the streams.
  void BeginHyperStreams();
  void EndHyperStreams();
  // out = the mixer's weighted sum of the streams (it keeps its post and
  // comb weights for HyperPost); the streams = post * branch + their comb mix.
  void HyperPre(const HyperMixer& mixer, float* out);
  void HyperPost(const float* branch);
  // deepseek4's attention of layer il on its normed input.
  void Hybrid(const Layer& layer, int il, const float* in, float* out);
  // qwen35's Gated DeltaNet of layer il on its normed input (forward_pass_deltanet.cc).
  void DeltaNet(const Layer& layer, int il, const float* in, float* out);

  // Once per forward, before the layers (RunForward).
  void Embed(const TokenId* tokens);
  void PrepareRope();
  void PreparePerLayerInputs(const TokenId* tokens);

 private:
  const Model& model_;
  ForwardBuffers& b_;
  std::span<const SequenceSlice> slices_;
  ThreadPool& pool_;
  int n_rows_;
  int feed_forward_first_row_ = 0;
  // Hybrid's parts.
  void CompressBlocks(const Compressor& c, int il, const float* in, bool index);
  void SelectBlocks(const Layer& layer, int il, const float* in, const float* q_low_rank);
};

// deepseek4: the raw key of `pos` from its kv projection (F32 [dim]): the
// kv norm, then the layer's rotation of the last dims, as Hybrid stores it.
// For a DSpark drafter's context injection (speculative/dspark_drafter.h).
void Deepseek4RawKey(const HybridAttention& h, const float* kv, int pos, float eps, float* key);

}  // namespace kakeya
