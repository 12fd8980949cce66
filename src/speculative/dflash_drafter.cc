#include "speculative/dflash_drafter.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <optional>
#include <string_view>

#include "base/error.h"
#include "kernels/cpu/dequant.h"
#include "kernels/cpu/attention.h"
#include "kernels/cpu/ops.h"
#include "model/context.h"
#include "model/model_loader.h"
#include "sampling/sampler.h"

namespace kakeya {
namespace {

// Observe injects a long prefill chunk this many rows at a time (at least a block).
constexpr int kObserveRows = 64;
constexpr int kMaxBlockSize = 256;
constexpr int kMaxTaps = 64;

// Keys of the DFlash family that change the computation in ways this drafter
// does not implement: refused rather than silently ignored.
void RefuseExtensions(const ModelLoader& loader) {
  struct Extension {
    const char* key;
    const char* what;
  };
  constexpr Extension kPresent[] = {
      {"rope.dimension_sections", "M-RoPE"}, {"conv_kernel_size", "DFlash2"},
      {"conv_group_size", "DFlash2"},        {"selector_rank", "DFlash2"},
      {"selector_top_k", "DFlash2"},         {"attention.value_scale", "value-scaled attention"},
  };
  for (const Extension& e : kPresent) {
    if (loader.gguf().Find(loader.Key(e.key)) != nullptr) {
      loader.Fail(loader.Key(e.key), ": ", e.what, " drafters are not supported");
    }
  }
  if (loader.FindU32("attention.sliding_window").value_or(0) > 0) {
    loader.Fail(loader.Key("attention.sliding_window"), ": sliding-window drafters are not supported");
  }
  if (loader.FindU32("hyper_connection.count").value_or(0) > 0) {
    loader.Fail(loader.Key("hyper_connection.count"), ": a DSpark drafter (--spec dspark), not DFlash");
  }
  if (loader.FindBool("sample_from_anchor").value_or(false)) {
    loader.Fail(loader.Key("sample_from_anchor"),
                " = true (the anchor row proposes too, as DSpark's) is not supported");
  }
}

// The tensors this drafter binds; any other (d2t, fc.scale, DSpark's Markov
// head, DFlash2's convolutions, Gemma-backbone norms and scales) is refused.
bool IsBoundTensor(std::string_view name, int n_layer) {
  constexpr std::string_view kGlobal[] = {"fc.weight", "enc.output_norm.weight", "output_norm.weight",
                                          "token_embd.weight", "output.weight"};
  constexpr std::string_view kLayer[] = {"attn_norm.weight",   "attn_q.weight",      "attn_k.weight",
                                         "attn_v.weight",      "attn_output.weight", "attn_q_norm.weight",
                                         "attn_k_norm.weight", "ffn_norm.weight",    "ffn_gate.weight",
                                         "ffn_up.weight",      "ffn_down.weight"};
  if (std::find(std::begin(kGlobal), std::end(kGlobal), name) != std::end(kGlobal)) return true;
  for (int il = 0; il < n_layer; ++il) {
    for (std::string_view t : kLayer) {
      if (name == BlockName(il, t)) return true;
    }
  }
  return false;
}

FfnActivation ReadActivation(const ModelLoader& loader) {
  const auto name = loader.gguf().FindString(loader.Key("hidden_activation"));
  if (!name || *name == "silu") return FfnActivation::kSilu;
  if (*name == "gelu" || *name == "gelu_pytorch_tanh") return FfnActivation::kGelu;
  loader.Fail(loader.Key("hidden_activation"), " = '", *name, "' is not supported (silu, gelu, gelu_pytorch_tanh)");
}

// Layer il: Qwen3-style attention (q/k norms, NEOX RoPE) and a gated FFN.
Layer BindLayer(const ModelLoader& loader, int il, const AttentionKeys& keys, float scale, FfnActivation act,
                int n_embd, int n_ff) {
  Layer L;
  L.attn = UniformAttention(keys, RopeStyle::kNeox, il);
  L.attn.scale = scale;
  const AttentionSpec& a = L.attn;
  L.attn_norm = loader.Vector(BlockName(il, "attn_norm.weight"), n_embd);
  L.wq = loader.Matrix(BlockName(il, "attn_q.weight"), n_embd, a.q_width());
  L.wk = loader.Matrix(BlockName(il, "attn_k.weight"), n_embd, a.k_width());
  L.wv = loader.OptionalMatrix(BlockName(il, "attn_v.weight"), n_embd, a.v_width());
  L.wo = loader.Matrix(BlockName(il, "attn_output.weight"), a.out_width(), n_embd);
  L.q_norm = loader.Vector(BlockName(il, "attn_q_norm.weight"), a.head_dim);
  L.k_norm = loader.Vector(BlockName(il, "attn_k_norm.weight"), a.head_dim);
  // No attn_v: V is the key projection, RMS-normed without weight.
  L.attn.values_from_keys = L.attn.norm_values = L.wv.data == nullptr;
  L.act = act;
  L.ffn_norm = loader.Vector(BlockName(il, "ffn_norm.weight"), n_embd);
  L.ffn = BindDenseFfn(loader, il, n_embd, n_ff);
  return L;
}

// Moves every packable matrix into `buffer` in its MatMul layout, as
// Model::Load does for the target's (matmul.h, PackWeights).
void PackMatrices(const std::vector<WeightMatrix*>& matrices, Buffer<uint8_t>& buffer) {
  auto aligned = [](size_t n) { return (n + 63) / 64 * 64; };
  size_t total = 0;
  for (const WeightMatrix* w : matrices) {
    if (CanPack(*w)) total += aligned(PackedBytes(*w));
  }
  if (total == 0) return;
  buffer = Buffer<uint8_t>(total);
  size_t offset = 0;
  for (WeightMatrix* w : matrices) {
    if (!CanPack(*w)) continue;
    const size_t bytes = PackedBytes(*w);
    *w = PackWeights(*w, buffer.get() + offset);
    offset += aligned(bytes);
  }
}

}  // namespace

DFlashDrafter::DFlashDrafter(const Model& target, const std::string& path, int n_ctx, ThreadPool& pool)
    : target_(target), pool_(pool) {
  if (n_ctx < 1 || n_ctx > (1 << 24)) Fail("DFlash drafter: context size ", n_ctx, " is out of range");
  // Its rows are one stream of n_embd; a deepseek4 target's hidden state is four.
  if (target.hparams().n_hyper > 0) {
    Fail(path, ": a DFlash drafter for a ", target.hparams().arch,
         " target, whose hidden state is several streams: such a target drafts with DSpark files (--spec dspark)");
  }
  Load(path);
  AllocateBuffers(n_ctx);
}

DFlashDrafter::~DFlashDrafter() = default;

void DFlashDrafter::Load(const std::string& path) {
  file_ = GgufFile::Open(path);
  const ModelLoader loader(*file_, "dflash");
  const std::string_view arch = file_->GetString("general.architecture");
  if (arch != "dflash") loader.Fail("general.architecture is '", arch, "'; a DFlash drafter has 'dflash'");
  RefuseExtensions(loader);
  const HParams& target = target_.hparams();

  n_embd_ = loader.PositiveInt("embedding_length");
  if (n_embd_ != target.n_embd) {
    loader.Fail(loader.Key("embedding_length"), " = ", n_embd_, " does not match the target's hidden size ",
                target.n_embd, " (", target_.path(), ")");
  }
  const std::vector<int64_t> taps = file_->GetIntArray(loader.Key("target_layers"));
  if (taps.empty() || taps.size() > kMaxTaps) {
    loader.Fail(loader.Key("target_layers"), " has ", taps.size(), " entries (1 .. ", kMaxTaps, ")");
  }
  for (int64_t l : taps) {
    if (l < 0 || l > target.n_layer) {
      loader.Fail(loader.Key("target_layers"), " names target layer ", l, " but the target (", target_.path(), ") has ",
                  target.n_layer, " layers: taps are 0 .. ", target.n_layer);
    }
    taps_.push_back(static_cast<int>(l));
  }
  const std::unique_ptr<Tokenizer> vocab = Tokenizer::FromGguf(*file_);
  CheckVocabCompatible(target_.tokenizer(), *vocab, path);
  std::optional<uint32_t> mask = file_->FindU32("tokenizer.ggml.mask_token_id");
  if (!mask) mask = loader.FindU32("mask_token_id");  // older converters
  if (!mask || *mask >= static_cast<uint32_t>(target.n_vocab)) {
    loader.Fail("tokenizer.ggml.mask_token_id is missing or out of range (vocabulary of ", target.n_vocab, ")");
  }
  mask_ = static_cast<TokenId>(*mask);

  const int n_layer = loader.PositiveInt("block_count");
  const int n_ff = loader.PositiveInt("feed_forward_length");
  eps_ = loader.F32("attention.layer_norm_rms_epsilon");
  block_size_ = loader.OptionalInt("block_size", 16);
  embedding_scale_ = loader.FindF32("embedding_scale").value_or(1.0f);
  causal_ = loader.FindBool("attention.causal").value_or(false);
  if (!(eps_ >= 0) || !std::isfinite(eps_)) loader.Fail("layer_norm_rms_epsilon ", eps_, " is out of range");
  if (block_size_ < 2 || block_size_ > kMaxBlockSize) {
    loader.Fail(loader.Key("block_size"), " = ", block_size_, " is out of range (2 .. ", kMaxBlockSize, ")");
  }
  if (!std::isfinite(embedding_scale_)) loader.Fail(loader.Key("embedding_scale"), " is not finite");

  const AttentionKeys keys = ReadAttentionKeys(loader, n_embd_);
  if (keys.value_dim != keys.head_dim) {
    loader.Fail("value_length ", keys.value_dim, " must equal key_length ", keys.head_dim);
  }
  const float scale = loader.FindF32("attention.scale").value_or(1.0f / std::sqrt(float(keys.head_dim)));
  if (!std::isfinite(scale)) loader.Fail(loader.Key("attention.scale"), " is not finite");
  const FfnActivation act = ReadActivation(loader);
  for (int il = 0; il < n_layer; ++il) layers_.push_back(BindLayer(loader, il, keys, scale, act, n_embd_, n_ff));
  fc_ = loader.Matrix("fc.weight", int64_t{n_embd_} * static_cast<int64_t>(taps_.size()), n_embd_);
  enc_norm_ = loader.Vector("enc.output_norm.weight", n_embd_);
  output_norm_ = loader.Vector("output_norm.weight", n_embd_);
  token_embd_ = loader.OptionalMatrix("token_embd.weight", n_embd_, target.n_vocab);
  head_ = loader.OptionalMatrix("output.weight", n_embd_, target.n_vocab);
  for (const GgufTensor& t : file_->tensors()) {
    if (!IsBoundTensor(t.name, n_layer)) {
      loader.Fail("tensor '", t.name,
                  "' belongs to a DFlash variant kakeya does not implement "
                  "(d2t, DFlash2, DSpark, Gemma-backbone norms)");
    }
  }

  std::vector<WeightMatrix*> matrices = {&fc_};
  for (Layer& L : layers_) {
    for (WeightMatrix* w : L.Matrices()) matrices.push_back(w);
  }
  if (head_.data != nullptr) matrices.push_back(&head_);
  PackMatrices(matrices, packed_);
  // Borrowed: the target's rows and head (without its final soft-cap).
  if (token_embd_.data == nullptr) token_embd_ = target_.token_embd;
  if (head_.data == nullptr) head_ = target_.output;
}

void DFlashDrafter::AllocateBuffers(int n_ctx) {
  const AttentionSpec& a = layers_[0].attn;
  const size_t R = max_rows_ = std::max(block_size_, kObserveRows);
  const size_t D = n_embd_;
  const int n_ff = layers_[0].ffn.n_ff();
  const size_t B = block_size_;
  features_ = Buffer<float>(R * taps_.size() * D);
  normed_ = Buffer<float>(R * D);
  angles_ = Buffer<float>(R * a.rope.dims);
  x_ = Buffer<float>(B * D);
  branch_ = Buffer<float>(B * D);
  q_ = Buffer<float>(B * a.q_width());
  attn_ = Buffer<float>(B * a.out_width());
  gate_ = Buffer<float>(B * n_ff);
  up_ = Buffer<float>(B * n_ff);

  const int capacity = n_ctx + block_size_;
  capacity_ = capacity;
  for (size_t il = 0; il < layers_.size(); ++il) {
    cache_.push_back({a.k_width(), a.v_width(), Buffer<float>(size_t(capacity) * a.k_width()),
                      Buffer<float>(size_t(capacity) * a.v_width())});
  }
  const AttentionShape shape{a.n_head, a.n_head_kv, a.head_dim, a.value_dim, a.scale, 0.0f};
  attention_floats_ = AttendScratchFloats(shape, a.max_rows_per_task(), capacity);
  scores_ = Buffer<float>(size_t(pool_.size()) * attention_floats_);

  size_t matmul_bytes = MatMulScratchBytes(fc_.type, fc_.n_in, R);
  for (const Layer& L : layers_) {
    for (const WeightMatrix* w : L.Matrices())
      matmul_bytes = std::max(matmul_bytes, MatMulScratchBytes(w->type, w->n_in, R));
  }
  matmul_bytes = std::max(matmul_bytes, MatMulScratchBytes(head_.type, head_.n_in, block_size_ - 1));
  matmul_ = Buffer<uint8_t>(matmul_bytes);
  logits_ = Buffer<float>(size_t(block_size_ - 1) * target_.hparams().n_vocab);
}

void DFlashDrafter::Begin(std::span<const TokenId>) { n_context_ = 0; }

void DFlashDrafter::Observe(const Context& target, int n_rows) {
  const int end = target.n_committed();
  const int first = end - n_rows;
  const std::vector<int>& tapped = target.hidden_taps();
  const bool has_taps = std::all_of(taps_.begin(), taps_.end(),
                                    [&](int l) { return std::find(tapped.begin(), tapped.end(), l) != tapped.end(); });
  // Rows after a gap this drafter never saw, or without its taps, cannot be
  // injected: drafting stops (Draft proposes nothing) until the next Begin().
  if (first < 0 || first > n_context_ || end + block_size_ > capacity_ || !has_taps) {
    n_context_ = std::min(n_context_, std::max(first, 0));
    return;
  }
  for (int r = 0; r < n_rows; r += max_rows_) InjectContext(target, r, first + r, std::min(max_rows_, n_rows - r));
  n_context_ = end;
}

int DFlashDrafter::Draft(const DraftRequest& request, std::span<TokenId> out) {
  const int pos0 = static_cast<int>(request.history.size()) - 1;
  const int n = std::min({request.max_tokens, static_cast<int>(out.size()), block_size_ - 1});
  if (n < 1 || pos0 < 0 || pos0 != n_context_) return 0;
  const TokenId id_last = request.history.back();
  if (id_last < 0 || id_last >= target_.hparams().n_vocab) return 0;
  RunBlock(id_last, pos0, n);
  for (int i = 0; i < n; ++i) out[i] = request.Pick(logits(i), i);
  return n;
}

std::span<const float> DFlashDrafter::logits(int i) const {
  const size_t n_vocab = target_.hparams().n_vocab;
  return {logits_.get() + size_t(i) * n_vocab, n_vocab};
}

// g = rms(fc . concat(taps), enc.output_norm); every layer's K and V of g.
void DFlashDrafter::InjectContext(const Context& target, int row0, int pos0, int n) {
  const size_t D = n_embd_, n_taps = taps_.size();
  float* const features = features_.get();
  for (int i = 0; i < n; ++i) {
    for (size_t t = 0; t < n_taps; ++t) {
      std::memcpy(features + (i * n_taps + t) * D, target.tap(taps_[t], row0 + i).data(), sizeof(float) * D);
    }
  }
  float* const g = normed_.get();
  MatMul(fc_, features, n, g, matmul_.get(), pool_);
  RmsNormRows(g, enc_norm_, n, g);
  PrepareAngles(pos0, n);
  for (size_t il = 0; il < layers_.size(); ++il) {
    const Layer& L = layers_[il];
    ContextRows& cache = cache_[il];
    if (L.wv.data != nullptr) {
      const MatMulOutput kv[] = {{&L.wk, cache.key(pos0)}, {&L.wv, cache.value(pos0)}};
      MatMulSharedInput(kv, g, n, matmul_.get(), pool_);
    } else {
      MatMul(L.wk, g, n, cache.key(pos0), matmul_.get(), pool_);
    }
    StoreKeysValues(L, cache, pos0, n);
  }
}

void DFlashDrafter::PrepareAngles(int pos0, int n) {
  const RopeSpec& rope = layers_[0].attn.rope;
  for (int i = 0; i < n; ++i)
    RopeAngles(rope.dims, pos0 + i, rope.base, nullptr, angles_.get() + size_t(i) * rope.dims);
}

// The projections were written straight into the cache's rows (a full cache
// keeps positions in order); they are finished there.
void DFlashDrafter::StoreKeysValues(const Layer& L, ContextRows& cache, int pos0, int n) {
  const AttentionSpec& a = L.attn;
  for (int i = 0; i < n; ++i) {
    float* k = cache.key(pos0 + i);
    float* v = cache.value(pos0 + i);
    if (a.values_from_keys) {
      std::memcpy(v, k, sizeof(float) * a.v_width());  // before the key norm
      for (int h = 0; h < a.n_head_kv; ++h)
        RmsNorm(v + h * a.value_dim, nullptr, a.value_dim, eps_, v + h * a.value_dim);
    }
    for (int h = 0; h < a.n_head_kv; ++h) RmsNorm(k + h * a.head_dim, L.k_norm, a.head_dim, eps_, k + h * a.head_dim);
    Rope(k, a.n_head_kv, a.head_dim, a.rope.dims, angles_.get() + size_t(i) * a.rope.dims, /*adjacent_pairs=*/false);
  }
}

// One forward of the block's first n_out + 1 rows: Qwen3-style layers,
// x += Wo attn(rms(x)) and x += down(act(gate h) * up h) with h = rms(x),
// then the head on the proposal rows.
void DFlashDrafter::RunBlock(TokenId id_last, int pos0, int n_out) {
  const int B = n_out + 1;  // rows run
  const size_t D = n_embd_;
  float* const x = x_.get();
  for (int r = 0; r < B; ++r) {
    const TokenId t = r == 0 ? id_last : mask_;
    DequantizeRow(token_embd_.type, static_cast<const uint8_t*>(token_embd_.data) + t * token_embd_.row_bytes,
                  x + r * D, n_embd_);
    Scale(x + r * D, n_embd_, embedding_scale_);
  }
  PrepareAngles(pos0, B);
  for (size_t il = 0; il < layers_.size(); ++il) {
    const Layer& L = layers_[il];
    RmsNormRows(x, L.attn_norm, B, normed_.get());
    BlockAttention(L, cache_[il], pos0, B);
    AddInPlace(x, branch_.get(), B * n_embd_);
    RmsNormRows(x, L.ffn_norm, B, normed_.get());
    BlockFfn(L, B);
    AddInPlace(x, branch_.get(), B * n_embd_);
  }
  // Row 0 (id_last) proposes nothing; rows 1 .. n_out do.
  RmsNormRows(x + D, output_norm_, n_out, normed_.get());
  MatMul(head_, normed_.get(), n_out, logits_.get(), matmul_.get(), pool_);
}

void DFlashDrafter::RmsNormRows(const float* in, const float* weight, int n, float* out) const {
  for (int r = 0; r < n; ++r) RmsNorm(in + size_t(r) * n_embd_, weight, n_embd_, eps_, out + size_t(r) * n_embd_);
}

// normed_ -> branch_. The block's K/V go after the context, where the next
// Observe overwrites them.
void DFlashDrafter::BlockAttention(const Layer& L, ContextRows& cache, int pos0, int rows) {
  const AttentionSpec& a = L.attn;
  float* const q = q_.get();
  if (L.wv.data != nullptr) {
    const MatMulOutput qkv[] = {{&L.wq, q}, {&L.wk, cache.key(pos0)}, {&L.wv, cache.value(pos0)}};
    MatMulSharedInput(qkv, normed_.get(), rows, matmul_.get(), pool_);
  } else {
    const MatMulOutput qk[] = {{&L.wq, q}, {&L.wk, cache.key(pos0)}};
    MatMulSharedInput(qk, normed_.get(), rows, matmul_.get(), pool_);
  }
  for (int r = 0; r < rows; ++r) {
    float* qr = q + r * a.q_width();
    for (int h = 0; h < a.n_head; ++h) RmsNorm(qr + h * a.head_dim, L.q_norm, a.head_dim, eps_, qr + h * a.head_dim);
    Rope(qr, a.n_head, a.head_dim, a.rope.dims, angles_.get() + size_t(r) * a.rope.dims, /*adjacent_pairs=*/false);
  }
  StoreKeysValues(L, cache, pos0, rows);
  // Each row sees the keys up to the end of the block (non-causal) or up to
  // its own position (causal). Tasks of (rows, KV head), about two per
  // thread as in the target's forward: each reads the context's keys and
  // values once for all its rows (a task per row read them once per row,
  // the whole context's for every row of the block).
  const AttentionShape shape{a.n_head, a.n_head_kv, a.head_dim, a.value_dim, a.scale, 0.0f};
  const KvView kv =
      F32KvView(cache.k.get(), a.k_width(), a.head_dim, cache.v.get(), a.v_width(), a.value_dim, capacity_);
  const int per_task = a.rows_per_task(rows, pool_.size());
  const int chunks = (rows + per_task - 1) / per_task;
  pool_.Run(int64_t(chunks) * a.n_head_kv, [&](int64_t task, int thread) {
    const int r0 = static_cast<int>(task / a.n_head_kv) * per_task;
    const AttentionRows chunk{std::min(per_task, rows - r0), pos0 + r0, 0,
                              q + r0 * a.q_width(),          a.q_width(), attn_.get() + r0 * a.out_width(),
                              a.out_width(),                 causal_ ? -1 : pos0 + rows - 1};
    AttendKvHead(shape, static_cast<int>(task % a.n_head_kv), chunk, kv, scores_.get() + thread * attention_floats_);
  });
  MatMul(L.wo, attn_.get(), rows, branch_.get(), matmul_.get(), pool_);
}

// normed_ -> branch_: down(act(gate h) * up h).
void DFlashDrafter::BlockFfn(const Layer& L, int rows) {
  const MatMulOutput gate_up[] = {{&L.ffn.gate, gate_.get()}, {&L.ffn.up, up_.get()}};
  MatMulSharedInput(gate_up, normed_.get(), rows, matmul_.get(), pool_);
  const int n = rows * L.ffn.n_ff();
  if (L.act == FfnActivation::kGelu) {
    GeluMul(gate_.get(), up_.get(), n, gate_.get());
  } else {
    SiluMul(gate_.get(), up_.get(), n, gate_.get());
  }
  MatMul(L.ffn.down, gate_.get(), rows, branch_.get(), matmul_.get(), pool_);
}

std::unique_ptr<Drafter> MakeDFlashDrafter(const DrafterSetup& setup) {
  if (setup.path.empty()) Fail("--spec dflash needs a DFlash drafter: pass --draft FILE");
  return std::make_unique<DFlashDrafter>(setup.target, setup.path, setup.target_context.options().n_ctx,
                                         setup.target_context.pool());
}

}  // namespace kakeya
