// One decoder layer as the loader found it: what kind of attention and
// feed-forward it has, with which shapes, and its weights bound in place.
// Built once at load by the architecture's file (model/arch/), read by the
// layer blocks (model/forward_pass.h); nothing here changes after Load.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "kernels/cpu/matmul.h"

namespace kakeya {

enum class RopeStyle : uint8_t {
  kNormal,  // rotate adjacent pairs (x[2i], x[2i+1]): llama
  kNeox,    // rotate halves (x[i], x[i + n_rot/2]): qwen, gemma, glm
};

// Rotary embedding of one layer's queries and keys (docs/formats/architectures.md 3.3).
struct RopeSpec {
  float base = 10000.0f;
  int dims = 0;  // rotated elements per head; the rest pass through
  RopeStyle style = RopeStyle::kNormal;
  const float* freq_factors = nullptr;  // F32 [dims / 2] divisors of each angle, optional

  bool operator==(const RopeSpec&) const = default;
};

struct AttentionSpec {
  int n_head = 0;
  int n_head_kv = 0;
  int head_dim = 0;   // of queries and keys
  int value_dim = 0;  // of values
  int window = 0;     // > 0: sliding; a query at p sees keys p - window < j <= p
  float scale = 1.0f;    // multiplies q.k
  float softcap = 0.0f;  // > 0: scores soft-capped (gemma2)
  RopeSpec rope;
  // Gemma 4: values are RMS-normed per head without weight, and layers
  // without attn_v take their values from the key projection (before its norm).
  bool norm_values = false;
  bool values_from_keys = false;
  // qwen35: wq also projects a gate per head ([query, gate] of head_dim each,
  // head after head); the attention's output is multiplied by sigmoid(gate).
  bool gated_output = false;
  // The layer whose keys and values this one attends to: its own index, or an
  // earlier layer's (Gemma 4 shared-KV layers, which write no cache).
  int kv_layer = 0;

  int q_width() const { return n_head * head_dim; }
  int k_width() const { return n_head_kv * head_dim; }
  int v_width() const { return n_head_kv * value_dim; }
  int out_width() const { return n_head * value_dim; }
  // Rows per attention task at most: up to 16 (row, query head) pairs share
  // each block of keys and values while it is in L1 (AttendKvHead), and the
  // scratch per thread is sized for them.
  int max_rows_per_task() const { return std::max(1, 16 / (n_head / n_head_kv)); }
  // Rows per task for n_rows rows on n_threads threads: tasks of (rows, KV
  // head), about two per thread.
  int rows_per_task(int n_rows, int n_threads) const {
    const int chunks_per_head = (2 * n_threads + n_head_kv - 1) / n_head_kv;
    return std::clamp((n_rows + chunks_per_head - 1) / chunks_per_head, 1, max_rows_per_task());
  }
};

enum class FfnActivation : uint8_t {
  kSilu,  // SwiGLU: llama, qwen, glm
  kGelu,  // GeGLU with ggml's F16 tanh GELU: gemma
};

// down(act(gate x) * up x).
struct DenseFfn {
  WeightMatrix gate;  // [n_embd, n_ff]
  WeightMatrix up;    // [n_embd, n_ff]
  WeightMatrix down;  // [n_ff, n_embd]
  float clamp = 0.0f;  // > 0 (deepseek4): SwiGLU of min(gate, clamp) and up clamped to +-clamp
  bool present() const { return down.data != nullptr; }
  int n_ff() const { return static_cast<int>(down.n_in); }
};

enum class ExpertGating : uint8_t {
  kSoftmax,      // qwen3moe, gemma4, mixtral
  kSigmoid,      // glm4moe, deepseek v3
  kSqrtSoftplus,  // deepseek4: sqrt(log(1 + e^x))
};

// A mixture of experts: a router picks n_used of the experts per row, each
// is a DenseFfn of its own, and their outputs are summed with the router's
// weights (docs/formats/architectures.md 3.5, 3.6).
struct MixtureOfExperts {
  int n_expert = 0;
  int n_used = 0;
  ExpertGating gating = ExpertGating::kSoftmax;
  bool normalize_weights = true;  // the chosen weights renormalized to sum 1
  float weight_scale = 1.0f;      // then multiplied by this
  WeightMatrix router;                   // [n_embd, n_expert]
  const float* selection_bias = nullptr;  // F32 [n_expert] added for the choice only (glm4moe)
  const float* expert_scale = nullptr;    // F32 [n_expert] multiplies each expert's output (gemma4)
  // deepseek4's first layers route by token id: I32 [n_vocab, n_used], the
  // router's probabilities still weigh them.
  const int32_t* token_experts = nullptr;
  float clamp = 0.0f;  // as DenseFfn::clamp
  // Per expert, slices of the GGUF's 3-D tensors ([n_in, n_out, n_expert]);
  // a fused gate_up tensor becomes a gate and an up slice of each expert.
  std::vector<WeightMatrix> gate, up, down;

