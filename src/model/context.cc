#include "model/context.h"

#include <cmath>
#include <cstdlib>
#include <cstring>

#include "base/error.h"
#include "kernels/cpu/dequant.h"
#include "kernels/cpu/ops.h"

namespace kakeya {
namespace {

struct FreeDeleter {
  void operator()(void* p) const { std::free(p); }
};

// 64-byte aligned, zero-initialised storage allocated once.
template <typename T>
class Buffer {
 public:
  Buffer() = default;
  explicit Buffer(size_t n) : n_(n) {
    const size_t bytes = ((n * sizeof(T) + 63) / 64) * 64;
    if (bytes > 0) {
      data_.reset(static_cast<T*>(std::aligned_alloc(64, bytes)));
      if (!data_) Fail("out of memory allocating ", bytes, " bytes of context buffers");
      std::memset(data_.get(), 0, bytes);
    }
  }
  T* get() const { return data_.get(); }
  size_t size() const { return n_; }

 private:
  std::unique_ptr<T, FreeDeleter> data_;
  size_t n_ = 0;
};

}  // namespace

// Buffers sized once from the model and the options. Shapes use the model's
// widths: q_width = n_head * head_dim, kv_width = n_head_kv * head_dim,
// v_width = n_head_kv * value_dim, o_width = n_head * value_dim.
struct Context::Scratch {
  Buffer<float> k_cache;  // F32 [n_layer, n_ctx, kv_width]
  Buffer<float> v_cache;  // F32 [n_layer, n_ctx, v_width]
  Buffer<float> x;        // F32 [max_batch, n_embd] residual stream
  Buffer<float> xn;       // F32 [max_batch, n_embd] normed input of a sub-layer
  Buffer<float> q;        // F32 [max_batch, q_width]
  Buffer<float> attn;     // F32 [max_batch, o_width]
  Buffer<float> proj;     // F32 [max_batch, n_embd] sub-layer output
  Buffer<float> gate;     // F32 [max_batch, n_ff]
  Buffer<float> up;       // F32 [max_batch, n_ff]
  Buffer<float> logits;   // F32 [max_logit_rows, n_vocab]
  Buffer<float> scores;   // F32 [n_threads, n_ctx] attention weights per thread
  Buffer<uint8_t> matmul; // MatMul scratch (activation rows quantized for integer dots)
};

Context::Context(const Model& model, const ContextOptions& options)
    : model_(model), options_(options), pool_(options.n_threads) {
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

  const size_t n_ctx = options_.n_ctx;
  const size_t B = options_.max_batch;
  const size_t q_width = size_t(hp.n_head) * hp.head_dim;
  const size_t kv_width = size_t(hp.n_head_kv) * hp.head_dim;
  const size_t v_width = size_t(hp.n_head_kv) * hp.value_dim;
  const size_t o_width = size_t(hp.n_head) * hp.value_dim;

  size_t matmul_bytes = 0;
  auto need = [&](const WeightMatrix& w) {
    matmul_bytes = std::max(matmul_bytes, MatMulScratchBytes(w.type, w.n_in, B));
  };
  need(model.output);
  for (const LayerWeights& L : model.layers) {
    for (const WeightMatrix* w : {&L.wq, &L.wk, &L.wv, &L.wo, &L.w_gate, &L.w_up, &L.w_down}) {
      need(*w);
    }
  }

  s_ = std::make_unique<Scratch>();
  s_->k_cache = Buffer<float>(hp.n_layer * n_ctx * kv_width);
  s_->v_cache = Buffer<float>(hp.n_layer * n_ctx * v_width);
  s_->x = Buffer<float>(B * hp.n_embd);
  s_->xn = Buffer<float>(B * hp.n_embd);
  s_->q = Buffer<float>(B * q_width);
  s_->attn = Buffer<float>(B * o_width);
  s_->proj = Buffer<float>(B * hp.n_embd);
  s_->gate = Buffer<float>(B * hp.n_ff);
  s_->up = Buffer<float>(B * hp.n_ff);
  s_->logits = Buffer<float>(size_t(options_.max_logit_rows) * hp.n_vocab);
  s_->scores = Buffer<float>(size_t(pool_.size()) * n_ctx);
  s_->matmul = Buffer<uint8_t>(matmul_bytes);
}

Context::~Context() = default;

void Context::TruncateTo(int n) {
  if (n < 0 || n > n_past_) Fail("cannot truncate a context of ", n_past_, " positions to ", n);
  n_past_ = n;
}

std::span<const float> Context::logits(int i) const {
  const int n_vocab = model_.hparams().n_vocab;
  return {s_->logits.get() + static_cast<size_t>(i) * n_vocab, static_cast<size_t>(n_vocab)};
}

// The forward pass of the llama family (llama, qwen2, qwen3), top to bottom as
// in FORMATS.md 3.4. Every step works row by row or splits output columns, so
// a row's bits do not depend on the batch it came in.
void Context::Forward(std::span<const TokenId> tokens, bool all_logits) {
  const HParams& hp = model_.hparams();
  const int n = static_cast<int>(tokens.size());
  if (n == 0) return;
  if (n > options_.max_batch) {
    Fail("batch of ", n, " tokens exceeds the context's batch size ", options_.max_batch);
  }
  if (all_logits && n > options_.max_logit_rows) {
    Fail("asked for logits of ", n, " rows; the context returns at most ",
         options_.max_logit_rows);
  }
  if (n_past_ + n > options_.n_ctx) {
    Fail("context is full: ", n_past_, " + ", n, " tokens exceed n_ctx = ", options_.n_ctx,
         " (pass a larger -c)");
  }
  for (int i = 0; i < n; ++i) {
    if (tokens[i] < 0 || tokens[i] >= hp.n_vocab) {
      Fail("token id ", tokens[i], " is out of range for a vocabulary of ", hp.n_vocab);
    }
  }

  Scratch& s = *s_;
  const int n_embd = hp.n_embd;
  const int q_width = hp.n_head * hp.head_dim;
  const int kv_width = hp.n_head_kv * hp.head_dim;
  const int v_width = hp.n_head_kv * hp.value_dim;
  const int o_width = hp.n_head * hp.value_dim;
  const size_t n_ctx = options_.n_ctx;
  const bool adjacent_pairs = hp.rope_style == RopeStyle::kNormal;
  const AttentionShape shape{hp.n_head, hp.n_head_kv, hp.head_dim, hp.value_dim,
                             1.0f / std::sqrt(static_cast<float>(hp.head_dim))};
  auto matmul = [&](const WeightMatrix& w, const float* in, int rows, float* out) {
    MatMul(w, in, rows, out, s.matmul.get(), pool_);
  };

  float* x = s.x.get();  // [n, n_embd]
  for (int i = 0; i < n; ++i) {
    const WeightMatrix& e = model_.token_embd;
    DequantizeRow(e.type, static_cast<const uint8_t*>(e.data) + tokens[i] * e.row_bytes,
                  x + size_t(i) * n_embd, n_embd);
  }

  for (int il = 0; il < hp.n_layer; ++il) {
    const LayerWeights& L = model_.layers[il];
    float* k_cache = s.k_cache.get() + il * n_ctx * kv_width;  // [n_ctx, kv_width]
    float* v_cache = s.v_cache.get() + il * n_ctx * v_width;   // [n_ctx, v_width]
    float* k_new = k_cache + size_t(n_past_) * kv_width;       // [n, kv_width]
    float* v_new = v_cache + size_t(n_past_) * v_width;        // [n, v_width]

    // Attention: new keys and values go straight into the cache rows.
    for (int i = 0; i < n; ++i) {
      RmsNorm(x + size_t(i) * n_embd, L.attn_norm, n_embd, hp.norm_eps, s.xn.get() + size_t(i) * n_embd);
    }
    matmul(L.wq, s.xn.get(), n, s.q.get());
    matmul(L.wk, s.xn.get(), n, k_new);
    matmul(L.wv, s.xn.get(), n, v_new);
    for (int i = 0; i < n; ++i) {
      float* q = s.q.get() + size_t(i) * q_width;
      float* k = k_new + size_t(i) * kv_width;
      if (L.bq) AddInPlace(q, L.bq, q_width);
      if (L.bk) AddInPlace(k, L.bk, kv_width);
      if (L.bv) AddInPlace(v_new + size_t(i) * v_width, L.bv, v_width);
      if (hp.qk_norm) {
        for (int h = 0; h < hp.n_head; ++h) RmsNorm(q + h * hp.head_dim, L.q_norm, hp.head_dim, hp.norm_eps, q + h * hp.head_dim);
        for (int h = 0; h < hp.n_head_kv; ++h) RmsNorm(k + h * hp.head_dim, L.k_norm, hp.head_dim, hp.norm_eps, k + h * hp.head_dim);
      }
      const int pos = n_past_ + i;
      Rope(q, hp.n_head, hp.head_dim, hp.rope_dims, pos, hp.rope_base, model_.rope_freqs, adjacent_pairs);
      Rope(k, hp.n_head_kv, hp.head_dim, hp.rope_dims, pos, hp.rope_base, model_.rope_freqs, adjacent_pairs);
    }
    pool_.Run(int64_t(n) * hp.n_head, [&](int64_t task, int thread) {
      const int i = static_cast<int>(task / hp.n_head);
      const int h = static_cast<int>(task % hp.n_head);
      AttendOneHead(shape, h, s.q.get() + size_t(i) * q_width, k_cache, kv_width, v_cache,
                    v_width, n_past_ + i + 1, s.scores.get() + size_t(thread) * n_ctx,
                    s.attn.get() + size_t(i) * o_width);
    });
    matmul(L.wo, s.attn.get(), n, s.proj.get());
    for (int i = 0; i < n; ++i) AddInPlace(x + size_t(i) * n_embd, s.proj.get() + size_t(i) * n_embd, n_embd);

    // Feed-forward: down(silu(gate x) * up x).
    for (int i = 0; i < n; ++i) {
      RmsNorm(x + size_t(i) * n_embd, L.ffn_norm, n_embd, hp.norm_eps, s.xn.get() + size_t(i) * n_embd);
    }
    matmul(L.w_gate, s.xn.get(), n, s.gate.get());
    matmul(L.w_up, s.xn.get(), n, s.up.get());
    SiluMul(s.gate.get(), s.up.get(), n * hp.n_ff, s.gate.get());
    matmul(L.w_down, s.gate.get(), n, s.proj.get());
    for (int i = 0; i < n; ++i) AddInPlace(x + size_t(i) * n_embd, s.proj.get() + size_t(i) * n_embd, n_embd);
  }

  const int first = all_logits ? 0 : n - 1;
  n_logit_rows_ = n - first;
  for (int i = first; i < n; ++i) {
    RmsNorm(x + size_t(i) * n_embd, model_.output_norm, n_embd, hp.norm_eps,
            s.xn.get() + size_t(i - first) * n_embd);
  }
  matmul(model_.output, s.xn.get(), n_logit_rows_, s.logits.get());
  n_past_ += n;
}

}  // namespace kakeya
