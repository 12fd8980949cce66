// Qwen3.5 / Qwen3.6 (qwen35 dense, qwen35moe; docs/formats/qwen35.md): of
// every few layers all but the last are Gated DeltaNet (linear attention
// with a recurrent state, forward_pass_deltanet.cc), the last full
// attention with q/k norms, partial RoPE and a sigmoid gate on its output.
// Then a SwiGLU FFN, or a softmax mixture of experts beside a shared expert
// whose output a sigmoid of the input scales. The MTP block after the trunk
// is a full-attention layer of this kind (Model::Load moves it out of the
// trunk's forward).
#include <cmath>
#include <vector>

#include "model/arch/architecture.h"
#include "model/forward_pass.h"
#include "model/model_loader.h"

namespace kakeya {
namespace {

struct DeltaNetKeys {
  int conv_kernel, inner_size, state_size, n_v_heads, n_k_heads;
};

DeltaNetKeys ReadDeltaNetKeys(const ModelLoader& loader) {
  DeltaNetKeys k;
  k.conv_kernel = loader.PositiveInt("ssm.conv_kernel");
  k.inner_size = loader.PositiveInt("ssm.inner_size");
  k.state_size = loader.PositiveInt("ssm.state_size");
  k.n_v_heads = loader.PositiveInt("ssm.time_step_rank");
  k.n_k_heads = loader.PositiveInt("ssm.group_count");
  if (k.conv_kernel > 64) loader.Fail(loader.Key("ssm.conv_kernel"), " = ", k.conv_kernel, " is out of range (1 .. 64)");
  // The rule's state is square per head: the value heads' width
  // (inner_size / time_step_rank) must be the key heads' (state_size).
  if (k.inner_size % k.n_v_heads != 0 || k.inner_size / k.n_v_heads != k.state_size) {
    loader.Fail(loader.Key("ssm.inner_size"), " = ", k.inner_size, " over ", loader.Key("ssm.time_step_rank"), " = ",
                k.n_v_heads, " value heads must give heads of ", loader.Key("ssm.state_size"), " = ", k.state_size);
  }
  if (k.n_v_heads % k.n_k_heads != 0) {
    loader.Fail(loader.Key("ssm.group_count"), " = ", k.n_k_heads, " key heads must divide ",
                loader.Key("ssm.time_step_rank"), " = ", k.n_v_heads, " value heads");
  }
  if (k.state_size > 1024) loader.Fail(loader.Key("ssm.state_size"), " = ", k.state_size, " is out of range");
  return k;
}

// Which blocks are recurrent: attention.recurrent_layers (a bool per block),
// else every full_attention_interval-th block is full attention (default 4).
std::vector<bool> RecurrentLayers(const ModelLoader& loader, int n_block, int n_trunk) {
  const std::string key = loader.Key("attention.recurrent_layers");
  std::vector<bool> recurrent(n_block);
  if (const GgufValue* v = loader.gguf().Find(key); v != nullptr) {
    if (v->type != GgufType::kArray || v->elem_type != GgufType::kBool) loader.Fail(key, " must be an array of bool");
    if (v->count != static_cast<uint64_t>(n_block)) {
      loader.Fail(key, " has ", v->count, " entries; block_count is ", n_block);
    }
    for (int il = 0; il < n_block; ++il) recurrent[il] = v->array_data[il] != 0;
  } else {
    const int interval = loader.OptionalInt("full_attention_interval", 4);
    if (interval < 1) loader.Fail(loader.Key("full_attention_interval"), " must be at least 1");
    for (int il = 0; il < n_trunk; ++il) recurrent[il] = (il + 1) % interval != 0;
  }
  for (int il = n_trunk; il < n_block; ++il) {
    if (recurrent[il]) loader.Fail(key, ": the MTP block ", il, " must be a full-attention layer");
  }
  return recurrent;
}

// The reference rotates text with interleaved M-RoPE whose sections all
// carry the token's position, except a fourth one that carries 0; a pair
// the sections leave to the fourth would not rotate. Ordinary NeoX RoPE is
// exactly that when no pair does, which holds for the released models.
void CheckRopeSections(const ModelLoader& loader, int rope_dims) {
  const std::string key = loader.Key("rope.dimension_sections");
  const std::vector<int64_t> sections = loader.gguf().GetIntArray(key);
  if (sections.size() != 4) loader.Fail(key, " has ", sections.size(), " entries; expected 4");
  int64_t sum = 0;
  for (int64_t s : sections) {
    if (s < 0 || s > rope_dims) loader.Fail(key, " has an entry ", s, " out of range");
    sum += s;
  }
  if (sum <= 0) loader.Fail(key, " sums to 0");
  for (int pair = 0; pair < rope_dims / 2; ++pair) {
    const int64_t sector = pair % sum;
    const bool rotates = (sector % 3 == 0 && sector < 3 * sections[0]) ||
                         (sector % 3 == 1 && sector < 3 * sections[1]) ||
                         (sector % 3 == 2 && sector < 3 * sections[2]);
    if (!rotates) {
      loader.Fail(key, " leaves rotated pair ", pair, " to the fourth section (images' positions), which kakeya "
                  "does not implement for text");
    }
  }
}

void BindGatedAttention(const ModelLoader& loader, int il, int n_embd, Layer& L) {
  const AttentionSpec& a = L.attn;
  L.wq = loader.Matrix(BlockName(il, "attn_q.weight"), n_embd, 2 * a.q_width());
  L.wk = loader.Matrix(BlockName(il, "attn_k.weight"), n_embd, a.k_width());
  L.wv = loader.Matrix(BlockName(il, "attn_v.weight"), n_embd, a.v_width());
  L.wo = loader.Matrix(BlockName(il, "attn_output.weight"), a.out_width(), n_embd);
  L.q_norm = loader.Vector(BlockName(il, "attn_q_norm.weight"), a.head_dim);
  L.k_norm = loader.Vector(BlockName(il, "attn_k_norm.weight"), a.head_dim);
}

void BindDeltaNet(const ModelLoader& loader, int il, int n_embd, const DeltaNetKeys& keys, GatedDeltaNet& d) {
  d.n_k_heads = keys.n_k_heads;
  d.n_v_heads = keys.n_v_heads;
  d.head_k_dim = d.head_v_dim = keys.state_size;
  d.conv_kernel = keys.conv_kernel;
  d.qkv = loader.Matrix(BlockName(il, "attn_qkv.weight"), n_embd, d.conv_channels());
  d.gate = loader.Matrix(BlockName(il, "attn_gate.weight"), n_embd, d.value_width());
  d.beta = loader.Matrix(BlockName(il, "ssm_beta.weight"), n_embd, d.n_v_heads);
  d.alpha = loader.Matrix(BlockName(il, "ssm_alpha.weight"), n_embd, d.n_v_heads);
  const GgufTensor& conv = loader.Require(BlockName(il, "ssm_conv1d.weight"));
  if (conv.type != DType::kF32 || conv.n_dims != 2 || conv.ne[0] != d.conv_kernel || conv.ne[1] != d.conv_channels()) {
    loader.Fail("tensor '", conv.name, "' must be F32 [", d.conv_kernel, ", ", d.conv_channels(), "]");
  }
  d.conv = reinterpret_cast<const float*>(conv.data);
  d.dt_bias = loader.Vector(BlockName(il, "ssm_dt.bias"), d.n_v_heads);
  d.decay = loader.Vector(BlockName(il, "ssm_a"), d.n_v_heads);
  for (int j = 0; j < d.n_v_heads; ++j) {
    // -exp(A_log): a decay factor e^(softplus * a) above 1 would grow the state without bound.
    if (!(d.decay[j] < 0.0f) || !std::isfinite(d.decay[j])) {
      loader.Fail("tensor '", BlockName(il, "ssm_a"), "' entry ", j, " = ", d.decay[j], " must be negative");
    }
  }
  d.norm = loader.Vector(BlockName(il, "ssm_norm.weight"), d.head_v_dim);
  d.out = loader.Matrix(BlockName(il, "ssm_out.weight"), d.value_width(), n_embd);
}

void LoadQwen35Family(const ModelLoader& loader, Model& model, bool experts) {
  HParams& hp = model.mutable_hparams();
  ReadCommonKeys(loader, hp);
  const AttentionKeys attn = ReadAttentionKeys(loader, hp.n_embd);
  if (attn.head_dim != attn.value_dim) {
    loader.Fail(loader.Key("attention.key_length"), " = ", attn.head_dim, " and ", loader.Key("attention.value_length"),
                " = ", attn.value_dim, " must be equal");
  }
  CheckRopeSections(loader, attn.rope_dims);
  const DeltaNetKeys deltanet = ReadDeltaNetKeys(loader);
  const int n_ff = experts ? loader.OptionalInt("feed_forward_length", 0) : loader.PositiveInt("feed_forward_length");
  const ExpertKeys expert_keys = experts ? ReadExpertKeys(loader, n_ff) : ExpertKeys{};
  const int n_ff_shared = experts ? loader.OptionalInt("expert_shared_feed_forward_length", n_ff) : 0;
  if (experts && n_ff_shared < 1) {
    loader.Fail(loader.Key("expert_shared_feed_forward_length"), " (or feed_forward_length) must be positive");
  }
  const std::vector<bool> recurrent = RecurrentLayers(loader, hp.n_layer, loader.TrunkLayers());
  BindEmbeddingsAndHead(loader, model, /*tied=*/false);

  model.layers.resize(hp.n_layer);
  for (int il = loader.FirstBlock(); il < hp.n_layer; ++il) {
    Layer& L = model.layers[il];
    L.attn_norm = loader.Vector(BlockName(il, "attn_norm.weight"), hp.n_embd);
    if (recurrent[il]) {
      BindDeltaNet(loader, il, hp.n_embd, deltanet, L.deltanet);
    } else {
      L.attn = UniformAttention(attn, RopeStyle::kNeox, il);
      L.attn.gated_output = true;
      BindGatedAttention(loader, il, hp.n_embd, L);
    }
    L.act = FfnActivation::kSilu;
    // The pre-FFN norm is stored under the name post_attention_norm.
    L.ffn_norm = loader.Vector(BlockName(il, "post_attention_norm.weight"), hp.n_embd);
    if (!experts) {
      L.ffn = BindDenseFfn(loader, il, hp.n_embd, n_ff);
      continue;
    }
    MixtureOfExperts& m = L.moe;
    m.n_expert = expert_keys.n_expert;
    m.n_used = expert_keys.n_used;
    m.router = loader.Matrix(BlockName(il, "ffn_gate_inp.weight"), hp.n_embd, m.n_expert);
    loader.GateUpExperts(il, hp.n_embd, expert_keys.n_ff, m.n_expert, m.gate, m.up);
    m.down = loader.Experts(BlockName(il, "ffn_down_exps.weight"), expert_keys.n_ff, hp.n_embd, m.n_expert);
    L.shared_expert = BindDenseFfn(loader, il, hp.n_embd, n_ff_shared, "_shexp");
    L.shared_expert_gate = loader.Vector(BlockName(il, "ffn_gate_inp_shexp.weight"), hp.n_embd);
  }
}

void LoadQwen35(const ModelLoader& loader, Model& model) { LoadQwen35Family(loader, model, false); }
void LoadQwen35Moe(const ModelLoader& loader, Model& model) { LoadQwen35Family(loader, model, true); }

void RunQwen35Layer(ForwardPass& p, const Layer& L, int il) {
  p.RmsNorm(p.residual(), L.attn_norm, p.normed());
  if (L.deltanet.present()) {
    p.DeltaNet(L, il, p.normed(), p.branch());
  } else {
    p.Attention(L, il, p.normed(), p.branch());
  }
  p.Add(p.residual(), p.branch());
  p.RmsNorm(p.residual(), L.ffn_norm, p.normed());
  if (L.moe.present()) {
    p.Experts(L.moe, il, L.act, p.normed(), p.normed(), p.branch());
    p.Ffn(L.shared_expert, L.act, p.normed(), p.branch2());
    p.ScaleRowsBySigmoidOf(p.branch2(), L.shared_expert_gate, p.normed());
    p.Add(p.branch(), p.branch2());
  } else {
    p.Ffn(L.ffn, L.act, p.normed(), p.branch());
  }
  p.Add(p.residual(), p.branch());
}

}  // namespace

extern const Architecture kQwen35, kQwen35Moe;
const Architecture kQwen35 = {"qwen35", LoadQwen35, RunQwen35Layer};
const Architecture kQwen35Moe = {"qwen35moe", LoadQwen35Moe, RunQwen35Layer};

}  // namespace kakeya