  bool present() const { return n_expert > 0; }
  int n_ff() const { return down.empty() ? 0 : static_cast<int>(down[0].n_in); }
};

// Gemma 4 E2B/E4B: a per-layer input added after the feed-forward.
struct PerLayerInput {
  WeightMatrix gate;  // [n_embd, n_embd_per_layer]
  WeightMatrix proj;  // [n_embd_per_layer, n_embd]
  const float* post_norm = nullptr;  // F32 [n_embd]
  bool present() const { return gate.data != nullptr; }
};

// DeepSeek-V4's hyper-connections (docs/formats/deepseek4.md 2): the residual is
// kHyperStreams streams; before a sub-layer a mixer weighs them into its
// input, after it spreads the output back and mixes the streams.
inline constexpr int kHyperStreams = 4;
inline constexpr int kHyperMixes = (2 + kHyperStreams) * kHyperStreams;  // pre, post, comb
struct HyperMixer {
  WeightMatrix fn;              // F32 [kHyperStreams * n_embd, n_mix]: the mixes of the RMS-normed streams
  const float* base = nullptr;  // F32 [n_mix]
  const float* scale = nullptr;  // F32 [3] (pre, post, comb), the head's [1]
  bool present() const { return fn.data != nullptr; }
};

// A compressor (docs/formats/deepseek4.md 4): every `ratio` positions, one
// block of `dim` values, a softmax-weighted sum per channel of the block's
// projected inputs (ratio 4: of 8 positions, the previous block's through
// the first half of the projections and its own through the second).
struct Compressor {
  int ratio = 0;  // 0: none, 4 or 128
  int dim = 0;
  WeightMatrix kv, gate;        // [n_embd, width()]
  const float* ape = nullptr;   // F32 [ratio, width()] added to the gate at pos % ratio
  const float* norm = nullptr;  // F32 [dim]
  int width() const { return ratio == 4 ? 2 * dim : dim; }
  int span() const { return ratio == 4 ? 2 * ratio : ratio; }  // positions one block reads
};

// RoPE with YaRN on the last `dims` values of each head, as ggml computes it.
struct YarnRope {
  int dims = 0;
  float base = 10000.0f;
  float freq_scale = 1.0f;
  float ext_factor = 0.0f;
  float attn_factor = 1.0f;
  float corr_low = 0.0f, corr_high = 0.0f;
};

// deepseek4's attention (docs/formats/deepseek4.md 3): low-rank queries, one
// key head that is also the value head, a sink logit per head, keys of a
// raw window plus compressed blocks (ratio 4: the lightning indexer's top-k
// of them, 128: all), the output un-rotated and projected through groups.
struct HybridAttention {
  WeightMatrix q_a, q_b, kv, out_b;  // [n_embd, q_lora], [q_lora, n_head * dim], [n_embd, dim], [groups * o_lora, n_embd]
  std::vector<WeightMatrix> out_a;   // per group: [n_head / groups * dim, o_lora]
  const float* q_a_norm = nullptr;   // F32 [q_lora]
  const float* kv_norm = nullptr;    // F32 [dim]
  const float* sinks = nullptr;      // F32 [n_head]
  YarnRope rope;                     // queries, keys and blocks alike
  Compressor blocks;
  Compressor index_blocks;           // ratio 4: the indexer's keys
  WeightMatrix index_q_b, index_weights;  // [q_lora, index_heads * index dim], [n_embd, index_heads]
  int index_heads = 0, index_top_k = 0;
  // false: a row also sees the later rows of its own forward (a DSpark
  // drafter denoises its whole block at once).
  bool causal = true;
  bool present() const { return q_a.data != nullptr; }
};

// Qwen3.5's Gated DeltaNet (docs/formats/qwen35.md 3): linear attention whose
// state is a [head_k_dim, head_v_dim] matrix per value head, updated by the
// gated delta rule after a causal depthwise convolution of the projections.
struct GatedDeltaNet {
  int n_k_heads = 0, n_v_heads = 0;  // value head j reads key head j % n_k_heads
  int head_k_dim = 0, head_v_dim = 0;
  int conv_kernel = 0;
  WeightMatrix qkv;              // [n_embd, conv_channels()]: q, k, then v
  WeightMatrix gate;             // [n_embd, value_width()]: z, the output's gate
  WeightMatrix beta, alpha;      // [n_embd, n_v_heads]
  const float* conv = nullptr;   // F32 [conv_channels(), conv_kernel]: channel c's taps at c * conv_kernel
  const float* dt_bias = nullptr;  // F32 [n_v_heads]
  const float* decay = nullptr;  // F32 [n_v_heads], negative: the log decay per unit of softplus(alpha + dt_bias)
  const float* norm = nullptr;   // F32 [head_v_dim]: the gated RMSNorm of each head's output
  WeightMatrix out;              // [value_width(), n_embd]
  int key_width() const { return n_k_heads * head_k_dim; }
  int value_width() const { return n_v_heads * head_v_dim; }
  int conv_channels() const { return 2 * key_width() + value_width(); }
  int state_floats() const { return n_v_heads * head_k_dim * head_v_dim; }
  bool present() const { return qkv.data != nullptr; }
};

// Norm weights are F32 [width]; a null pointer means the layer has no such norm.
struct Layer {
  AttentionSpec attn;
  const float* attn_norm = nullptr;
  WeightMatrix wq, wk, wv, wo;  // wk/wv absent on shared-KV layers, wv on K=V layers
  const float* bq = nullptr;  // biases (qwen2, glm4moe)
  const float* bk = nullptr;
  const float* bv = nullptr;
  const float* q_norm = nullptr;  // per head, [head_dim]
  const float* k_norm = nullptr;
  const float* post_attn_norm = nullptr;

