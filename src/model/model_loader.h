// What the architecture files (model/arch/) read a GGUF with: the
// architecture's keys, checked for range, and tensors bound by name with
// their shape and type checked. Every problem throws Error naming the file
// and the key or tensor.
#pragma once

#include <cstdint>
#include <optional>
#include <unordered_set>
#include <string>
#include <string_view>
#include <vector>

#include "base/error.h"
#include "gguf/gguf.h"
#include "kernels/cpu/matmul.h"
#include "model/layer.h"

namespace kakeya {

struct HParams;

class ModelLoader {
 public:
  ModelLoader(const GgufFile& gguf, std::string_view arch) : gguf_(gguf), arch_(arch) {}

  const GgufFile& gguf() const { return gguf_; }
  std::string_view arch() const { return arch_; }
  // "<arch>.<suffix>"
  std::string Key(std::string_view suffix) const { return std::string(arch_) + "." + std::string(suffix); }

  // Keys of this architecture (suffix after "<arch>.").
  int PositiveInt(std::string_view suffix) const;  // required, 1 .. 2^24
  int OptionalInt(std::string_view suffix, int fallback) const;  // 0 .. 2^24, `fallback` when absent
  std::optional<uint32_t> FindU32(std::string_view suffix) const { return gguf_.FindU32(Key(suffix)); }
  std::optional<float> FindF32(std::string_view suffix) const { return gguf_.FindF32(Key(suffix)); }
  std::optional<bool> FindBool(std::string_view suffix) const { return gguf_.FindBool(Key(suffix)); }
  float F32(std::string_view suffix) const { return gguf_.GetF32(Key(suffix)); }
  // A per-layer integer: one value for every layer, or an array of n_layer
  // entries (llama.cpp's get_key_or_arr); `fallback` when the key is absent.
  std::vector<int> PerLayerInt(std::string_view suffix, int n_layer, int fallback) const;
  // NextN blocks (docs/formats/drafters.md 5.1): block_count counts them, and they are the
  // last nextn_predict_layers blocks. TrunkLayers() is block_count minus them
  // (throws if that leaves none). An MTP sidecar holds the NextN blocks only
  // (no blk.0.attn_norm.weight) and borrows embeddings and head from its
  // target; FirstBlock() is the first block the file holds tensors of: 0, or
  // a sidecar's first NextN block. Architectures bind blocks FirstBlock() ..
  // block_count - 1 the ordinary way; Model::Load moves the NextN ones to
  // Model::nextn.
  int TrunkLayers() const;
  bool IsSidecar() const;
  int FirstBlock() const { return IsSidecar() ? TrunkLayers() : 0; }

  // Which of n_layer layers slide (sliding_window_pattern): a bool array of
  // n_layer entries, or a period n whose last layer is global (n = 0: all
  // slide), `default_period` when absent.
  std::vector<bool> SlidingLayers(int n_layer, uint32_t default_period) const;

  // Tensors.
  const GgufTensor* Find(const std::string& name) const {
    looked_up_.insert(name);
    return gguf_.FindTensor(name);
  }
  // The file's tensors that no Find or Require asked for, in file order.
  std::vector<std::string> UnusedTensors() const;
  const GgufTensor& Require(const std::string& name) const;
  // A 1-D F32 vector of n elements (norm weights, biases, scales).
  const float* Vector(const std::string& name, int64_t n) const;
  const float* OptionalVector(const std::string& name, int64_t n) const;
  // A linear layer [n_in, n_out] of a type the matmuls compute with.
  WeightMatrix Matrix(const std::string& name, int64_t n_in, int64_t n_out) const;
  WeightMatrix OptionalMatrix(const std::string& name, int64_t n_in, int64_t n_out) const;
  // The n_expert matrices [n_in, n_out] of a 3-D expert tensor [n_in, n_out, n_expert].
  std::vector<WeightMatrix> Experts(const std::string& name, int64_t n_in, int64_t n_out,
                                    int64_t n_expert) const;
  // A matrix of n_group * n_out outputs as n_group matrices [n_in, n_out],
  // stored 2-D [n_in, n_group * n_out] or 3-D [n_in, n_out, n_group]
  // (deepseek4's grouped output projection).
  std::vector<WeightMatrix> OutputGroups(const std::string& name, int64_t n_in, int64_t n_out, int64_t n_group) const;
  // Layer il's expert gates and ups: a fused ffn_gate_up_exps [n_in, 2 * n_ff,
  // n_expert] (each expert's first n_ff rows its gate, the next n_ff its up),
  // or ffn_gate_exps and ffn_up_exps.
  void GateUpExperts(int il, int64_t n_in, int64_t n_ff, int64_t n_expert, std::vector<WeightMatrix>& gate,
                     std::vector<WeightMatrix>& up) const;

  template <typename... Args>
  [[noreturn]] void Fail(Args&&... args) const {
    kakeya::Fail(gguf_.name(), ": ", std::forward<Args>(args)...);
  }

 private:
  const GgufTensor& CheckWeightType(const GgufTensor& t) const;
  const GgufFile& gguf_;
  std::string_view arch_;
  mutable std::unordered_set<std::string> looked_up_;
};

// Keys shared by every architecture, into hp: embedding width, layer count
// (block_count, NextN layers included), training context and the RMSNorm
// epsilon (docs/formats/architectures.md 3.1).
void ReadCommonKeys(const ModelLoader& loader, HParams& hp);

// The mixture-of-experts keys (expert_count, expert_used_count,
// expert_feed_forward_length: absent, the dense n_ff / expert_used_count as
// llama.cpp), checked against each other.
struct ExpertKeys {
  int n_expert;
  int n_used;
  int n_ff;
};
ExpertKeys ReadExpertKeys(const ModelLoader& loader, int n_ff);

// Rejects rope scaling kakeya does not implement (anything but none/linear 1).
void CheckRopeScaling(const ModelLoader& loader);

// The attention keys of architectures whose layers all have the same
// attention (docs/formats/architectures.md 3.1): heads, KV heads, head dims (default n_embd /
// heads), rotated dims (default the head dim) and RoPE base (default 1e4).
struct AttentionKeys {
  int n_head, n_head_kv, head_dim, value_dim, rope_dims;
  float rope_base;
};
AttentionKeys ReadAttentionKeys(const ModelLoader& loader, int n_embd);
// An AttentionSpec of those keys: full attention over the layer's own cache,
// scale 1/sqrt(head_dim); the architecture sets the rest.
AttentionSpec UniformAttention(const AttentionKeys& keys, RopeStyle style, int il);

// Per-head RMSNorm of queries and keys before RoPE.
enum class QkNorm { kNone, kOptional, kRequired };
// Binds blk.<il>'s attn_norm, attn_q/k/v/output with their optional biases
// and, as `qk_norm` says, attn_q_norm/attn_k_norm; shapes from L.attn.
void BindAttention(const ModelLoader& loader, int il, int n_embd, QkNorm qk_norm, Layer& L);
// blk.<il>.ffn_{gate,up,down}<suffix>: [n_embd, n_ff] x2 and [n_ff, n_embd].
DenseFfn BindDenseFfn(const ModelLoader& loader, int il, int n_embd, int n_ff, std::string_view suffix = "");

std::string BlockName(int il, std::string_view tensor);  // "blk.<il>.<tensor>"

}  // namespace kakeya
