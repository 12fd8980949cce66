// The llama family (docs/formats/architectures.md 3.4, 3.6): llama (Llama 2/3,
// Mistral, SmolLM), qwen2, qwen3 and qwen3moe. Pre-norm attention, then a pre-norm SwiGLU FFN
// or a mixture of SwiGLU experts; they differ in RoPE pairing, biases, q/k
// norms and the experts.
#include "model/arch/architecture.h"
#include "model/forward_pass.h"
#include "model/model_loader.h"

namespace kakeya {
namespace {

struct Variant {
  RopeStyle rope_style;
  QkNorm qk_norm;
  bool experts;  // every layer a mixture (qwen3moe)
};

void LoadLlamaFamily(const ModelLoader& loader, Model& model, const Variant& v) {
  HParams& hp = model.mutable_hparams();
  ReadCommonKeys(loader, hp);
  const AttentionKeys attn = ReadAttentionKeys(loader, hp.n_embd);
  const int n_ff = v.experts ? loader.OptionalInt("feed_forward_length", 0)
                             : loader.PositiveInt("feed_forward_length");
  BindEmbeddingsAndHead(loader, model, /*tied=*/false);
  const float* rope_freqs = loader.OptionalVector("rope_freqs.weight", attn.rope_dims / 2);

  const ExpertKeys experts = v.experts ? ReadExpertKeys(loader, n_ff) : ExpertKeys{};
  model.layers.resize(hp.n_layer);
  for (int il = loader.FirstBlock(); il < hp.n_layer; ++il) {
    Layer& L = model.layers[il];
    L.attn = UniformAttention(attn, v.rope_style, il);
    L.attn.rope.freq_factors = rope_freqs;
    BindAttention(loader, il, hp.n_embd, v.qk_norm, L);
    L.act = FfnActivation::kSilu;
    L.ffn_norm = loader.Vector(BlockName(il, "ffn_norm.weight"), hp.n_embd);
    if (!v.experts) {
      L.ffn = BindDenseFfn(loader, il, hp.n_embd, n_ff);
      continue;
    }
    // qwen3moe: softmax routing, the chosen weights always renormalized.
    MixtureOfExperts& m = L.moe;
    m.n_expert = experts.n_expert;
    m.n_used = experts.n_used;
    m.router = loader.Matrix(BlockName(il, "ffn_gate_inp.weight"), hp.n_embd, m.n_expert);
    m.gate = loader.Experts(BlockName(il, "ffn_gate_exps.weight"), hp.n_embd, experts.n_ff, m.n_expert);
    m.up = loader.Experts(BlockName(il, "ffn_up_exps.weight"), hp.n_embd, experts.n_ff, m.n_expert);
    m.down = loader.Experts(BlockName(il, "ffn_down_exps.weight"), experts.n_ff, hp.n_embd, m.n_expert);
  }
}

void RunLlamaLayer(ForwardPass& p, const Layer& L, int il) {
  p.RmsNorm(p.residual(), L.attn_norm, p.normed());
  p.Attention(L, il, p.normed(), p.branch());
  p.Add(p.residual(), p.branch());
  p.RmsNorm(p.residual(), L.ffn_norm, p.normed());
  if (L.moe.present()) {
    p.Experts(L.moe, il, L.act, p.normed(), p.normed(), p.branch());
  } else {
    p.Ffn(L.ffn, L.act, p.normed(), p.branch());
  }
  p.Add(p.residual(), p.branch());
}

void LoadLlama(const ModelLoader& l, Model& m) { LoadLlamaFamily(l, m, {RopeStyle::kNormal, QkNorm::kNone, false}); }
void LoadQwen2(const ModelLoader& l, Model& m) { LoadLlamaFamily(l, m, {RopeStyle::kNeox, QkNorm::kNone, false}); }
void LoadQwen3(const ModelLoader& l, Model& m) { LoadLlamaFamily(l, m, {RopeStyle::kNeox, QkNorm::kRequired, false}); }
void LoadQwen3Moe(const ModelLoader& l, Model& m) {
  LoadLlamaFamily(l, m, {RopeStyle::kNeox, QkNorm::kRequired, true});
}

}  // namespace

extern const Architecture kLlama, kQwen2, kQwen3, kQwen3Moe;
const Architecture kLlama = {"llama", LoadLlama, RunLlamaLayer};
const Architecture kQwen2 = {"qwen2", LoadQwen2, RunLlamaLayer};
const Architecture kQwen3 = {"qwen3", LoadQwen3, RunLlamaLayer};
const Architecture kQwen3Moe = {"qwen3moe", LoadQwen3Moe, RunLlamaLayer};

}  // namespace kakeya
