// Gemma 4 (docs/formats/architectures.md 3.5; tests/fixtures/models2/README.md): the
// dense models (31B, E2B, E4B) and the mixture 26B-A4B. Per layer: a sliding
// or global attention of its own geometry (KV heads, head dim, RoPE), values
// RMS-normed without weight and taken from the keys on layers without
// attn_v, scale 1, shared-KV layers; a GeGLU FFN, and on mixture layers
// experts beside it; per-layer embeddings; a scale of the whole residual.
#include <algorithm>
#include <cmath>

#include "model/arch/architecture.h"
#include "model/forward_pass.h"
#include "model/model_loader.h"

namespace kakeya {
namespace {

void LoadGemma4(const ModelLoader& loader, Model& model) {
  HParams& hp = model.mutable_hparams();
  ReadCommonKeys(loader, hp);
  hp.embd_scale = std::sqrt(static_cast<float>(hp.n_embd));
  hp.final_softcap = loader.FindF32("final_logit_softcapping").value_or(30.0f);  // absent: llama.cpp's default
  hp.n_embd_per_layer = loader.OptionalInt("embedding_length_per_layer_input", 0);
  const int n_layer = hp.n_layer, n_embd = hp.n_embd;

  const std::vector<int> n_head = loader.PerLayerInt("attention.head_count", n_layer, 0);
  const std::vector<int> n_head_kv = loader.PerLayerInt("attention.head_count_kv", n_layer, 0);
  const std::vector<int> n_ff = loader.PerLayerInt("feed_forward_length", n_layer, 0);
  const int head_dim = loader.PositiveInt("attention.key_length");
  const int head_dim_swa = loader.PositiveInt("attention.key_length_swa");
  if (loader.FindU32("attention.value_length").value_or(head_dim) != static_cast<uint32_t>(head_dim) ||
      loader.FindU32("attention.value_length_swa").value_or(head_dim_swa) != static_cast<uint32_t>(head_dim_swa)) {
    loader.Fail("gemma4 needs value_length = key_length and value_length_swa = key_length_swa");
  }
  const int rope_dims = loader.OptionalInt("rope.dimension_count", head_dim);
  const int rope_dims_swa = loader.OptionalInt("rope.dimension_count_swa", head_dim_swa);
  const float rope_base = loader.FindF32("rope.freq_base").value_or(10000.0f);
  const float rope_base_swa = loader.FindF32("rope.freq_base_swa").value_or(rope_base);  // llama.cpp's default
  CheckRopeScaling(loader);
  const int window = loader.PositiveInt("attention.sliding_window");
  if (loader.gguf().Find(loader.Key("attention.sliding_window_pattern")) == nullptr) {
    loader.Fail("missing key ", loader.Key("attention.sliding_window_pattern"), " (required by gemma4)");
  }
  const std::vector<bool> sliding = loader.SlidingLayers(n_layer, 0);
  const int n_shared_kv = loader.OptionalInt("attention.shared_kv_layers", 0);
  if (n_shared_kv >= n_layer) {
    loader.Fail(loader.Key("attention.shared_kv_layers"), " = ", n_shared_kv, " leaves no layer with its own cache (",
                n_layer, " layers)");
  }
  const int first_shared = n_layer - n_shared_kv;
  const bool any_global = std::find(sliding.begin(), sliding.end(), false) != sliding.end();
  // Proportional RoPE of the global layers: the file's divisors (1 for the
  // pairs that rotate, 1e30 for the others).
  const float* rope_freqs = any_global ? loader.Vector("rope_freqs.weight", head_dim / 2) : nullptr;

  BindEmbeddingsAndHead(loader, model, /*tied=*/false);
  const int E = hp.n_embd_per_layer;
  if (E > 0) {
    model.per_layer_token_embd = loader.Matrix("per_layer_token_embd.weight", int64_t{E} * n_layer, hp.n_vocab);
    model.per_layer_model_proj = loader.Matrix("per_layer_model_proj.weight", n_embd, int64_t{E} * n_layer);
    model.per_layer_proj_norm = loader.Vector("per_layer_proj_norm.weight", E);
  }

  model.layers.resize(n_layer);
  for (int il = 0; il < n_layer; ++il) {
    Layer& L = model.layers[il];
    AttentionSpec& a = L.attn;
    if (n_head[il] < 1 || n_head_kv[il] < 1) {
      loader.Fail("layer ", il, ": attention.head_count ", n_head[il], " / head_count_kv ", n_head_kv[il],
                  " must be positive");
    }
    a.n_head = n_head[il];
    a.n_head_kv = n_head_kv[il];
    a.head_dim = a.value_dim = sliding[il] ? head_dim_swa : head_dim;
    a.window = sliding[il] ? window : 0;
    a.scale = 1.0f;
    a.rope = sliding[il] ? RopeSpec{rope_base_swa, rope_dims_swa, RopeStyle::kNeox, nullptr}
                         : RopeSpec{rope_base, rope_dims, RopeStyle::kNeox, rope_freqs};
    a.norm_values = true;
    // Shared-KV layers read the cache of the last layer of their kind before
    // the shared ones, as llama.cpp: first_shared - 2 (sliding) or - 1 (global).
    a.kv_layer = il;
    if (il >= first_shared) {
      a.kv_layer = first_shared - (sliding[il] ? 2 : 1);
      if (a.kv_layer < 0 || sliding[a.kv_layer] != sliding[il]) {
        loader.Fail("layer ", il, " shares keys and values (attention.shared_kv_layers = ", n_shared_kv,
                    ") but layer ", a.kv_layer, " is no ", sliding[il] ? "sliding" : "global", " layer to share");
      }
    }
    L.attn_norm = loader.Vector(BlockName(il, "attn_norm.weight"), n_embd);
    L.wq = loader.Matrix(BlockName(il, "attn_q.weight"), n_embd, a.q_width());
    L.wo = loader.Matrix(BlockName(il, "attn_output.weight"), a.out_width(), n_embd);
    L.q_norm = loader.Vector(BlockName(il, "attn_q_norm.weight"), a.head_dim);
    if (L.writes_kv(il)) {
      L.wk = loader.Matrix(BlockName(il, "attn_k.weight"), n_embd, a.k_width());
      L.wv = loader.OptionalMatrix(BlockName(il, "attn_v.weight"), n_embd, a.v_width());
      a.values_from_keys = L.wv.data == nullptr;
      L.k_norm = loader.Vector(BlockName(il, "attn_k_norm.weight"), a.head_dim);
    } else {
      // A layer that reads another's cache computes no keys or values; a file
      // may still hold its projections (llama.cpp loads them, optional, and
      // leaves them unused): they are not parts this model leaves out.
      for (const char* unused : {"attn_k.weight", "attn_v.weight", "attn_k_norm.weight"}) loader.Find(BlockName(il, unused));
    }
    L.post_attn_norm = loader.Vector(BlockName(il, "post_attention_norm.weight"), n_embd);

    L.act = FfnActivation::kGelu;
    if (n_ff[il] < 1) loader.Fail("layer ", il, ": ", loader.Key("feed_forward_length"), " must be positive");
    L.ffn_norm = loader.Vector(BlockName(il, "ffn_norm.weight"), n_embd);
    L.ffn = BindDenseFfn(loader, il, n_embd, n_ff[il]);
    L.post_ffn_norm = loader.Vector(BlockName(il, "post_ffw_norm.weight"), n_embd);
    if (const float* scale = loader.OptionalVector(BlockName(il, "layer_output_scale.weight"), 1)) {
      L.output_scale = *scale;
    }
    if (loader.Find(BlockName(il, "ffn_gate_inp.weight")) != nullptr) {
      // The dense MLP stays beside the experts, with its own post-norm.
      const ExpertKeys experts = ReadExpertKeys(loader, n_ff[il]);
      MixtureOfExperts& m = L.moe;
      m.n_expert = experts.n_expert;
      m.n_used = experts.n_used;
      m.router = loader.Matrix(BlockName(il, "ffn_gate_inp.weight"), n_embd, m.n_expert);
      L.router_input_scale = loader.Vector(BlockName(il, "ffn_gate_inp.scale"), n_embd);
      loader.GateUpExperts(il, n_embd, experts.n_ff, m.n_expert, m.gate, m.up);
      m.down = loader.Experts(BlockName(il, "ffn_down_exps.weight"), experts.n_ff, n_embd, m.n_expert);
      m.expert_scale = loader.OptionalVector(BlockName(il, "ffn_down_exps.scale"), m.n_expert);
      L.post_ffn_norm_dense = loader.Vector(BlockName(il, "post_ffw_norm_1.weight"), n_embd);
      L.pre_ffn_norm_experts = loader.Vector(BlockName(il, "pre_ffw_norm_2.weight"), n_embd);
      L.post_ffn_norm_experts = loader.Vector(BlockName(il, "post_ffw_norm_2.weight"), n_embd);
    }
    if (E > 0) {
      L.per_layer_input.gate = loader.Matrix(BlockName(il, "inp_gate.weight"), n_embd, E);
      L.per_layer_input.proj = loader.Matrix(BlockName(il, "proj.weight"), E, n_embd);
      L.per_layer_input.post_norm = loader.Vector(BlockName(il, "post_norm.weight"), n_embd);
    }
  }
}

// llama.cpp src/models/gemma4.cpp, as fixtures/models2/README.md writes it.
void RunGemma4Layer(ForwardPass& p, const Layer& L, int il) {
  p.RmsNorm(p.residual(), L.attn_norm, p.normed());
  p.Attention(L, il, p.normed(), p.branch());
  p.RmsNorm(p.branch(), L.post_attn_norm, p.branch());
  p.Add(p.residual(), p.branch());  // a

  p.RmsNorm(p.residual(), L.ffn_norm, p.normed());
  p.Ffn(L.ffn, L.act, p.normed(), p.branch());
  if (L.moe.present()) {
    p.RmsNorm(p.branch(), L.post_ffn_norm_dense, p.branch());
    // The router reads rms(a) / sqrt(n_embd) * scale; the experts rms(a, pre_ffw_norm_2).
    p.RmsNorm(p.residual(), nullptr, p.normed2());
    p.Scale(p.normed2(), 1.0f / std::sqrt(static_cast<float>(p.model().hparams().n_embd)));
    p.Multiply(p.normed2(), L.router_input_scale);
    p.RmsNorm(p.residual(), L.pre_ffn_norm_experts, p.normed());
    p.Experts(L.moe, il, L.act, p.normed(), p.normed2(), p.branch2());
    p.RmsNorm(p.branch2(), L.post_ffn_norm_experts, p.branch2());
    p.Add(p.branch(), p.branch2());
  }
  p.RmsNorm(p.branch(), L.post_ffn_norm, p.branch());
  p.Add(p.residual(), p.branch());

  if (L.per_layer_input.present()) p.AddPerLayerInput(L, il);
  if (L.output_scale != 1.0f) p.Scale(p.residual(), L.output_scale);
}

}  // namespace

extern const Architecture kGemma4;
const Architecture kGemma4 = {"gemma4", LoadGemma4, RunGemma4Layer};

}  // namespace kakeya
