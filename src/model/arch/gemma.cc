// Gemma 2 and 3 (docs/formats/architectures.md 3.4): scaled embeddings, post-norms on both
// sub-layers, GeGLU, sliding-window layers with their own RoPE base, soft-caps
// (gemma2 attention and logits; gemma3 logits only if the file says so) and
// q/k norms on gemma3.
#include <cmath>

#include "model/arch/architecture.h"
#include "model/forward_pass.h"
#include "model/model_loader.h"

namespace kakeya {
namespace {

void LoadGemma(const ModelLoader& loader, Model& model, bool gemma2) {
  HParams& hp = model.mutable_hparams();
  ReadCommonKeys(loader, hp);
  hp.embd_scale = std::sqrt(static_cast<float>(hp.n_embd));
  const AttentionKeys attn = ReadAttentionKeys(loader, hp.n_embd);
  const int n_ff = loader.PositiveInt("feed_forward_length");

  // The 27B models scale queries by 1/sqrt(n_embd / n_head) (HF query_pre_attn_scalar).
  float attn_scale = 1.0f / std::sqrt(static_cast<float>(attn.head_dim));
  const int n_trunk = loader.TrunkLayers();  // their NextN layers too
  if ((gemma2 && n_trunk == 46) || (!gemma2 && n_trunk == 62)) {
    attn_scale = 1.0f / std::sqrt(static_cast<float>(hp.n_embd / attn.n_head));
  }
  float attn_softcap = 0.0f;
  int window;
  float rope_base_swa;
  if (gemma2) {
    attn_softcap = loader.FindF32("attn_logit_softcapping").value_or(50.0f);
    hp.final_softcap = loader.FindF32("final_logit_softcapping").value_or(30.0f);
    window = loader.OptionalInt("attention.sliding_window", 4096);
    rope_base_swa = loader.FindF32("rope.freq_base_swa").value_or(attn.rope_base);
  } else {
    hp.final_softcap = loader.FindF32("final_logit_softcapping").value_or(0.0f);
    window = loader.OptionalInt("attention.sliding_window", 0);
    rope_base_swa = loader.FindF32("rope.freq_base_swa").value_or(10000.0f);
  }
  if (attn_softcap < 0 || hp.final_softcap < 0 || !(rope_base_swa > 0) || window < 0) {
    loader.Fail("negative soft-cap or sliding window, or non-positive rope.freq_base_swa");
  }
  const std::vector<bool> sliding = window > 0 ? loader.SlidingLayers(hp.n_layer, gemma2 ? 2 : 6)
                                               : std::vector<bool>(hp.n_layer, false);

  // gemma2 always uses token_embd as the output head (llama.cpp ignores output.weight).
  BindEmbeddingsAndHead(loader, model, /*tied=*/gemma2);
  model.layers.resize(hp.n_layer);
  for (int il = loader.FirstBlock(); il < hp.n_layer; ++il) {
    Layer& L = model.layers[il];
    L.attn = UniformAttention(attn, RopeStyle::kNeox, il);
    L.attn.scale = attn_scale;
    L.attn.softcap = attn_softcap;
    if (sliding[il]) {
      L.attn.window = window;
      L.attn.rope.base = rope_base_swa;
    }
    BindAttention(loader, il, hp.n_embd, gemma2 ? QkNorm::kNone : QkNorm::kRequired, L);
    L.post_attn_norm = loader.Vector(BlockName(il, "post_attention_norm.weight"), hp.n_embd);
    L.act = FfnActivation::kGelu;
    L.ffn_norm = loader.Vector(BlockName(il, "ffn_norm.weight"), hp.n_embd);
    L.ffn = BindDenseFfn(loader, il, hp.n_embd, n_ff);
    L.post_ffn_norm = loader.Vector(BlockName(il, "post_ffw_norm.weight"), hp.n_embd);
  }
}

void RunGemmaLayer(ForwardPass& p, const Layer& L, int il) {
  p.RmsNorm(p.residual(), L.attn_norm, p.normed());
  p.Attention(L, il, p.normed(), p.branch());
  p.RmsNorm(p.branch(), L.post_attn_norm, p.branch());
  p.Add(p.residual(), p.branch());
  p.RmsNorm(p.residual(), L.ffn_norm, p.normed());
  p.Ffn(L.ffn, L.act, p.normed(), p.branch());
  p.RmsNorm(p.branch(), L.post_ffn_norm, p.branch());
  p.Add(p.residual(), p.branch());
}

void LoadGemma2(const ModelLoader& l, Model& m) { LoadGemma(l, m, true); }
void LoadGemma3(const ModelLoader& l, Model& m) { LoadGemma(l, m, false); }

}  // namespace

extern const Architecture kGemma2, kGemma3;
const Architecture kGemma2 = {"gemma2", LoadGemma2, RunGemmaLayer};
const Architecture kGemma3 = {"gemma3", LoadGemma3, RunGemmaLayer};

}  // namespace kakeya
