#include "speculative/assistant_drafter.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "base/error.h"
#include "kernels/cpu/dequant.h"
#include "kernels/cpu/attention.h"
#include "kernels/cpu/ops.h"
#include "model/model_loader.h"
#include "sampling/sampler.h"

namespace kakeya {
namespace {

constexpr std::string_view kArch = "gemma4-assistant";

// The target layers whose caches the assistant reads, hard-coded as in
// llama.cpp: its last sliding layer (n_layer - 2) and its last, global one
// (n_layer - 1); where those share another layer's keys, that layer's.
struct TargetKvLayers {
  int sliding;
  int global;
};

TargetKvLayers FindTargetKvLayers(const ModelLoader& loader, const Model& target) {
  const HParams& t = target.hparams();
  if (t.arch != "gemma4") loader.Fail("a gemma4-assistant drafts for a gemma4 target; the target is ", t.arch);
  const int n = t.n_layer;
  if (n < 2 || target.layers[n - 2].attn.window == 0 || target.layers[n - 1].attn.window != 0) {
    loader.Fail("the assistant reads the target's last sliding and global layers, but the target ", target.path(),
                " does not end with a sliding then a global layer");
  }
  return {target.layers[n - 2].attn.kv_layer, target.layers[n - 1].attn.kv_layer};
}

// Layer il of the assistant: a gemma4 dense layer whose attention has only
// queries (docs/formats/drafters.md 5.3), reading target layer a.kv_layer's cache, whose
// KV heads, head dim and window it must share. RoPE is the assistant's own,
// as llama.cpp applies it.
Layer BindLayer(const ModelLoader& loader, const Model& target, TargetKvLayers kv, int il, int n_embd) {
  const int n_layer = loader.PositiveInt("block_count");
  const bool sliding = loader.SlidingLayers(n_layer, 0)[il];
  Layer L;
  AttentionSpec& a = L.attn;
  a.n_head = loader.PerLayerInt("attention.head_count", n_layer, 0)[il];
  a.n_head_kv = loader.PerLayerInt("attention.head_count_kv", n_layer, 0)[il];
  a.head_dim = loader.PositiveInt(sliding ? "attention.key_length_swa" : "attention.key_length");
  a.value_dim = loader.OptionalInt(sliding ? "attention.value_length_swa" : "attention.value_length", a.head_dim);
  a.window = sliding ? loader.PositiveInt("attention.sliding_window") : 0;
  a.scale = 1.0f;
  const float base = loader.FindF32("rope.freq_base").value_or(10000.0f);
  if (sliding) {
    a.rope = {loader.FindF32("rope.freq_base_swa").value_or(base),
              loader.OptionalInt("rope.dimension_count_swa", a.head_dim), RopeStyle::kNeox,
              nullptr};
  } else {
    // Proportional RoPE of the global layers, as the target's.
    a.rope = {base, loader.OptionalInt("rope.dimension_count", a.head_dim), RopeStyle::kNeox,
              loader.Vector("rope_freqs.weight", a.head_dim / 2)};
  }
  a.kv_layer = sliding ? kv.sliding : kv.global;

  const AttentionSpec& source = target.layers[a.kv_layer].attn;
  if (a.n_head_kv != source.n_head_kv || a.head_dim != source.head_dim || a.value_dim != source.value_dim ||
      a.window != source.window) {
    loader.Fail("layer ", il, " (", sliding ? "sliding" : "global", ") has ", a.n_head_kv,
                " KV heads of key/value dims ", a.head_dim, "/", a.value_dim, " and window ", a.window,
                " (attention.head_count_kv, key_length", sliding ? "_swa" : "", ", value_length", sliding ? "_swa" : "",
                ", sliding_window), but target layer ", a.kv_layer, ", whose cache it reads, has ", source.n_head_kv,
                " of ", source.head_dim, "/", source.value_dim, " and window ", source.window);
  }
  if (a.n_head < 1 || a.n_head % a.n_head_kv != 0) {
    loader.Fail("layer ", il, ": attention.head_count ", a.n_head, " is not a multiple of the ", a.n_head_kv,
                " KV heads it reads");
  }
  if (a.window == 1) {
    loader.Fail("layer ", il,
                ": a sliding window of 1 leaves the queries no key (id_last is not in the target's cache)");
  }
  if (a.rope.dims < 2 || a.rope.dims > a.head_dim || a.rope.dims % 2 != 0 || !(a.rope.base > 0.0f) ||
      !std::isfinite(a.rope.base)) {
    loader.Fail("layer ", il, ": rope dimension count ", a.rope.dims, " or base ", a.rope.base,
                " is out of range for head dim ", a.head_dim);
  }

  L.attn_norm = loader.Vector(BlockName(il, "attn_norm.weight"), n_embd);
  L.wq = loader.Matrix(BlockName(il, "attn_q.weight"), n_embd, a.q_width());
  L.q_norm = loader.Vector(BlockName(il, "attn_q_norm.weight"), a.head_dim);
  L.wo = loader.Matrix(BlockName(il, "attn_output.weight"), a.out_width(), n_embd);
  L.post_attn_norm = loader.Vector(BlockName(il, "post_attention_norm.weight"), n_embd);
  L.act = FfnActivation::kGelu;
  L.ffn_norm = loader.Vector(BlockName(il, "ffn_norm.weight"), n_embd);
  const int n_ff = loader.PerLayerInt("feed_forward_length", n_layer, 0)[il];
  if (n_ff < 1) loader.Fail("layer ", il, ": ", loader.Key("feed_forward_length"), " must be positive");
  L.ffn = BindDenseFfn(loader, il, n_embd, n_ff);
  L.post_ffn_norm = loader.Vector(BlockName(il, "post_ffw_norm.weight"), n_embd);
  L.output_scale = *loader.Vector(BlockName(il, "layer_output_scale.weight"), 1);
  return L;
}

}  // namespace

AssistantDrafter::AssistantDrafter(const Model& target, Context& target_context, const std::string& path,
                                   const AssistantOptions& options)
    : file_(GgufFile::Open(path)),
      target_(target),
      target_context_(target_context),
      pool_(target_context.pool()),
      options_(options) {
  const ModelLoader loader(*file_, kArch);
  const std::string_view arch = file_->GetString("general.architecture");
  if (arch != kArch) loader.Fail("general.architecture is '", arch, "', expected '", kArch, "'");
  const TargetKvLayers kv = FindTargetKvLayers(loader, target);
  if (options_.n_max < 1) loader.Fail("n_max ", options_.n_max, " must be >= 1");
  const HParams& t = target.hparams();
  HParams hp;
  ReadCommonKeys(loader, hp);
  n_embd_ = hp.n_embd;
  norm_eps_ = hp.norm_eps;
  n_target_ = loader.PositiveInt("embedding_length_out");
  if (n_target_ != t.n_embd) {
    loader.Fail(loader.Key("embedding_length_out"), " = ", n_target_, " but the target's hidden size is ", t.n_embd);
  }
  if (loader.FindU32("nextn_predict_layers").value_or(0) != static_cast<uint32_t>(hp.n_layer)) {
    loader.Fail(loader.Key("nextn_predict_layers"), " must equal block_count = ", hp.n_layer,
                " (an assistant has no trunk layers)");
  }
  if (file_->Find(loader.Key("attention.sliding_window_pattern")) == nullptr) {
    loader.Fail("missing key ", loader.Key("attention.sliding_window_pattern"), " (required by ", kArch, ")");
  }
  CheckRopeScaling(loader);

  // Its ids must be the target's: its logits rank the target's tokens.
  const GgufTensor& embd = loader.Require("token_embd.weight");
  if (embd.n_dims != 2 || embd.ne[1] != t.n_vocab) {
    loader.Fail("token_embd.weight has ", embd.ne[1], " rows (its vocabulary) but the target's vocabulary has ",
                t.n_vocab, " tokens");
  }
  if (file_->Find("tokenizer.ggml.tokens") != nullptr) {
    CheckVocabCompatible(target.tokenizer(), *Tokenizer::FromGguf(*file_), path);
  }
  n_vocab_ = t.n_vocab;
  token_embd_ = loader.Matrix("token_embd.weight", n_embd_, n_vocab_);
  output_norm_ = loader.Vector("output_norm.weight", n_embd_);
  pre_projection_ = loader.Matrix("nextn.pre_projection.weight", 2 * int64_t{n_target_}, n_embd_);
  post_projection_ = loader.Matrix("nextn.post_projection.weight", n_embd_, n_target_);
  for (int il = 0; il < hp.n_layer; ++il) layers_.push_back(BindLayer(loader, target, kv, il, n_embd_));

  // Scratch for the widest layer, one row.
  const int n_ctx = target_context.options().n_ctx;
  int q_width = 0, out_width = 0, n_ff = 0, rope_dims = 0;
  size_t matmul_bytes = 0;
  auto need = [&](const WeightMatrix& w) {
    matmul_bytes = std::max(matmul_bytes, MatMulScratchBytes(w.type, w.n_in, 1));
  };
  for (const WeightMatrix* w : {&token_embd_, &pre_projection_, &post_projection_}) need(*w);
  for (const Layer& L : layers_) {
    const AttentionSpec& a = L.attn;
    q_width = std::max(q_width, a.q_width());
    out_width = std::max(out_width, a.out_width());
    n_ff = std::max(n_ff, L.ffn.n_ff());
    rope_dims = std::max(rope_dims, a.rope.dims);
    const AttentionShape shape{a.n_head, a.n_head_kv, a.head_dim, a.value_dim, a.scale, 0.0f};
    attention_floats_ = std::max(attention_floats_, AttendScratchFloats(shape, 1, a.window > 0 ? a.window : n_ctx));
    for (const WeightMatrix* w : L.Matrices()) need(*w);
  }
  target_h_ = Buffer<float>(n_target_);
  input_ = Buffer<float>(2 * size_t(n_target_));
  x_ = Buffer<float>(n_embd_);
  xn_ = Buffer<float>(n_embd_);
  branch_ = Buffer<float>(n_embd_);
  q_ = Buffer<float>(q_width);
  attn_ = Buffer<float>(out_width);
  gate_ = Buffer<float>(n_ff);
  up_ = Buffer<float>(n_ff);
  rope_ = Buffer<float>(rope_dims);
  logits_ = Buffer<float>(size_t(options_.n_max) * n_vocab_);
  scores_ = Buffer<float>(size_t(pool_.size()) * attention_floats_);
  matmul_ = Buffer<uint8_t>(matmul_bytes);
}

void AssistantDrafter::Begin(std::span<const TokenId>) { target_h_pos_ = -1; }

void AssistantDrafter::Observe(const Context& target, int n_rows) {
  const int final_residual = target_.hparams().n_layer;
  const std::vector<int>& taps = target.hidden_taps();
  if (n_rows < 1 || std::find(taps.begin(), taps.end(), final_residual) == taps.end()) return;
  // Only the last committed row matters: every draft starts from it.
  const std::span<const float> residual = target.tap(final_residual, n_rows - 1);
  RmsNorm(residual.data(), target_.output_norm, n_target_, target_.hparams().norm_eps, target_h_.get());
  target_h_pos_ = target.n_committed() - 1;
}

int AssistantDrafter::Draft(const DraftRequest& request, std::span<TokenId> out) {
  const int pos0 = static_cast<int>(request.history.size()) - 1;
  const int n = std::min({request.max_tokens, static_cast<int>(out.size()), options_.n_max});
  if (n < 1 || pos0 < 1 || target_h_pos_ != pos0 - 1 || target_context_.n_committed() != pos0) return 0;
  TokenId token = request.history.back();
  if (token < 0 || token >= n_vocab_) return 0;
  std::memcpy(input_.get() + n_target_, target_h_.get(), sizeof(float) * n_target_);
  for (int i = 0; i < n; ++i) {
    float* logits = logits_.get() + size_t(i) * n_vocab_;
    DraftOne(token, pos0, logits);
    token = out[i] = request.Pick({logits, size_t(n_vocab_)}, i);
  }
  return n;
}

std::span<const float> AssistantDrafter::logits(int i) const {
  return {logits_.get() + size_t(i) * n_vocab_, size_t(n_vocab_)};
}

void AssistantDrafter::DraftOne(TokenId token, int pos0, float* logits) {
  float* const embedding = input_.get();
  const WeightMatrix& e = target_.token_embd;
  DequantizeRow(e.type, static_cast<const uint8_t*>(e.data) + int64_t{token} * e.row_bytes, embedding, n_target_);
  Scale(embedding, n_target_, std::sqrt(static_cast<float>(n_target_)));
  MatMul(pre_projection_, input_.get(), 1, x_.get(), matmul_.get(), pool_);
  for (const Layer& L : layers_) RunLayer(L, pos0);
  float* const o = xn_.get();
  RmsNorm(x_.get(), output_norm_, n_embd_, norm_eps_, o);
  // The logits, and the next draft's h in place of this one's.
  const MatMulOutput heads[] = {{&token_embd_, logits}, {&post_projection_, input_.get() + n_target_}};
  MatMulSharedInput(heads, o, 1, matmul_.get(), pool_);
}

// A gemma4 dense layer (model/arch/gemma4.cc RunGemma4Layer) with
// query-only attention.
void AssistantDrafter::RunLayer(const Layer& L, int pos0) {
  const AttentionSpec& a = L.attn;
  float* const x = x_.get();
  float* const xn = xn_.get();
  float* const branch = branch_.get();
  RmsNorm(x, L.attn_norm, n_embd_, norm_eps_, xn);
  MatMul(L.wq, xn, 1, q_.get(), matmul_.get(), pool_);
  for (int h = 0; h < a.n_head; ++h) {
    float* q = q_.get() + h * a.head_dim;
    RmsNorm(q, L.q_norm, a.head_dim, norm_eps_, q);
  }
  RopeAngles(a.rope.dims, pos0, a.rope.base, a.rope.freq_factors, rope_.get());
  Rope(q_.get(), a.n_head, a.head_dim, a.rope.dims, rope_.get(), /*adjacent_pairs=*/false);
  Attend(a, pos0);
  MatMul(L.wo, attn_.get(), 1, branch, matmul_.get(), pool_);
  RmsNorm(branch, L.post_attn_norm, n_embd_, norm_eps_, branch);
  AddInPlace(x, branch, n_embd_);

  RmsNorm(x, L.ffn_norm, n_embd_, norm_eps_, xn);
  const MatMulOutput gate_up[] = {{&L.ffn.gate, gate_.get()}, {&L.ffn.up, up_.get()}};
  MatMulSharedInput(gate_up, xn, 1, matmul_.get(), pool_);
  GeluMul(gate_.get(), up_.get(), L.ffn.n_ff(), gate_.get());
  MatMul(L.ffn.down, gate_.get(), 1, branch, matmul_.get(), pool_);
  RmsNorm(branch, L.post_ffn_norm, n_embd_, norm_eps_, branch);
  AddInPlace(x, branch, n_embd_);
  Scale(x, n_embd_, L.output_scale);
}

void AssistantDrafter::Attend(const AttentionSpec& a, int pos0) {
  const LayerCache& cache = target_context_.cache().layer(a.kv_layer);
  // The query at pos0 sees the target's keys in [FirstVisible(pos0), pos0):
  // id_last, at pos0, is not in the cache (llama.cpp's mask over the
  // target's cells). Those are the keys a query at pos0 - 1 sees with a
  // window one shorter.
  const AttentionRows rows{1,           pos0 - 1,     a.window > 0 ? a.window - 1 : 0, q_.get(), a.q_width(),
                           attn_.get(), a.out_width()};
  const KvView kv = cache.view();
  const AttentionShape shape{a.n_head, a.n_head_kv, a.head_dim, a.value_dim, a.scale, 0.0f};
  pool_.Run(a.n_head_kv, [&](int64_t head, int thread) {
    AttendKvHead(shape, static_cast<int>(head), rows, kv, scores_.get() + size_t(thread) * attention_floats_);
  });
}

std::unique_ptr<Drafter> MakeAssistantDrafter(const DrafterSetup& setup) {
  if (setup.path.empty()) Fail("--spec assistant needs a gemma4-assistant file: pass --draft FILE");
  return std::make_unique<AssistantDrafter>(setup.target, setup.target_context, setup.path, AssistantOptions{});
}

}  // namespace kakeya
