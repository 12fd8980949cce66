#include "model/model_loader.h"

#include <cmath>

#include "model/hparams.h"

namespace kakeya {

int ModelLoader::PositiveInt(std::string_view suffix) const {
  const std::string key = Key(suffix);
  const uint32_t v = gguf_.GetU32(key);
  if (v == 0 || v > (1u << 24)) Fail(key, " = ", v, " is out of range (1 .. ", 1u << 24, ")");
  return static_cast<int>(v);
}

int ModelLoader::OptionalInt(std::string_view suffix, int fallback) const {
  const std::string key = Key(suffix);
  const std::optional<uint32_t> v = gguf_.FindU32(key);
  if (!v) return fallback;
  if (*v > (1u << 24)) Fail(key, " = ", *v, " is out of range (0 .. ", 1u << 24, ")");
  return static_cast<int>(*v);
}

std::vector<int> ModelLoader::PerLayerInt(std::string_view suffix, int n_layer, int fallback) const {
  const std::string key = Key(suffix);
  const GgufValue* v = gguf_.Find(key);
  if (v == nullptr) return std::vector<int>(n_layer, fallback);
  if (v->type != GgufType::kArray) {
    const uint32_t value = gguf_.GetU32(key);
    if (value > (1u << 24)) Fail(key, " = ", value, " is out of range");
    return std::vector<int>(n_layer, static_cast<int>(value));
  }
  const std::vector<int64_t> values = gguf_.GetIntArray(key);
  if (values.size() != static_cast<size_t>(n_layer)) {
    Fail(key, " has ", values.size(), " entries; block_count is ", n_layer);
  }
  std::vector<int> out(n_layer);
  for (int il = 0; il < n_layer; ++il) {
    if (values[il] < 0 || values[il] > (1 << 24)) Fail(key, "[", il, "] = ", values[il], " is out of range");
    out[il] = static_cast<int>(values[il]);
  }
  return out;
}

int ModelLoader::TrunkLayers() const {
  const int n_blocks = PositiveInt("block_count");
  const uint32_t n_nextn = FindU32("nextn_predict_layers").value_or(0);
  if (n_nextn >= static_cast<uint32_t>(n_blocks)) {
    Fail(Key("nextn_predict_layers"), " = ", n_nextn, " leaves no trunk layer (block_count ", n_blocks, ")");
  }
  return n_blocks - static_cast<int>(n_nextn);
}

bool ModelLoader::IsSidecar() const {
  return FindU32("nextn_predict_layers").value_or(0) > 0 && Find("blk.0.attn_norm.weight") == nullptr;
}

std::vector<bool> ModelLoader::SlidingLayers(int n_layer, uint32_t default_period) const {
  const std::string key = Key("attention.sliding_window_pattern");
  const GgufValue* pattern = gguf_.Find(key);
  std::vector<bool> sliding(n_layer);
  if (pattern != nullptr && pattern->type == GgufType::kArray) {
    if (pattern->elem_type != GgufType::kBool) {
      Fail(key, " is an array of ", GgufTypeName(pattern->elem_type), "; expected bool");
    }
    if (pattern->count != static_cast<uint64_t>(n_layer)) {
      Fail(key, " has ", pattern->count, " entries; block_count is ", n_layer);
    }
    for (int il = 0; il < n_layer; ++il) sliding[il] = pattern->array_data[il] != 0;
    return sliding;
  }
  // A period n: the last layer of every n is global (llama.cpp set_swa_pattern).
  const uint32_t period = pattern != nullptr ? gguf_.GetU32(key) : default_period;
  for (int il = 0; il < n_layer; ++il) {
    sliding[il] = period == 0 || (period > 1 && static_cast<uint32_t>(il) % period < period - 1);
  }
  return sliding;
}

std::vector<std::string> ModelLoader::UnusedTensors() const {
  std::vector<std::string> unused;
  for (const GgufTensor& t : gguf_.tensors()) {
    if (!looked_up_.count(std::string(t.name))) unused.emplace_back(t.name);
  }
  return unused;
}

const GgufTensor& ModelLoader::Require(const std::string& name) const {
  const GgufTensor* t = Find(name);
  if (t == nullptr) Fail("missing tensor '", name, "' (required by architecture ", arch_, ")");
  return *t;
}

const float* ModelLoader::Vector(const std::string& name, int64_t n) const {
  const GgufTensor& t = Require(name);
  if (t.type != DType::kF32) {
    Fail("tensor '", t.name, "' has type ", NameOf(t.type), "; kakeya expects F32 for 1-D tensors");
  }
  if (t.elements() != n || t.ne[0] != n) {
    Fail("tensor '", t.name, "' has ", t.elements(), " elements, expected ", n);
  }
  return reinterpret_cast<const float*>(t.data);
}

const float* ModelLoader::OptionalVector(const std::string& name, int64_t n) const {
  return Find(name) == nullptr ? nullptr : Vector(name, n);
}

const GgufTensor& ModelLoader::CheckWeightType(const GgufTensor& t) const {
  if (!IsSupportedWeightType(t.type)) {
    const std::string_view type_name = NameOf(t.type);
    Fail("tensor '", t.name, "' has type ", type_name.empty() ? std::string_view("unknown") : type_name,
         ", which kakeya cannot compute with yet (supported: F32, F16, BF16, Q8_0, Q4_0, "
         "Q4_1, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K)");
  }
  return t;
}

WeightMatrix ModelLoader::Matrix(const std::string& name, int64_t n_in, int64_t n_out) const {
  const GgufTensor& t = Require(name);
  if (t.n_dims != 2 || t.ne[0] != n_in || t.ne[1] != n_out) {
    Fail("tensor '", t.name, "' has shape [", t.ne[0], ", ", t.ne[1], ", ", t.ne[2], ", ", t.ne[3],
         "], expected [", n_in, ", ", n_out, "]");
  }
  CheckWeightType(t);
  return WeightMatrix{t.type, n_in, n_out, t.data, RowBytes(t.type, n_in)};
}

WeightMatrix ModelLoader::OptionalMatrix(const std::string& name, int64_t n_in, int64_t n_out) const {
  return Find(name) == nullptr ? WeightMatrix{} : Matrix(name, n_in, n_out);
}

std::vector<WeightMatrix> ModelLoader::Experts(const std::string& name, int64_t n_in, int64_t n_out,
                                               int64_t n_expert) const {
  const GgufTensor& t = Require(name);
  if (t.n_dims != 3 || t.ne[0] != n_in || t.ne[1] != n_out || t.ne[2] != n_expert) {
    Fail("tensor '", t.name, "' has shape [", t.ne[0], ", ", t.ne[1], ", ", t.ne[2], ", ", t.ne[3],
         "], expected [", n_in, ", ", n_out, ", ", n_expert, "] (expert_count ", n_expert, ")");
  }
  CheckWeightType(t);
  const int64_t row_bytes = RowBytes(t.type, n_in);
  std::vector<WeightMatrix> experts(n_expert);
  for (int64_t e = 0; e < n_expert; ++e) {
    experts[e] = WeightMatrix{t.type, n_in, n_out, t.data + e * n_out * row_bytes, row_bytes};
  }
  return experts;
}

std::vector<WeightMatrix> ModelLoader::OutputGroups(const std::string& name, int64_t n_in, int64_t n_out,
                                                    int64_t n_group) const {
  const GgufTensor& t = Require(name);
  const bool flat = t.n_dims == 2 && t.ne[0] == n_in && t.ne[1] == n_out * n_group;
  if (!flat) return Experts(name, n_in, n_out, n_group);
  CheckWeightType(t);
  const int64_t row_bytes = RowBytes(t.type, n_in);
  std::vector<WeightMatrix> groups(n_group);
  for (int64_t g = 0; g < n_group; ++g) groups[g] = WeightMatrix{t.type, n_in, n_out, t.data + g * n_out * row_bytes, row_bytes};
  return groups;
}

void ModelLoader::GateUpExperts(int il, int64_t n_in, int64_t n_ff, int64_t n_expert, std::vector<WeightMatrix>& gate,
                                std::vector<WeightMatrix>& up) const {
  if (Find(BlockName(il, "ffn_gate_up_exps.weight")) == nullptr) {
    gate = Experts(BlockName(il, "ffn_gate_exps.weight"), n_in, n_ff, n_expert);
    up = Experts(BlockName(il, "ffn_up_exps.weight"), n_in, n_ff, n_expert);
    return;
  }
  const std::vector<WeightMatrix> fused = Experts(BlockName(il, "ffn_gate_up_exps.weight"), n_in, 2 * n_ff, n_expert);
  gate.resize(n_expert);
  up.resize(n_expert);
  for (int64_t e = 0; e < n_expert; ++e) {
    gate[e] = fused[e];
    gate[e].n_out = n_ff;
    up[e] = gate[e];
    up[e].data = static_cast<const uint8_t*>(fused[e].data) + n_ff * fused[e].row_bytes;
  }
}

void ReadCommonKeys(const ModelLoader& loader, HParams& hp) {
  hp.n_embd = loader.PositiveInt("embedding_length");
  hp.n_layer = loader.PositiveInt("block_count");
  hp.n_ctx_train = loader.PositiveInt("context_length");
  hp.norm_eps = loader.F32("attention.layer_norm_rms_epsilon");
  if (!(hp.norm_eps >= 0.0f) || !std::isfinite(hp.norm_eps)) {
    loader.Fail(loader.Key("attention.layer_norm_rms_epsilon"), " = ", hp.norm_eps, " is out of range");
  }
}

ExpertKeys ReadExpertKeys(const ModelLoader& loader, int n_ff_dense) {
  ExpertKeys k;
  k.n_expert = loader.OptionalInt("expert_count", 0);
  k.n_used = loader.OptionalInt("expert_used_count", 0);
  if (k.n_expert < 1 || k.n_expert > 4096) {
    loader.Fail(loader.Key("expert_count"), " = ", k.n_expert, " is out of range (1 .. 4096)");
  }
  if (k.n_used < 1 || k.n_used > k.n_expert) {
    loader.Fail(loader.Key("expert_used_count"), " = ", k.n_used, " must be in 1 .. expert_count (",
                k.n_expert, ")");
  }
  const uint32_t n_ff = loader.FindU32("expert_feed_forward_length").value_or(n_ff_dense / k.n_used);
  if (n_ff == 0 || n_ff > (1u << 24)) {
    loader.Fail(loader.Key("expert_feed_forward_length"), " = ", n_ff, " is out of range");
  }
  k.n_ff = static_cast<int>(n_ff);
  return k;
}

void CheckRopeScaling(const ModelLoader& loader) {
  if (const auto scaling = loader.gguf().FindString(loader.Key("rope.scaling.type"));
      scaling && *scaling != "none" && *scaling != "linear") {
    loader.Fail(loader.Key("rope.scaling.type"), " = '", *scaling,
                "' is not supported yet (supported: none, linear with factor 1)");
  }
  if (const auto factor = loader.FindF32("rope.scaling.factor"); factor && *factor != 0.0f && *factor != 1.0f) {
    loader.Fail(loader.Key("rope.scaling.factor"), " = ", *factor, " is not supported yet");
  }
}

AttentionKeys ReadAttentionKeys(const ModelLoader& loader, int n_embd) {
  AttentionKeys k;
  k.n_head = loader.PositiveInt("attention.head_count");
  k.n_head_kv = loader.OptionalInt("attention.head_count_kv", k.n_head);
  if (k.n_head_kv <= 0 || k.n_head % k.n_head_kv != 0) {
    loader.Fail(loader.Key("attention.head_count_kv"), " = ", k.n_head_kv, " must divide head_count = ", k.n_head);
  }
  k.head_dim = loader.OptionalInt("attention.key_length", n_embd / k.n_head);
  k.value_dim = loader.OptionalInt("attention.value_length", k.head_dim);
  k.rope_dims = loader.OptionalInt("rope.dimension_count", k.head_dim);
  if (k.head_dim <= 0 || k.value_dim <= 0 || k.rope_dims <= 0 || k.rope_dims > k.head_dim || k.rope_dims % 2 != 0 ||
      k.head_dim > (1 << 16) || k.value_dim > (1 << 16)) {
    loader.Fail("inconsistent head dimensions (key_length ", k.head_dim, ", value_length ", k.value_dim,
                ", rope.dimension_count ", k.rope_dims, ")");
  }
  k.rope_base = loader.FindF32("rope.freq_base").value_or(10000.0f);
  if (!(k.rope_base > 0.0f) || !std::isfinite(k.rope_base)) {
    loader.Fail(loader.Key("rope.freq_base"), " = ", k.rope_base, " is out of range");
  }
  CheckRopeScaling(loader);
  return k;
}

AttentionSpec UniformAttention(const AttentionKeys& keys, RopeStyle style, int il) {
  AttentionSpec a;
  a.n_head = keys.n_head;
  a.n_head_kv = keys.n_head_kv;
  a.head_dim = keys.head_dim;
  a.value_dim = keys.value_dim;
  a.scale = 1.0f / std::sqrt(static_cast<float>(keys.head_dim));
  a.rope = {keys.rope_base, keys.rope_dims, style, nullptr};
  a.kv_layer = il;
  return a;
}

void BindAttention(const ModelLoader& loader, int il, int n_embd, QkNorm qk_norm, Layer& L) {
  const AttentionSpec& a = L.attn;
  L.attn_norm = loader.Vector(BlockName(il, "attn_norm.weight"), n_embd);
  L.wq = loader.Matrix(BlockName(il, "attn_q.weight"), n_embd, a.q_width());
  L.wk = loader.Matrix(BlockName(il, "attn_k.weight"), n_embd, a.k_width());
  L.wv = loader.Matrix(BlockName(il, "attn_v.weight"), n_embd, a.v_width());
  L.wo = loader.Matrix(BlockName(il, "attn_output.weight"), a.out_width(), n_embd);
  L.bq = loader.OptionalVector(BlockName(il, "attn_q.bias"), a.q_width());
  L.bk = loader.OptionalVector(BlockName(il, "attn_k.bias"), a.k_width());
  L.bv = loader.OptionalVector(BlockName(il, "attn_v.bias"), a.v_width());
  if (qk_norm == QkNorm::kRequired) {
    L.q_norm = loader.Vector(BlockName(il, "attn_q_norm.weight"), a.head_dim);
    L.k_norm = loader.Vector(BlockName(il, "attn_k_norm.weight"), a.head_dim);
  } else if (qk_norm == QkNorm::kOptional) {
    L.q_norm = loader.OptionalVector(BlockName(il, "attn_q_norm.weight"), a.head_dim);
    L.k_norm = loader.OptionalVector(BlockName(il, "attn_k_norm.weight"), a.head_dim);
  }
}

DenseFfn BindDenseFfn(const ModelLoader& loader, int il, int n_embd, int n_ff, std::string_view suffix) {
  const std::string s(suffix);
  DenseFfn f;
  f.gate = loader.Matrix(BlockName(il, "ffn_gate" + s + ".weight"), n_embd, n_ff);
  f.up = loader.Matrix(BlockName(il, "ffn_up" + s + ".weight"), n_embd, n_ff);
  f.down = loader.Matrix(BlockName(il, "ffn_down" + s + ".weight"), n_ff, n_embd);
  return f;
}

std::string BlockName(int il, std::string_view tensor) {
  return "blk." + std::to_string(il) + "." + std::string(tensor);
}

}  // namespace kakeya