  FfnActivation act = FfnActivation::kSilu;
  const float* ffn_norm = nullptr;
  DenseFfn ffn;  // the dense FFN (gemma4 MoE layers keep one beside the experts)
  const float* post_ffn_norm = nullptr;
  MixtureOfExperts moe;
  DenseFfn shared_expert;  // glm4moe, qwen35moe: always-on expert beside the routed ones
  const float* shared_expert_gate = nullptr;  // qwen35moe: F32 [n_embd], its output times sigmoid(gate . input)
  // gemma4 MoE layers: the dense branch's post-norm, the experts' pre- and
  // post-norms and the router's input scale.
  const float* post_ffn_norm_dense = nullptr;
  const float* pre_ffn_norm_experts = nullptr;
  const float* post_ffn_norm_experts = nullptr;
  const float* router_input_scale = nullptr;  // F32 [n_embd]
  PerLayerInput per_layer_input;
  float output_scale = 1.0f;  // gemma4 layer_output_scale: multiplies the whole residual
  HybridAttention hybrid;      // deepseek4, instead of wq .. wo
  HyperMixer hc_attn, hc_ffn;  // deepseek4: the streams' mixers around attention and FFN
  GatedDeltaNet deltanet;      // qwen35's recurrent layers, instead of attention

  // Every matrix of the layer, experts included: the one list that packing,
  // byte counts and scratch sizes walk.
  std::vector<WeightMatrix*> Matrices();
  std::vector<const WeightMatrix*> Matrices() const;
  bool writes_kv(int il) const { return attn.kv_layer == il; }
};

}  // namespace kakeya
