// A loaded model: hyper-parameters, tokenizer and weights bound in place from
// the memory-mapped GGUF. Immutable after Load(); per-sequence state (KV cache,
// scratch) lives in a Context (model/context.h).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "base/huge_pages.h"
#include "gguf/gguf.h"
#include "kernels/cpu/matmul.h"
#include "tokenizer/tokenizer.h"

namespace kakeya {

enum class RopeStyle {
  kNormal,  // rotate adjacent pairs (x[2i], x[2i+1]): llama
  kNeox,    // rotate halves (x[i], x[i + d/2]): qwen2/3, gemma
};

enum class FfnActivation {
  kSilu,  // SwiGLU: llama, qwen
  kGelu,  // GeGLU with ggml's F16 tanh GELU: gemma
};

struct HParams {
  std::string arch;  // general.architecture
  int n_vocab = 0;
  int n_embd = 0;
  int n_layer = 0;
  int n_head = 0;
  int n_head_kv = 0;
  int head_dim = 0;    // key_length (defaults to n_embd / n_head)
  int value_dim = 0;   // value_length (defaults to head_dim)
  int n_ff = 0;
  int n_ctx_train = 0;
  float norm_eps = 1e-5f;
  float rope_base = 10000.0f;
  int rope_dims = 0;  // rotated dimensions per head (rope.dimension_count, else head_dim)
  RopeStyle rope_style = RopeStyle::kNormal;
  bool qk_norm = false;       // per-head RMSNorm of q and k before RoPE (qwen3, gemma3)
  FfnActivation ffn_act = FfnActivation::kSilu;
  float embd_scale = 0.0f;     // > 0: token embeddings are multiplied by it (gemma: sqrt(n_embd))
  float attn_scale = 0.0f;     // multiplies q.k (1/sqrt(head_dim) unless the model says otherwise)
  float attn_softcap = 0.0f;   // > 0: attention scores soft-capped (gemma2)
  float final_softcap = 0.0f;  // > 0: logits soft-capped (gemma2, some gemma3)
  bool post_norms = false;     // RMSNorm of the attention and FFN outputs (gemma)
  // Sliding-window attention: layer il is local iff swa_layers[il]; a query at
  // i then sees keys j with i - n_swa < j <= i, and RoPE uses rope_base_swa.
  int n_swa = 0;
  std::vector<uint8_t> swa_layers;  // [n_layer]
  float rope_base_swa = 10000.0f;
};

// One decoder layer's weights. Shapes in GGUF order [ne0 = n_in, ne1 = n_out].
struct LayerWeights {
  const float* attn_norm = nullptr;  // F32 [n_embd]
  WeightMatrix wq;                   // [n_embd, n_head * head_dim]
  WeightMatrix wk;                   // [n_embd, n_head_kv * head_dim]
  WeightMatrix wv;                   // [n_embd, n_head_kv * value_dim]
  WeightMatrix wo;                   // [n_head * value_dim, n_embd]
  const float* bq = nullptr;         // F32 [n_head * head_dim] (qwen2 only)
  const float* bk = nullptr;         // F32 [n_head_kv * head_dim]
  const float* bv = nullptr;         // F32 [n_head_kv * value_dim]
  const float* q_norm = nullptr;     // F32 [head_dim] (qk_norm)
  const float* k_norm = nullptr;     // F32 [head_dim]
  const float* post_attn_norm = nullptr;  // F32 [n_embd] (post_norms)
  const float* ffn_norm = nullptr;   // F32 [n_embd]
  const float* post_ffn_norm = nullptr;   // F32 [n_embd] (post_norms)
  WeightMatrix w_gate;               // [n_embd, n_ff]
  WeightMatrix w_up;                 // [n_embd, n_ff]
  WeightMatrix w_down;               // [n_ff, n_embd]
};

class Model {
 public:
  // Maps the file, reads hyper-parameters and the tokenizer, binds every
  // tensor (checking names, shapes and types). Throws Error naming the file
  // and the key or tensor at fault.
  static std::unique_ptr<Model> Load(const std::string& path);

  const HParams& hparams() const { return hp_; }
  const Tokenizer& tokenizer() const { return *tokenizer_; }
  const GgufFile& gguf() const { return *gguf_; }
  const std::string& path() const { return path_; }

  WeightMatrix token_embd;           // [n_embd, n_vocab]
  const float* output_norm = nullptr;  // F32 [n_embd]
  WeightMatrix output;               // [n_embd, n_vocab] (== token_embd when tied)
  const float* rope_freqs = nullptr;  // F32 [rope_dims / 2] frequency divisors, optional
  std::vector<LayerWeights> layers;

  // Bytes of weights one forward step reads (for bandwidth figures).
  size_t weight_bytes() const;

 private:
  Model() = default;
  // Moves every matrix the forward streams into one buffer of 2 MiB pages,
  // repacked where it has a faster layout (matmul.h, PackWeights), once, and
  // drops the file pages it no longer reads.
  void MoveMatricesToWeightBuffer();
  std::string path_;
  std::unique_ptr<GgufFile> gguf_;
  std::unique_ptr<Tokenizer> tokenizer_;
  HParams hp_;
  HugePageBuffer weight_buffer_;  // MoveMatricesToWeightBuffer
};

}  // namespace kakeya
