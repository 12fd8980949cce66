// GLM-4.5 / 4.6 (glm4moe, docs/formats/architectures.md 3.6): attention with q/k/v biases and
// RoPE on part of each head; the first layers dense, the others a mixture
// with sigmoid routing (a selection bias, the weights renormalized and
// scaled) beside an always-on shared expert. The NextN (MTP) blocks after the
// trunk are ordinary layers of this kind; Model::Load moves them out of the
// trunk's forward for the MTP drafter (docs/formats/drafters.md 5.1).
#include "model/arch/architecture.h"
#include "model/forward_pass.h"
#include "model/model_loader.h"

namespace kakeya {
namespace {

void BindGlmLayer(const ModelLoader& loader, const HParams& hp, const AttentionKeys& attn, const ExpertKeys& experts,
                  int n_ff, int n_dense_lead, int n_shared, ExpertGating gating, int il, Layer& L) {
  L.attn = UniformAttention(attn, RopeStyle::kNeox, il);
  BindAttention(loader, il, hp.n_embd, QkNorm::kOptional, L);
  L.act = FfnActivation::kSilu;
  // The pre-FFN norm is stored under the name post_attention_norm.
  L.ffn_norm = loader.Vector(BlockName(il, "post_attention_norm.weight"), hp.n_embd);
  if (il < n_dense_lead) {
    L.ffn = BindDenseFfn(loader, il, hp.n_embd, n_ff);
    return;
  }
  MixtureOfExperts& m = L.moe;
  m.n_expert = experts.n_expert;
  m.n_used = experts.n_used;
  m.gating = gating;
  m.normalize_weights = loader.FindBool("expert_weights_norm").value_or(false);
  m.weight_scale = loader.FindF32("expert_weights_scale").value_or(1.0f);
  if (m.weight_scale == 0.0f) m.weight_scale = 1.0f;  // absent or 0: 1, as llama.cpp
  m.router = loader.Matrix(BlockName(il, "ffn_gate_inp.weight"), hp.n_embd, m.n_expert);
  m.selection_bias = loader.Vector(BlockName(il, "exp_probs_b.bias"), m.n_expert);
  loader.GateUpExperts(il, hp.n_embd, experts.n_ff, m.n_expert, m.gate, m.up);
  m.down = loader.Experts(BlockName(il, "ffn_down_exps.weight"), experts.n_ff, hp.n_embd, m.n_expert);
  if (n_shared > 0) L.shared_expert = BindDenseFfn(loader, il, hp.n_embd, experts.n_ff * n_shared, "_shexp");
}

void LoadGlm4Moe(const ModelLoader& loader, Model& model) {
  HParams& hp = model.mutable_hparams();
  ReadCommonKeys(loader, hp);
  const AttentionKeys attn = ReadAttentionKeys(loader, hp.n_embd);
  const int n_ff = loader.PositiveInt("feed_forward_length");
  const ExpertKeys experts = ReadExpertKeys(loader, n_ff);
  const int n_dense_lead = loader.OptionalInt("leading_dense_block_count", 0);
  const uint32_t shared_count = loader.gguf().GetU32(loader.Key("expert_shared_count"));
  if (shared_count > 64) loader.Fail(loader.Key("expert_shared_count"), " = ", shared_count, " is out of range");
  const int n_shared = static_cast<int>(shared_count);
  // expert_gating_func: 1 softmax, 2 sigmoid; absent (0): sigmoid, as llama.cpp.
  const uint32_t gating_key = loader.FindU32("expert_gating_func").value_or(0);
  if (gating_key > 2) loader.Fail(loader.Key("expert_gating_func"), " = ", gating_key, " is not supported (1, 2)");
  const ExpertGating gating = gating_key == 1 ? ExpertGating::kSoftmax : ExpertGating::kSigmoid;

  BindEmbeddingsAndHead(loader, model, /*tied=*/false);
  model.layers.resize(hp.n_layer);
  for (int il = loader.FirstBlock(); il < hp.n_layer; ++il) {
    BindGlmLayer(loader, hp, attn, experts, n_ff, n_dense_lead, n_shared, gating, il, model.layers[il]);
  }
}

void RunGlm4MoeLayer(ForwardPass& p, const Layer& L, int il) {
  p.RmsNorm(p.residual(), L.attn_norm, p.normed());
  p.Attention(L, il, p.normed(), p.branch());
  p.Add(p.residual(), p.branch());
  p.RmsNorm(p.residual(), L.ffn_norm, p.normed());
  if (L.moe.present()) {
    p.Experts(L.moe, il, L.act, p.normed(), p.normed(), p.branch());
    if (L.shared_expert.present()) {
      p.Ffn(L.shared_expert, L.act, p.normed(), p.branch2());
      p.Add(p.branch(), p.branch2());
    }
  } else {
    p.Ffn(L.ffn, L.act, p.normed(), p.branch());
  }
  p.Add(p.residual(), p.branch());
}

}  // namespace

extern const Architecture kGlm4Moe;
const Architecture kGlm4Moe = {"glm4moe", LoadGlm4Moe, RunGlm4MoeLayer};

}  // namespace kakeya
