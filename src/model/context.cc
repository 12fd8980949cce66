#include "model/context.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "base/error.h"
#include "kernels/cpu/ops.h"
#include "model/arch/architecture.h"

namespace kakeya {

Context::Context(const Model& model, const ContextOptions& options)
    : model_(model),
      options_(options),
      own_pool_(options.shared_pool != nullptr ? nullptr : std::make_unique<ThreadPool>(std::max(1, options.n_threads))),
      pool_(options.shared_pool != nullptr ? *options.shared_pool : *own_pool_) {
  if (options_.n_ctx < 1 || options_.n_ctx > (1 << 24)) {
    Fail("context size ", options_.n_ctx, " is out of range (1 .. ", 1 << 24, ")");
  }
  if (options_.max_batch < 1 || options_.max_batch > 65536) {
    Fail("batch size ", options_.max_batch, " is out of range (1 .. 65536)");
  }
  if (options_.n_threads < 1 || options_.n_threads > 1024) {
    Fail("thread count ", options_.n_threads, " is out of range (1 .. 1024)");
  }
  if (options_.max_logit_rows == 0) options_.max_logit_rows = options_.max_batch;
  if (options_.max_logit_rows < 1 || options_.max_logit_rows > options_.max_batch) {
    Fail("max_logit_rows ", options_.max_logit_rows, " is out of range (1 .. max_batch)");
  }

  // Layers that read another layer's keys and values keep no cache of their own.
  std::vector<LayerCacheShape> shapes;
  for (int il = 0; il < static_cast<int>(model.layers.size()); ++il) {
    const AttentionSpec& a = model.layers[il].attn;
    const bool own = model.layers[il].writes_kv(il);
    shapes.push_back({a.window, own ? a.k_width() : 0, own ? a.v_width() : 0});
  }
  cache_ = std::make_unique<KvCache>(shapes, options_.n_ctx, options_.max_batch);
  s_ = std::make_unique<ForwardBuffers>(model, options_.max_batch, options_.max_logit_rows, options_.n_ctx,
                                        pool_.size());
}

Context::~Context() = default;

void Context::SetHiddenTaps(std::vector<int> layers) {
  const HParams& hp = model_.hparams();
  for (int l : layers) {
    if (l < 0 || l > hp.n_layer) Fail("hidden tap ", l, " is out of range (0 .. ", hp.n_layer, ")");
  }
  std::sort(layers.begin(), layers.end());
  layers.erase(std::unique(layers.begin(), layers.end()), layers.end());
  taps_ = std::move(layers);
  tap_rows_ = Buffer<float>(taps_.size() * options_.max_batch * hp.n_embd);
}

std::span<const float> Context::tap(int layer, int i) const {
  const auto it = std::find(taps_.begin(), taps_.end(), layer);
  if (it == taps_.end()) Fail("layer ", layer, " is not tapped (Context::SetHiddenTaps)");
  const size_t n_embd = model_.hparams().n_embd;
  return {tap_rows_.get() + (size_t(it - taps_.begin()) * options_.max_batch + i) * n_embd, n_embd};
}

float Context::routing_margin(int il, int i) const {
  if (il < 0 || il >= model_.hparams().n_layer || !model_.layers[il].moe.present() || i < 0 ||
      i >= options_.max_batch) {
    return INFINITY;
  }
  return s_->routing_margins.get()[size_t(il) * s_->max_rows + i];
}

void Context::TakeRunnerUpExpert(int il, int i) {
  if (il < 0 || il >= model_.hparams().n_layer || i < 0 || i >= options_.max_batch) {
    Fail("TakeRunnerUpExpert: layer ", il, " row ", i, " is out of range");
  }
  s_->routing_overrides.push_back({il, i});
}

std::span<const float> Context::logits(int i) const {
  const int n_vocab = model_.hparams().n_vocab;
  return {s_->logits.get() + static_cast<size_t>(i) * n_vocab, static_cast<size_t>(n_vocab)};
}

void Context::Forward(std::span<const TokenId> tokens, bool all_logits) {
  const int n_vocab = model_.hparams().n_vocab;
  for (TokenId t : tokens) {
    if (t < 0 || t >= n_vocab) Fail("token id ", t, " is out of range for a vocabulary of ", n_vocab);
  }
  Run(tokens.data(), nullptr, static_cast<int>(tokens.size()), all_logits);
}

void Context::ForwardEmbedded(std::span<const float> rows, bool all_logits) {
  const HParams& hp = model_.hparams();
  if (hp.n_embd_per_layer > 0) Fail("a model with per-layer embeddings needs token ids, not input rows");
  if (rows.size() % hp.n_embd != 0) Fail("input rows of ", rows.size(), " floats are not a multiple of n_embd = ", hp.n_embd);
  Run(nullptr, rows.data(), static_cast<int>(rows.size() / hp.n_embd), all_logits);
}

// The forward pass, top to bottom: embeddings, the decoder layers as the
// architecture composes them (model/arch/), the output norm and head.
void Context::Run(const TokenId* tokens, const float* input_rows, int n, bool all_logits) {
  const HParams& hp = model_.hparams();
  if (n == 0) return;
  if (n > options_.max_batch) {
    Fail("batch of ", n, " tokens exceeds the context's batch size ", options_.max_batch);
  }
  if (all_logits && n > options_.max_logit_rows) {
    Fail("asked for logits of ", n, " rows; the context returns at most ", options_.max_logit_rows);
  }
  if (!cache_->CanAppend(n)) {
    Fail("context is full: ", n_past(), " + ", n, " tokens exceed n_ctx = ", options_.n_ctx,
         " (pass a larger -c)");
  }

  const int n_embd = hp.n_embd;
  const int first_out = all_logits ? 0 : n - 1;  // rows that get logits
  n_logit_rows_ = n - first_out;
  ForwardPass pass(model_, *s_, *cache_, pool_, n, n_past());
  auto keep_taps = [&](int layer) {
    for (size_t t = 0; t < taps_.size(); ++t) {
      if (taps_[t] != layer) continue;
      std::memcpy(tap_rows_.get() + t * options_.max_batch * n_embd, pass.residual(), sizeof(float) * n * n_embd);
    }
  };

  if (tokens != nullptr) {
    pass.Embed(tokens);
    pass.PreparePerLayerInputs(tokens);
  } else {
    std::memcpy(pass.residual(), input_rows, sizeof(float) * n * n_embd);
  }
  pass.PrepareRope();
  s_->experts_touched = 0;
  s_->expert_bytes_read = 0;
  const Architecture& arch = model_.architecture();
  for (int il = 0; il < hp.n_layer; ++il) {
    keep_taps(il);
    arch.run_layer(pass, model_.layers[il], il);
  }
  keep_taps(hp.n_layer);
  cache_->Append(n);
  s_->routing_overrides.clear();

  float* const normed = pass.normed();
  for (int i = first_out; i < n; ++i) {
    RmsNorm(pass.residual() + size_t(i) * n_embd, model_.output_norm, n_embd, hp.norm_eps,
            normed + size_t(i - first_out) * n_embd);
  }
  MatMul(model_.output, normed, n_logit_rows_, s_->logits.get(), s_->matmul.get(), pool_);
  if (hp.final_softcap > 0) SoftCap(s_->logits.get(), n_logit_rows_ * hp.n_vocab, hp.final_softcap);
}

}  // namespace kakeya
