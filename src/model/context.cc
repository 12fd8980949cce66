#include "model/context.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>

#include "base/error.h"
#include "base/huge_pages.h"
#include "kernels/cpu/dequant.h"
#include "kernels/cpu/ops.h"

namespace kakeya {
namespace {

// 64-byte aligned, zero-initialised storage allocated once.
template <typename T>
class Buffer {
 public:
  Buffer() = default;
  explicit Buffer(size_t n) {
    const size_t bytes = std::max<size_t>(64, ((n * sizeof(T) + 63) / 64) * 64);
    data_.reset(static_cast<T*>(std::aligned_alloc(64, bytes)));
    if (!data_) Fail("out of memory allocating ", bytes, " bytes of context buffers");
    std::memset(data_.get(), 0, bytes);
  }
  T* get() const { return data_.get(); }

 private:
  std::unique_ptr<T, FreeDeleter> data_;
};

AttentionShape AttentionShapeOf(const HParams& hp) {
  return {hp.n_head, hp.n_head_kv, hp.head_dim, hp.value_dim, hp.attn_scale, hp.attn_softcap};
}

// Rows per attention task at most: up to 16 (row, query head) pairs share each
// block of keys and values while it is in L1 (AttendKvHead).
int MaxAttentionRows(const HParams& hp) { return std::max(1, 16 / (hp.n_head / hp.n_head_kv)); }

}  // namespace

// Buffers sized once from the model and the options. B = max_batch rows;
// q_width = n_head * head_dim, o_width = n_head * value_dim.
struct Context::Scratch {
  Buffer<float> x;        // F32 [B, n_embd] residual stream
  Buffer<float> xn;       // F32 [B, n_embd] normed input of a sub-layer
  Buffer<float> q;        // F32 [B, q_width]
  Buffer<float> k;        // F32 [B, kv_width] new keys before they enter the cache
  Buffer<float> v;        // F32 [B, v_width]
  Buffer<float> attn;     // F32 [B, o_width]
  Buffer<float> proj;     // F32 [B, n_embd] sub-layer output
  Buffer<float> gate;     // F32 [B, n_ff]
  Buffer<float> up;       // F32 [B, n_ff]
  Buffer<float> logits;   // F32 [max_logit_rows, n_vocab]
  Buffer<float> scores;   // F32 [n_threads, attention_floats] attention scratch per thread
  Buffer<uint8_t> matmul; // MatMul scratch (activation rows quantized for integer dots)
  Buffer<float> taps;     // F32 [n_taps, max_logit_rows, n_embd]
  Buffer<float> rope;     // F32 [B, 2, rope_dims] RopeAngles per row: global layers', then sliding layers'
};

Context::Context(const Model& model, const ContextOptions& options)
    : model_(model),
      options_(options),
      own_pool_(options.shared_pool != nullptr ? nullptr : std::make_unique<ThreadPool>(std::max(1, options.n_threads))),
      pool_(options.shared_pool != nullptr ? *options.shared_pool : *own_pool_) {
  const HParams& hp = model.hparams();
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

  std::vector<LayerCacheShape> shapes(hp.n_layer);
  for (int il = 0; il < hp.n_layer; ++il) {
    const bool sliding = !hp.swa_layers.empty() && hp.swa_layers[il];
    shapes[il] = {sliding ? hp.n_swa : 0, hp.n_head_kv * hp.head_dim, hp.n_head_kv * hp.value_dim};
  }
  cache_ = std::make_unique<KvCache>(shapes, options_.n_ctx, options_.max_batch);

  const size_t B = options_.max_batch;
  size_t matmul_bytes = 0;
  auto need = [&](const WeightMatrix& w) {
    matmul_bytes = std::max(matmul_bytes, MatMulScratchBytes(w.type, w.n_in, B));
  };
  need(model.output);
  for (const LayerWeights& L : model.layers) {
    for (const WeightMatrix* w : {&L.wq, &L.wk, &L.wv, &L.wo, &L.w_gate, &L.w_up, &L.w_down}) need(*w);
  }

  s_ = std::make_unique<Scratch>();
  s_->x = Buffer<float>(B * hp.n_embd);
  s_->xn = Buffer<float>(B * hp.n_embd);
  s_->q = Buffer<float>(B * hp.n_head * hp.head_dim);
  s_->k = Buffer<float>(B * hp.n_head_kv * hp.head_dim);
  s_->v = Buffer<float>(B * hp.n_head_kv * hp.value_dim);
  s_->attn = Buffer<float>(B * hp.n_head * hp.value_dim);
  s_->proj = Buffer<float>(B * hp.n_embd);
  s_->gate = Buffer<float>(B * hp.n_ff);
  s_->up = Buffer<float>(B * hp.n_ff);
  s_->logits = Buffer<float>(size_t(options_.max_logit_rows) * hp.n_vocab);
  attention_floats_ = AttendScratchFloats(AttentionShapeOf(hp), MaxAttentionRows(hp), options_.n_ctx);
  s_->scores = Buffer<float>(size_t(pool_.size()) * attention_floats_);
  s_->matmul = Buffer<uint8_t>(matmul_bytes);
  s_->rope = Buffer<float>(B * 2 * hp.rope_dims);
}

Context::~Context() = default;

void Context::SetHiddenTaps(std::vector<int> layers) {
  const HParams& hp = model_.hparams();
  for (int l : layers) {
    if (l < 0 || l > hp.n_layer) Fail("hidden tap ", l, " is out of range (0 .. ", hp.n_layer, ")");
  }
  taps_ = std::move(layers);
  s_->taps = Buffer<float>(taps_.size() * options_.max_logit_rows * hp.n_embd);
}

std::span<const float> Context::hidden(int t, int i) const {
  const size_t n_embd = model_.hparams().n_embd;
  return {s_->taps.get() + (size_t(t) * options_.max_logit_rows + i) * n_embd, n_embd};
}

std::span<const float> Context::logits(int i) const {
  const int n_vocab = model_.hparams().n_vocab;
  return {s_->logits.get() + static_cast<size_t>(i) * n_vocab, static_cast<size_t>(n_vocab)};
}

// One decoder layer over n rows at positions first_pos.. (FORMATS.md 3.4).
// Every step works row by row, or splits output columns, or splits (row,
// head) pairs, so a row's bits do not depend on the batch it came in.
void Context::RunLayer(int il, int n, int first_pos) {
  const HParams& hp = model_.hparams();
  const LayerWeights& L = model_.layers[il];
  Scratch& s = *s_;
  LayerCache& cache = cache_->layer(il);
  const int n_embd = hp.n_embd;
  const int q_width = hp.n_head * hp.head_dim;
  const int kv_width = hp.n_head_kv * hp.head_dim;
  const int v_width = hp.n_head_kv * hp.value_dim;
  const int o_width = hp.n_head * hp.value_dim;
  const bool sliding = cache.is_ring();
  const bool adjacent_pairs = hp.rope_style == RopeStyle::kNormal;
  auto matmul = [&](const WeightMatrix& w, const float* in, float* out) {
    MatMul(w, in, n, out, s.matmul.get(), pool_);
  };
  auto rms_rows = [&](const float* in, const float* w, float* out) {
    for (int i = 0; i < n; ++i) RmsNorm(in + size_t(i) * n_embd, w, n_embd, hp.norm_eps, out + size_t(i) * n_embd);
  };
  // residual += (post_norm ? rms(proj, post_norm) : proj)
  auto add_residual = [&](const float* post_norm) {
    for (int i = 0; i < n; ++i) {
      float* p = s.proj.get() + size_t(i) * n_embd;
      if (post_norm != nullptr) RmsNorm(p, post_norm, n_embd, hp.norm_eps, p);
      AddInPlace(s.x.get() + size_t(i) * n_embd, p, n_embd);
    }
  };

  // Attention.
  rms_rows(s.x.get(), L.attn_norm, s.xn.get());
  const MatMulOutput qkv[] = {{&L.wq, s.q.get()}, {&L.wk, s.k.get()}, {&L.wv, s.v.get()}};
  MatMulSharedInput(qkv, s.xn.get(), n, s.matmul.get(), pool_);
  for (int i = 0; i < n; ++i) {
    float* q = s.q.get() + size_t(i) * q_width;
    float* k = s.k.get() + size_t(i) * kv_width;
    float* v = s.v.get() + size_t(i) * v_width;
    if (L.bq) AddInPlace(q, L.bq, q_width);
    if (L.bk) AddInPlace(k, L.bk, kv_width);
    if (L.bv) AddInPlace(v, L.bv, v_width);
    if (hp.qk_norm) {
      for (int h = 0; h < hp.n_head; ++h) RmsNorm(q + h * hp.head_dim, L.q_norm, hp.head_dim, hp.norm_eps, q + h * hp.head_dim);
      for (int h = 0; h < hp.n_head_kv; ++h) RmsNorm(k + h * hp.head_dim, L.k_norm, hp.head_dim, hp.norm_eps, k + h * hp.head_dim);
    }
    const float* angles = s.rope.get() + (size_t(i) * 2 + (sliding ? 1 : 0)) * hp.rope_dims;
    Rope(q, hp.n_head, hp.head_dim, hp.rope_dims, angles, adjacent_pairs);
    Rope(k, hp.n_head_kv, hp.head_dim, hp.rope_dims, angles, adjacent_pairs);
    const int pos = first_pos + i;
    std::memcpy(cache.key(pos), k, sizeof(float) * kv_width);
    std::memcpy(cache.value(pos), v, sizeof(float) * v_width);
  }
  // Tasks of (rows, KV head): about two per thread, each row's result the
  // same however the rows are grouped.
  const int chunks_per_head = (2 * pool_.size() + hp.n_head_kv - 1) / hp.n_head_kv;
  const int rows_per_task = std::clamp((n + chunks_per_head - 1) / chunks_per_head, 1, MaxAttentionRows(hp));
  const int n_chunks = (n + rows_per_task - 1) / rows_per_task;
  const AttentionShape shape = AttentionShapeOf(hp);
  const KvView kv{cache.keys(), kv_width, cache.values(), v_width, cache.capacity()};
  pool_.Run(int64_t(n_chunks) * hp.n_head_kv, [&](int64_t task, int thread) {
    const int r0 = static_cast<int>(task / hp.n_head_kv) * rows_per_task;
    const AttentionRows rows{std::min(rows_per_task, n - r0), first_pos + r0, cache.window(),
                             s.q.get() + size_t(r0) * q_width, q_width, s.attn.get() + size_t(r0) * o_width, o_width};
    AttendKvHead(shape, static_cast<int>(task % hp.n_head_kv), rows, kv,
                 s.scores.get() + size_t(thread) * attention_floats_);
  });
  matmul(L.wo, s.attn.get(), s.proj.get());
  add_residual(L.post_attn_norm);

  // Feed-forward: down(act(gate x) * up x).
  rms_rows(s.x.get(), L.ffn_norm, s.xn.get());
  const MatMulOutput gate_up[] = {{&L.w_gate, s.gate.get()}, {&L.w_up, s.up.get()}};
  MatMulSharedInput(gate_up, s.xn.get(), n, s.matmul.get(), pool_);
  if (hp.ffn_act == FfnActivation::kGelu) {
    GeluMul(s.gate.get(), s.up.get(), n * hp.n_ff, s.gate.get());
  } else {
    SiluMul(s.gate.get(), s.up.get(), n * hp.n_ff, s.gate.get());
  }
  matmul(L.w_down, s.gate.get(), s.proj.get());
  add_residual(L.post_ffn_norm);
}

void Context::Forward(std::span<const TokenId> tokens, bool all_logits) {
  const HParams& hp = model_.hparams();
  const int n = static_cast<int>(tokens.size());
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
  for (int i = 0; i < n; ++i) {
    if (tokens[i] < 0 || tokens[i] >= hp.n_vocab) {
      Fail("token id ", tokens[i], " is out of range for a vocabulary of ", hp.n_vocab);
    }
  }

  Scratch& s = *s_;
  const int n_embd = hp.n_embd;
  const int first_pos = n_past();
  const int first_out = all_logits ? 0 : n - 1;  // rows that get logits (and taps)
  n_logit_rows_ = n - first_out;
  auto keep_taps = [&](int layer) {
    for (size_t t = 0; t < taps_.size(); ++t) {
      if (taps_[t] != layer) continue;
      for (int i = first_out; i < n; ++i) {
        std::memcpy(s.taps.get() + (t * options_.max_logit_rows + (i - first_out)) * n_embd,
                    s.x.get() + size_t(i) * n_embd, sizeof(float) * n_embd);
      }
    }
  };

  for (int i = 0; i < n; ++i) {
    const WeightMatrix& e = model_.token_embd;
    float* row = s.x.get() + size_t(i) * n_embd;
    DequantizeRow(e.type, static_cast<const uint8_t*>(e.data) + tokens[i] * e.row_bytes, row, n_embd);
    if (hp.embd_scale > 0) Scale(row, n_embd, hp.embd_scale);
  }
  for (int i = 0; i < n; ++i) {
    float* angles = s.rope.get() + size_t(i) * 2 * hp.rope_dims;
    RopeAngles(hp.rope_dims, first_pos + i, hp.rope_base, model_.rope_freqs, angles);
    if (!hp.swa_layers.empty()) {
      RopeAngles(hp.rope_dims, first_pos + i, hp.rope_base_swa, model_.rope_freqs, angles + hp.rope_dims);
    }
  }
  for (int il = 0; il < hp.n_layer; ++il) {
    keep_taps(il);
    RunLayer(il, n, first_pos);
  }
  keep_taps(hp.n_layer);
  cache_->Append(n);

  for (int i = first_out; i < n; ++i) {
    RmsNorm(s.x.get() + size_t(i) * n_embd, model_.output_norm, n_embd, hp.norm_eps,
            s.xn.get() + size_t(i - first_out) * n_embd);
  }
  MatMul(model_.output, s.xn.get(), n_logit_rows_, s.logits.get(), s.matmul.get(), pool_);
  if (hp.final_softcap > 0) SoftCap(s.logits.get(), n_logit_rows_ * hp.n_vocab, hp.final_softcap);
}

}  // namespace kakeya
