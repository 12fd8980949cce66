// DeepSeek-V4 (deepseek4, docs/formats/deepseek4.md): a residual of four
// hyper-connection streams mixed around every sub-layer; attention with one
// key head that is also the value head, over a raw window and compressed
// blocks (model/forward_pass_deepseek4.cc, cache/compressed_kv.h); a
// mixture of experts routed by sqrt(softplus) scores, or by the token id in
// the first layers, with a clamped SwiGLU and an ungated shared expert.
#include <algorithm>
#include <cmath>
#include <numbers>

#include "base/portable_math.h"
#include "model/arch/architecture.h"
#include "model/forward_pass.h"
#include "model/model_loader.h"

namespace kakeya {
namespace {

struct Deepseek4Keys {
  int n_head, head_dim, n_rot, q_lora, window, groups, o_lora;
  int index_heads = 0, index_dim = 0, index_top_k = 0, n_hash;
  std::vector<int> ratios;
  std::vector<float> clamp_experts, clamp_shared;
  YarnRope raw_rope, compressed_rope;
};

// A per-layer float: a scalar, or an array of at least n_layer entries.
std::vector<float> PerLayerF32(const ModelLoader& loader, std::string_view suffix, int n_layer) {
  const std::string key = loader.Key(suffix);
  const GgufValue* v = loader.gguf().Find(key);
  if (v == nullptr) loader.Fail(key, " is missing");
  if (v->type != GgufType::kArray) return std::vector<float>(n_layer, loader.gguf().GetF32(key));
  std::vector<float> values = loader.gguf().GetF32Array(key);
  if (static_cast<int>(values.size()) < n_layer) loader.Fail(key, " has ", values.size(), " entries; block_count is ", n_layer);
  values.resize(n_layer);
  return values;
}

// The compressed layers' RoPE: its own base, and YaRN when the file asks
// for it, with ggml's correction dimensions (ggml_rope_yarn_corr_dims, beta
// fast 32, slow 1) and the attention factor that cancels YaRN's magnitude.
YarnRope CompressedRope(const ModelLoader& loader, int n_rot) {
  YarnRope r;
  r.dims = n_rot;
  r.base = loader.F32("attention.compress_rope_freq_base");
  const std::string_view scaling = loader.gguf().FindString(loader.Key("rope.scaling.type")).value_or("none");
  if (scaling == "none") return r;
  if (scaling != "yarn") loader.Fail(loader.Key("rope.scaling.type"), " = '", scaling, "' is not supported (yarn, none)");
  const float factor = loader.F32("rope.scaling.factor");
  const int n_ctx_orig = loader.PositiveInt("rope.scaling.original_context_length");
  if (!(factor >= 1.0f) || !std::isfinite(factor)) loader.Fail(loader.Key("rope.scaling.factor"), " = ", factor, " is out of range");
  r.freq_scale = 1.0f / factor;
  r.ext_factor = 1.0f;
  r.attn_factor = 1.0f / (1.0f + 0.1f * static_cast<float>(PortableLog(1.0f / r.freq_scale)));
  auto corr_dim = [&](float beta) {
    return static_cast<float>(n_rot) *
           static_cast<float>(PortableLog(static_cast<float>(n_ctx_orig) / (beta * 2.0f * std::numbers::pi_v<float>))) /
           (2.0f * static_cast<float>(PortableLog(r.base)));
  };
  r.corr_low = std::max(0.0f, std::floor(corr_dim(32.0f)));
  r.corr_high = std::min(static_cast<float>(n_rot - 1), std::ceil(corr_dim(1.0f)));
  return r;
}

Deepseek4Keys ReadKeys(const ModelLoader& loader, const HParams& hp) {
  Deepseek4Keys k;
  k.n_head = loader.PositiveInt("attention.head_count");
  if (const int kv = loader.PositiveInt("attention.head_count_kv"); kv != 1) {
    loader.Fail(loader.Key("attention.head_count_kv"), " = ", kv, ": deepseek4 has one key/value head");
  }
  k.head_dim = loader.PositiveInt("attention.key_length");
  if (const int v = loader.PositiveInt("attention.value_length"); v != k.head_dim) {
    loader.Fail(loader.Key("attention.value_length"), " = ", v, " differs from key_length ", k.head_dim);
  }
  k.n_rot = loader.OptionalInt("rope.dimension_count", k.head_dim);
  k.q_lora = loader.PositiveInt("attention.q_lora_rank");
  k.window = loader.PositiveInt("attention.sliding_window");
  k.groups = loader.PositiveInt("attention.output_group_count");
  k.o_lora = loader.PositiveInt("attention.output_lora_rank");
  if (k.n_head % k.groups != 0) {
    loader.Fail(loader.Key("attention.output_group_count"), " = ", k.groups, " does not divide ", k.n_head, " heads");
  }
  const std::string ratios_key = loader.Key("attention.compress_ratios");
  const std::vector<int64_t> ratios = loader.gguf().GetIntArray(ratios_key);
  if (static_cast<int>(ratios.size()) < hp.n_layer) {
    loader.Fail(ratios_key, " has ", ratios.size(), " entries; block_count is ", hp.n_layer);
  }
  for (int il = 0; il < hp.n_layer; ++il) {
    if (ratios[il] != 0 && ratios[il] != 4 && ratios[il] != 128) {
      loader.Fail(ratios_key, "[", il, "] = ", ratios[il], " is not a compression ratio (0, 4 or 128)");
    }
    k.ratios.push_back(static_cast<int>(ratios[il]));
  }
  // The indexer and the compressed layers' RoPE only where a layer compresses
  // (a DSpark drafter's stages do not).
  const bool compresses = std::any_of(k.ratios.begin(), k.ratios.end(), [](int r) { return r != 0; });
  if (std::find(k.ratios.begin(), k.ratios.end(), 4) != k.ratios.end()) {
    k.index_heads = loader.PositiveInt("attention.indexer.head_count");
    k.index_dim = loader.PositiveInt("attention.indexer.key_length");
    k.index_top_k = loader.OptionalInt("attention.indexer.top_k", 0);
    if (k.index_top_k < 1) {
      loader.Fail(loader.Key("attention.indexer.top_k"), " = ", k.index_top_k, " must be at least 1");
    }
  }
  if (k.n_rot % 2 != 0 || k.n_rot > k.head_dim || (k.index_dim > 0 && k.n_rot > k.index_dim) || k.n_rot > 512) {
    loader.Fail(loader.Key("rope.dimension_count"), " = ", k.n_rot, " must be even and at most the key lengths (",
                k.head_dim, ", indexer ", k.index_dim, ")");
  }
  k.n_hash = loader.OptionalInt("hash_layer_count", 0);
  if (const uint32_t f = loader.FindU32("expert_gating_func").value_or(0); f != 4) {
    loader.Fail(loader.Key("expert_gating_func"), " = ", f, ": deepseek4 routes by sqrt(softplus) (4)");
  }
  k.clamp_experts = PerLayerF32(loader, "swiglu_clamp_exp", hp.n_layer);
  k.clamp_shared = loader.gguf().Find(loader.Key("swiglu_clamp_shexp")) != nullptr
                       ? PerLayerF32(loader, "swiglu_clamp_shexp", hp.n_layer)
                       : k.clamp_experts;
  k.raw_rope.dims = k.n_rot;
  k.raw_rope.base = loader.FindF32("rope.freq_base").value_or(10000.0f);
  k.compressed_rope = compresses ? CompressedRope(loader, k.n_rot) : k.raw_rope;
  for (float base : {k.raw_rope.base, k.compressed_rope.base}) {
    if (!(base > 0.0f) || !std::isfinite(base)) loader.Fail("rope base ", base, " is out of range");
  }
  return k;
}

HyperMixer BindMixer(const ModelLoader& loader, const std::string& prefix, int n_embd, int n_mix, int n_scale) {
  return {loader.Matrix(prefix + "fn.weight", int64_t{kHyperStreams} * n_embd, n_mix),
          loader.Vector(prefix + "base.weight", n_mix), loader.Vector(prefix + "scale.weight", n_scale)};
}

Compressor BindCompressor(const ModelLoader& loader, int il, const std::string& prefix, int ratio, int dim, int n_embd) {
  Compressor c;
  c.ratio = ratio;
  c.dim = dim;
  c.kv = loader.Matrix(BlockName(il, prefix + "kv.weight"), n_embd, c.width());
  c.gate = loader.Matrix(BlockName(il, prefix + "gate.weight"), n_embd, c.width());
  const GgufTensor& ape = loader.Require(BlockName(il, prefix + "ape.weight"));
  if (ape.type != DType::kF32 || ape.n_dims != 2 || ape.ne[0] != c.width() || ape.ne[1] != ratio) {
    loader.Fail("tensor '", ape.name, "' must be F32 [", c.width(), ", ", ratio, "]");
  }
  c.ape = reinterpret_cast<const float*>(ape.data);
  c.norm = loader.Vector(BlockName(il, prefix + "norm.weight"), dim);
  return c;
}

void BindLayer(const ModelLoader& loader, const HParams& hp, const Deepseek4Keys& k, const ExpertKeys& experts,
               int n_shared, int il, Layer& L) {
  const int E = hp.n_embd, H = k.n_head, D = k.head_dim, ratio = k.ratios[il];
  AttentionSpec& a = L.attn;
  a.n_head = H, a.n_head_kv = 1, a.head_dim = D, a.value_dim = D, a.window = k.window, a.kv_layer = il;
  a.scale = 1.0f / std::sqrt(static_cast<float>(D));
  L.attn_norm = loader.Vector(BlockName(il, "attn_norm.weight"), E);
  HybridAttention& h = L.hybrid;
  h.q_a = loader.Matrix(BlockName(il, "attn_q_a.weight"), E, k.q_lora);
  h.q_a_norm = loader.Vector(BlockName(il, "attn_q_a_norm.weight"), k.q_lora);
  h.q_b = loader.Matrix(BlockName(il, "attn_q_b.weight"), k.q_lora, int64_t{H} * D);
  h.kv = loader.Matrix(BlockName(il, "attn_kv.weight"), E, D);
  h.kv_norm = loader.Vector(BlockName(il, "attn_kv_a_norm.weight"), D);
  h.sinks = loader.Vector(BlockName(il, "attn_sinks.weight"), H);
  h.out_a = loader.OutputGroups(BlockName(il, "attn_output_a.weight"), int64_t{H} / k.groups * D, k.o_lora, k.groups);
  h.out_b = loader.Matrix(BlockName(il, "attn_output_b.weight"), int64_t{k.groups} * k.o_lora, E);
  h.rope = ratio == 0 ? k.raw_rope : k.compressed_rope;
  if (ratio != 0) h.blocks = BindCompressor(loader, il, "attn_compressor_", ratio, D, E);
  if (ratio == 4) {
    h.index_blocks = BindCompressor(loader, il, "indexer_compressor_", 4, k.index_dim, E);
    h.index_q_b = loader.Matrix(BlockName(il, "indexer.attn_q_b.weight"), k.q_lora, int64_t{k.index_heads} * k.index_dim);
    h.index_weights = loader.Matrix(BlockName(il, "indexer.proj.weight"), E, k.index_heads);
    h.index_heads = k.index_heads;
    h.index_top_k = k.index_top_k;
  }
  L.hc_attn = BindMixer(loader, BlockName(il, "hc_attn_"), E, kHyperMixes, 3);
  L.hc_ffn = BindMixer(loader, BlockName(il, "hc_ffn_"), E, kHyperMixes, 3);

  L.act = FfnActivation::kSilu;
  L.ffn_norm = loader.Vector(BlockName(il, "ffn_norm.weight"), E);
  MixtureOfExperts& m = L.moe;
  m.n_expert = experts.n_expert;
  m.n_used = experts.n_used;
  m.gating = ExpertGating::kSqrtSoftplus;
  m.normalize_weights = loader.FindBool("expert_weights_norm").value_or(false);
  m.weight_scale = loader.FindF32("expert_weights_scale").value_or(1.0f);
  if (m.weight_scale == 0.0f) m.weight_scale = 1.0f;  // absent or 0: 1, as llama.cpp
  m.router = loader.Matrix(BlockName(il, "ffn_gate_inp.weight"), E, m.n_expert);
  if (il < k.n_hash) {
    const GgufTensor& t = loader.Require(BlockName(il, "ffn_gate_tid2eid.weight"));
    if (t.type != DType::kI32 || t.n_dims != 2 || t.ne[0] != m.n_used || t.ne[1] != hp.n_vocab) {
      loader.Fail("tensor '", t.name, "' must be I32 [", m.n_used, ", ", hp.n_vocab, "]");
    }
    m.token_experts = reinterpret_cast<const int32_t*>(t.data);
    for (int64_t i = 0; i < int64_t{m.n_used} * hp.n_vocab; ++i) {
      if (m.token_experts[i] < 0 || m.token_experts[i] >= m.n_expert) {
        loader.Fail("tensor '", t.name, "': token ", i / m.n_used, " routes to expert ", m.token_experts[i],
                    ", out of range (expert_count ", m.n_expert, ")");
      }
    }
  } else {
    m.selection_bias = loader.Vector(BlockName(il, "exp_probs_b.bias"), m.n_expert);
  }
  loader.GateUpExperts(il, E, experts.n_ff, m.n_expert, m.gate, m.up);
  m.down = loader.Experts(BlockName(il, "ffn_down_exps.weight"), experts.n_ff, E, m.n_expert);
  m.clamp = k.clamp_experts[il] > 1e-6f ? k.clamp_experts[il] : 0.0f;
  L.shared_expert = BindDenseFfn(loader, il, E, experts.n_ff * n_shared, "_shexp");
  L.shared_expert.clamp = k.clamp_shared[il] > 1e-6f ? k.clamp_shared[il] : 0.0f;
}

// The streams' keys and every layer, for a deepseek4 file and a DSpark
// drafter's stages alike.
void LoadStreamsAndLayers(const ModelLoader& loader, Model& model, const Deepseek4Keys& k) {
  HParams& hp = model.mutable_hparams();
  if (const int hc = loader.PositiveInt("hyper_connection.count"); hc != kHyperStreams) {
    loader.Fail(loader.Key("hyper_connection.count"), " = ", hc, ": deepseek4 files have ", kHyperStreams, " streams");
  }
  hp.n_hyper = kHyperStreams;
  hp.hyper_sinkhorn_iterations = loader.PositiveInt("hyper_connection.sinkhorn_iterations");
  hp.hyper_eps = loader.F32("hyper_connection.epsilon");
  if (!(hp.hyper_eps >= 0.0f) || !std::isfinite(hp.hyper_eps)) {
    loader.Fail(loader.Key("hyper_connection.epsilon"), " = ", hp.hyper_eps, " is out of range");
  }
  const ExpertKeys experts = ReadExpertKeys(loader, 0);
  const int n_shared = loader.OptionalInt("expert_shared_count", 0);
  if (n_shared < 1 || n_shared > 64) loader.Fail(loader.Key("expert_shared_count"), " = ", n_shared, " is out of range (1 .. 64)");
  model.hc_head = BindMixer(loader, "output_hc_", hp.n_embd, kHyperStreams, 1);
  model.layers.resize(hp.n_layer);
  for (int il = loader.FirstBlock(); il < hp.n_layer; ++il) {
    BindLayer(loader, hp, k, experts, n_shared, il, model.layers[il]);
  }
}

void LoadDeepseek4(const ModelLoader& loader, Model& model) {
  HParams& hp = model.mutable_hparams();
  ReadCommonKeys(loader, hp);
  const Deepseek4Keys k = ReadKeys(loader, hp);
  if (k.n_hash >= loader.TrunkLayers()) {
    loader.Fail(loader.Key("hash_layer_count"), " = ", k.n_hash, " leaves no trunk layer routed by its scores");
  }
  BindEmbeddingsAndHead(loader, model, /*tied=*/false);
  LoadStreamsAndLayers(loader, model, k);
}

// A DSpark drafter's stages (docs/formats/deepseek4.md 8): deepseek4 layers
// with the raw window only and no hash routing, whose block rows see one
// another unless dflash.attention.causal; the embeddings and head are the
// drafter's own where it has them (else the drafter lends the target's).
void LoadDSparkStages(const ModelLoader& loader, Model& model) {
  HParams& hp = model.mutable_hparams();
  ReadCommonKeys(loader, hp);
  const std::string ratios_key = loader.Key("attention.compress_ratios");
  const std::vector<int64_t> ratios = loader.gguf().GetIntArray(ratios_key);
  for (size_t il = 0; il < ratios.size(); ++il) {
    if (ratios[il] != 0) {
      loader.Fail(ratios_key, "[", il, "] = ", ratios[il], ": a DSpark drafter's stages attend to the raw window only (0)");
    }
  }
  const Deepseek4Keys k = ReadKeys(loader, hp);
  if (k.n_hash != 0) loader.Fail(loader.Key("hash_layer_count"), " = ", k.n_hash, ": DSpark stages route by scores");
  model.output_norm = loader.Vector("output_norm.weight", hp.n_embd);
  model.token_embd = loader.OptionalMatrix("token_embd.weight", hp.n_embd, hp.n_vocab);
  model.output = loader.OptionalMatrix("output.weight", hp.n_embd, hp.n_vocab);
  LoadStreamsAndLayers(loader, model, k);
  const bool causal = loader.FindBool("attention.causal").value_or(false);
  for (Layer& L : model.layers) L.hybrid.causal = causal;
}

void RunDeepseek4Layer(ForwardPass& p, const Layer& L, int il) {
  p.HyperPre(L.hc_attn, p.normed());
  p.RmsNorm(p.normed(), L.attn_norm, p.normed());
  p.Hybrid(L, il, p.normed(), p.branch());
  p.HyperPost(p.branch());
  p.HyperPre(L.hc_ffn, p.normed());
  p.RmsNorm(p.normed(), L.ffn_norm, p.normed());
  p.Experts(L.moe, il, L.act, p.normed(), p.normed(), p.branch());
  p.Ffn(L.shared_expert, L.act, p.normed(), p.branch2());
  p.Add(p.branch(), p.branch2());
  p.HyperPost(p.branch());
}

}  // namespace

extern const Architecture kDeepseek4;
const Architecture kDeepseek4 = {"deepseek4", LoadDeepseek4, RunDeepseek4Layer};
const Architecture kDSparkStages = {"dflash", LoadDSparkStages, RunDeepseek4Layer};

}  // namespace kakeya
