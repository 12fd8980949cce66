#include "model/forward_pass.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>

#include "base/error.h"
#include "base/portable_math.h"
#include "kernels/cpu/dequant.h"
#include "kernels/cpu/attention.h"
#include "kernels/cpu/ops.h"

namespace kakeya {

template <typename T>
Buffer<T>::Buffer(size_t n) {
  const size_t bytes = std::max<size_t>(64, ((n * sizeof(T) + 63) / 64) * 64);
  data_.reset(static_cast<T*>(std::aligned_alloc(64, bytes)));
  if (!data_) Fail("out of memory allocating ", bytes, " bytes of context buffers");
  std::memset(data_.get(), 0, bytes);
}
template class Buffer<float>;
template class Buffer<int>;
template class Buffer<uint8_t>;
template class Buffer<const float*>;

namespace {

AttentionShape AttentionShapeOf(const AttentionSpec& a) {
  return {a.n_head, a.n_head_kv, a.head_dim, a.value_dim, a.scale, a.softcap};
}

}  // namespace

ForwardBuffers::ForwardBuffers(const Model& model, int max_rows, int max_logit_rows, int n_ctx, int n_threads)
    : max_rows(max_rows) {
  const HParams& hp = model.hparams();
  const size_t B = max_rows;
  int q_width = 0, k_width = 0, v_width = 0, out_width = 0, n_ff = hp.n_embd_per_layer;
  int n_expert = 0, n_used = 0, expert_ff = 0;
  size_t matmul_bytes = 0;
  auto need = [&](const WeightMatrix& w, size_t rows) {
    matmul_bytes = std::max(matmul_bytes, MatMulScratchBytes(w.type, w.n_in, rows));
  };
  need(model.output, B);
  if (model.per_layer_model_proj.data != nullptr) need(model.per_layer_model_proj, B);
  bool gated_attention = false, deltanet = false;
  for (const Layer& L : model.layers) {
    const AttentionSpec& a = L.attn;
    q_width = std::max(q_width, a.q_width());
    k_width = std::max(k_width, a.k_width());
    v_width = std::max(v_width, a.v_width());
    out_width = std::max(out_width, a.out_width());
    gated_attention |= a.gated_output;
    deltanet |= L.deltanet.present();
    if (!L.deltanet.present()) {
      attention_floats = std::max(attention_floats, AttendScratchFloats(AttentionShapeOf(a), a.max_rows_per_task(), n_ctx));
    }
    n_ff = std::max({n_ff, L.ffn.n_ff(), L.shared_expert.n_ff()});
    n_expert = std::max(n_expert, L.moe.n_expert);
    n_used = std::max(n_used, L.moe.n_used);
    expert_ff = std::max(expert_ff, L.moe.n_ff());
    for (const WeightMatrix* w : L.Matrices()) need(*w, B);
    // Expert matrices see every (row, chosen expert) pair of the batch.
    for (const std::vector<WeightMatrix>* experts : {&L.moe.gate, &L.moe.up, &L.moe.down}) {
      if (!experts->empty()) need((*experts)[0], B * L.moe.n_used);
    }
    const int index = static_cast<int>(std::find(ropes.begin(), ropes.end(), a.rope) - ropes.begin());
    if (index == static_cast<int>(ropes.size())) ropes.push_back(a.rope);
    rope_of_layer.push_back(index);
    rope_floats = std::max(rope_floats, a.rope.dims);
  }
  const size_t n_embd = hp.n_embd;
  tokens = Buffer<TokenId>(B);
  slices.reserve(kMaxSequences);
  x = Buffer<float>(B * n_embd);
  xn = Buffer<float>(B * n_embd);
  xn2 = Buffer<float>(B * n_embd);
  proj = Buffer<float>(B * n_embd);
  proj2 = Buffer<float>(B * n_embd);
  q = Buffer<float>(B * q_width);
  k = Buffer<float>(B * k_width);
  v = Buffer<float>(B * v_width);
  attn = Buffer<float>(B * out_width);
  gate = Buffer<float>(B * n_ff);
  up = Buffer<float>(B * n_ff);
  logits = Buffer<float>(size_t(max_logit_rows) * model.n_logits());
  scores = Buffer<float>(size_t(n_threads) * attention_floats);
  matmul = Buffer<uint8_t>(matmul_bytes);
  rope = Buffer<float>(B * ropes.size() * rope_floats);
  if (n_expert > 0) {
    const size_t max_pairs = B * n_used;
    router_logits = Buffer<float>(B * n_expert);
    chosen_expert = Buffer<int>(max_pairs);
    chosen_weight = Buffer<float>(max_pairs);
    pair_slot = Buffer<int>(max_pairs);
    expert_rows = Buffer<int>(2 * (n_expert + 1));
    expert_in = Buffer<float>(max_pairs * n_embd);
    expert_gate = Buffer<float>(max_pairs * expert_ff);
    expert_up = Buffer<float>(max_pairs * expert_ff);
    expert_out = Buffer<float>(max_pairs * n_embd);
    groups.reserve(2 * n_expert);
    routing_margins = Buffer<float>(B * hp.n_layer);
  }
  if (hp.n_embd_per_layer > 0) {
    per_layer_inputs = Buffer<float>(B * hp.n_layer * hp.n_embd_per_layer);
    per_layer_token = Buffer<float>(size_t(hp.n_layer) * hp.n_embd_per_layer);
  }
  if (gated_attention) attn_gate = Buffer<float>(B * 2 * q_width);
  if (hp.n_hyper > 0) AllocateHybrid(model, n_ctx, n_threads);
  if (deltanet) {
    AllocateDeltaNet(model, n_threads);
    recurrent_plans.reserve(kMaxSequences);
  }
}

ForwardPass::ForwardPass(const Model& model, ForwardBuffers& buffers, std::span<const SequenceSlice> slices,
                         ThreadPool& pool)
    : model_(model),
      b_(buffers),
      slices_(slices),
      pool_(pool),
      n_rows_(slices.empty() ? 0 : slices.back().first_row + slices.back().n_rows) {}

float* ForwardPass::residual() const { return b_.x.get(); }
float* ForwardPass::normed() const { return b_.xn.get(); }
float* ForwardPass::hidden() const { return model_.hparams().n_hyper > 0 ? b_.streams.get() : b_.x.get(); }
float* ForwardPass::normed2() const { return b_.xn2.get(); }
float* ForwardPass::branch() const { return b_.proj.get(); }
float* ForwardPass::branch2() const { return b_.proj2.get(); }

void ForwardPass::RmsNorm(const float* in, const float* weight, float* out) const {
  const int n_embd = model_.hparams().n_embd;
  const float eps = model_.hparams().norm_eps;
  for (int i = 0; i < n_rows_; ++i) {
    kakeya::RmsNorm(in + size_t(i) * n_embd, weight, n_embd, eps, out + size_t(i) * n_embd);
  }
}

void ForwardPass::Add(float* x, const float* y) const {
  AddInPlace(x, y, n_rows_ * model_.hparams().n_embd);
}

void ForwardPass::Scale(float* x, float s) const { kakeya::Scale(x, n_rows_ * model_.hparams().n_embd, s); }

void ForwardPass::Multiply(float* x, const float* w) const {
  const int n_embd = model_.hparams().n_embd;
  for (int i = 0; i < n_rows_; ++i) {
    float* row = x + size_t(i) * n_embd;
    for (int j = 0; j < n_embd; ++j) row[j] *= w[j];
  }
}

void ForwardPass::ScaleRowsBySigmoidOf(float* x, const float* w, const float* in) const {
  const int n_embd = model_.hparams().n_embd;
  for (int i = 0; i < n_rows_; ++i) {
    const float* row_in = in + size_t(i) * n_embd;
    float dot = 0.0f;
    for (int j = 0; j < n_embd; ++j) dot += w[j] * row_in[j];
    kakeya::Scale(x + size_t(i) * n_embd, n_embd, static_cast<float>(PortableSigmoid(dot)));
  }
}

void ForwardPass::Embed(const TokenId* tokens) {
  const HParams& hp = model_.hparams();
  const WeightMatrix& e = model_.token_embd;
  for (int i = 0; i < n_rows_; ++i) {
    float* row = residual() + size_t(i) * hp.n_embd;
    DequantizeRow(e.type, static_cast<const uint8_t*>(e.data) + tokens[i] * e.row_bytes, row, hp.n_embd);
    if (hp.embd_scale > 0) kakeya::Scale(row, hp.n_embd, hp.embd_scale);
  }
}

void ForwardPass::PrepareRope() {
  const int n_ropes = static_cast<int>(b_.ropes.size());
  for (const SequenceSlice& s : slices_) {
    for (int i = s.first_row; i < s.first_row + s.n_rows; ++i) {
      for (int r = 0; r < n_ropes; ++r) {
        const RopeSpec& rope = b_.ropes[r];
        float* angles = b_.rope.get() + (size_t(i) * n_ropes + r) * b_.rope_floats;
        RopeAngles(rope.dims, s.first_pos + (i - s.first_row), rope.base, rope.freq_factors, angles);
      }
    }
  }
}

// Self-attention (docs/formats/architectures.md 3.2-3.5).
void ForwardPass::Attention(const Layer& L, int il, const float* in, float* out) {
  const AttentionSpec& a = L.attn;
  const float eps = model_.hparams().norm_eps;
  const int q_width = a.q_width(), k_width = a.k_width(), v_width = a.v_width(), o_width = a.out_width();
  float* const q_rows = b_.q.get();
  float* const k_rows = b_.k.get();
  float* const v_rows = b_.v.get();
  float* const o_rows = b_.attn.get();
  void* const scratch = b_.matmul.get();
  // A gated layer's wq gives each head's query and gate side by side.
  float* const wq_rows = a.gated_output ? b_.attn_gate.get() : q_rows;
  if (!L.writes_kv(il)) {
    MatMul(L.wq, in, n_rows_, wq_rows, scratch, pool_);
  } else if (L.wv.data != nullptr) {
    const MatMulOutput qkv[] = {{&L.wq, wq_rows}, {&L.wk, k_rows}, {&L.wv, v_rows}};
    MatMulSharedInput(qkv, in, n_rows_, scratch, pool_);
  } else {
    const MatMulOutput qk[] = {{&L.wq, wq_rows}, {&L.wk, k_rows}};
    MatMulSharedInput(qk, in, n_rows_, scratch, pool_);
  }

  const bool adjacent_pairs = a.rope.style == RopeStyle::kNormal;
  const int n_ropes = static_cast<int>(b_.ropes.size());
  const int rope_index = b_.rope_of_layer[il];
  for (const SequenceSlice& s : slices_) {
    LayerCache& cache = s.cache->layer(a.kv_layer);
    for (int i = s.first_row; i < s.first_row + s.n_rows; ++i) {
      float* q = q_rows + size_t(i) * q_width;
      if (a.gated_output) {  // [query, gate] per head: queries to q_rows, gates packed to the row's front
        float* both = wq_rows + size_t(i) * 2 * q_width;
        for (int h = 0; h < a.n_head; ++h) {
          std::memcpy(q + h * a.head_dim, both + 2 * h * a.head_dim, sizeof(float) * a.head_dim);
          std::memmove(both + h * a.head_dim, both + (2 * h + 1) * a.head_dim, sizeof(float) * a.head_dim);
        }
      }
      if (L.bq) AddInPlace(q, L.bq, q_width);
      if (L.q_norm) {
        for (int h = 0; h < a.n_head; ++h) kakeya::RmsNorm(q + h * a.head_dim, L.q_norm, a.head_dim, eps, q + h * a.head_dim);
      }
      const float* angles = b_.rope.get() + (size_t(i) * n_ropes + rope_index) * b_.rope_floats;
      Rope(q, a.n_head, a.head_dim, a.rope.dims, angles, adjacent_pairs);
      if (!L.writes_kv(il)) continue;

      float* k = k_rows + size_t(i) * k_width;
      float* v = v_rows + size_t(i) * v_width;
      if (a.values_from_keys) std::memcpy(v, k, sizeof(float) * v_width);  // before the key norm
      if (L.bk) AddInPlace(k, L.bk, k_width);
      if (L.bv) AddInPlace(v, L.bv, v_width);
      if (L.k_norm) {
        for (int h = 0; h < a.n_head_kv; ++h) kakeya::RmsNorm(k + h * a.head_dim, L.k_norm, a.head_dim, eps, k + h * a.head_dim);
      }
      if (a.norm_values) {
        for (int h = 0; h < a.n_head_kv; ++h) kakeya::RmsNorm(v + h * a.value_dim, nullptr, a.value_dim, eps, v + h * a.value_dim);
      }
      Rope(k, a.n_head_kv, a.head_dim, a.rope.dims, angles, adjacent_pairs);
      const int pos = s.first_pos + (i - s.first_row);
      cache.Write(pos, k, v);
    }
    // A coded cache codes the positions these rows read coded (ADR 0013).
    if (L.writes_kv(il)) cache.CodeUpTo(CodedEnd(s.first_pos + s.n_rows - 1, cache.split()));
  }

  // Tasks of (a slice's rows, KV head): about two per thread, each row's
  // result the same however the rows are grouped. Every sequence attends to
  // its own cache only.
  const int rows_per_task = a.rows_per_task(n_rows_, pool_.size());
  int64_t n_tasks = 0;
  for (const SequenceSlice& s : slices_) n_tasks += int64_t((s.n_rows + rows_per_task - 1) / rows_per_task) * a.n_head_kv;
  const AttentionShape shape = AttentionShapeOf(a);
  pool_.Run(n_tasks, [&](int64_t task, int thread) {
    // The slice of this task: tasks are numbered slice by slice.
    size_t si = 0;
    for (int64_t tasks_of_slice; task >= (tasks_of_slice = int64_t((slices_[si].n_rows + rows_per_task - 1) /
                                                                   rows_per_task) * a.n_head_kv);
         ++si) {
      task -= tasks_of_slice;
    }
    const SequenceSlice& s = slices_[si];
    const LayerCache& cache = s.cache->layer(a.kv_layer);
    const KvView kv = cache.view();
    const int r0 = static_cast<int>(task / a.n_head_kv) * rows_per_task;  // within the slice
    const int row = s.first_row + r0;
    const AttentionRows rows{std::min(rows_per_task, s.n_rows - r0), s.first_pos + r0, cache.window(),
                             q_rows + size_t(row) * q_width, q_width, o_rows + size_t(row) * o_width, o_width};
    AttendKvHead(shape, static_cast<int>(task % a.n_head_kv), rows, kv,
                 b_.scores.get() + size_t(thread) * b_.attention_floats);
  });
  if (a.gated_output) {
    for (int i = 0; i < n_rows_; ++i) {
      float* o = o_rows + size_t(i) * o_width;
      const float* gate = b_.attn_gate.get() + size_t(i) * 2 * q_width;
      for (int c = 0; c < o_width; ++c) o[c] *= static_cast<float>(PortableSigmoid(gate[c]));
    }
  }
  MatMul(L.wo, o_rows, n_rows_, out, scratch, pool_);
}

namespace {

// `clamp` > 0: deepseek4's clamped SwiGLU, silu(min(g, clamp)) * clamp(u,
// -clamp, clamp), with ggml's silu (x / (1 + e^-x)).
void Activate(FfnActivation act, float clamp, float* gate, const float* up, int64_t n) {
  if (clamp > 0.0f) {
    for (int64_t i = 0; i < n; ++i) {
      const float g = std::min(gate[i], clamp);
      gate[i] = g / (1.0f + static_cast<float>(PortableExp(-g))) * std::clamp(up[i], -clamp, clamp);
    }
  } else if (act == FfnActivation::kGelu) {
    GeluMul(gate, up, static_cast<int>(n), gate);
  } else {
    SiluMul(gate, up, static_cast<int>(n), gate);
  }
}

}  // namespace

void ForwardPass::Ffn(const DenseFfn& f, FfnActivation act, const float* in, float* out) {
  const int r0 = feed_forward_first_row_, n = n_rows_ - r0;
  const MatMulOutput gate_up[] = {{&f.gate, b_.gate.get()}, {&f.up, b_.up.get()}};
  MatMulSharedInput(gate_up, in + size_t(r0) * f.gate.n_in, n, b_.matmul.get(), pool_);
  Activate(act, f.clamp, b_.gate.get(), b_.up.get(), int64_t(n) * f.n_ff());
  MatMul(f.down, b_.gate.get(), n, out + size_t(r0) * f.down.n_out, b_.matmul.get(), pool_);
}

namespace {

// Row r's experts (docs/formats/architectures.md 3.5, 3.6; llama.cpp build_moe_ffn): the
// router's probabilities (softmax or sigmoid of the logits), the n_used
// largest after the selection bias (ties to the lower index), their unbiased
// probabilities as weights, renormalized to sum 1 (the sum clamped below at
// F16's smallest normal, as llama.cpp does) and scaled. Returns the margin by
// which the last chosen expert beat the best unchosen one; with
// `take_runner_up`, that runner-up replaces it (RoutingOverride).
float Route(const MixtureOfExperts& m, TokenId token, float* logits, bool take_runner_up, int* experts,
            float* weights) {
  const int n = m.n_expert, K = m.n_used;
  if (m.gating == ExpertGating::kSqrtSoftplus) {
    for (int e = 0; e < n; ++e) {
      const float x = logits[e];
      logits[e] = std::sqrt(x > 20.0f ? x : static_cast<float>(PortableLog(1.0f + static_cast<float>(PortableExp(x)))));
    }
  } else if (m.gating == ExpertGating::kSoftmax) {
    const float max = *std::max_element(logits, logits + n);
    double sum = 0;
    for (int e = 0; e < n; ++e) sum += (logits[e] = static_cast<float>(PortableExp(logits[e] - max)));
    const float inv_sum = static_cast<float>(1.0 / sum);
    for (int e = 0; e < n; ++e) logits[e] *= inv_sum;
  } else {
    for (int e = 0; e < n; ++e) logits[e] = 1.0f / (1.0f + static_cast<float>(PortableExp(-logits[e])));
  }
  auto selection = [&](int e) { return m.selection_bias ? logits[e] + m.selection_bias[e] : logits[e]; };
  auto best_unchosen = [&](int k) {
    int best = -1;
    for (int e = 0; e < n; ++e) {
      if (std::find(experts, experts + k, e) != experts + k) continue;
      if (best < 0 || selection(e) > selection(best)) best = e;
    }
    return best;
  };
  float margin = INFINITY;
  if (m.token_experts != nullptr) {  // routed by the token alone: no near-ties
    std::copy_n(m.token_experts + size_t(token) * K, K, experts);
  } else {
    for (int k = 0; k < K; ++k) experts[k] = best_unchosen(k);
    const int runner_up = K < n ? best_unchosen(K) : -1;
    if (runner_up >= 0) margin = selection(experts[K - 1]) - selection(runner_up);
    if (take_runner_up && runner_up >= 0) experts[K - 1] = runner_up;
  }
  for (int k = 0; k < K; ++k) weights[k] = logits[experts[k]];
  if (m.normalize_weights) {
    float sum = 0;
    for (int k = 0; k < K; ++k) sum += weights[k];
    sum = std::max(sum, 6.103515625e-5f);
    for (int k = 0; k < K; ++k) weights[k] /= sum;
  }
  if (m.weight_scale != 1.0f) {
    for (int k = 0; k < K; ++k) weights[k] *= m.weight_scale;
  }
  return margin;
}

}  // namespace

// Rows are routed, then grouped by expert (a counting sort, rows in order
// within each expert), so that each touched expert's gate, up and down are
// streamed once for all of its rows in one MatMulGroups run each. A row's
// result depends only on its own routing and its own rows of the expert
// matmuls (row-invariant kernels), and its experts' outputs are summed in
// the router's order: the same bits whatever else is in the batch.
void ForwardPass::Experts(const MixtureOfExperts& m, int il, FfnActivation act, const float* in,
                          const float* router_in, float* out) {
  const int r0 = feed_forward_first_row_, n = n_rows_ - r0;
  const int K = m.n_used, n_embd = model_.hparams().n_embd, n_ff = m.n_ff();
  in += size_t(r0) * n_embd;
  out += size_t(r0) * n_embd;
  MatMul(m.router, router_in + size_t(r0) * n_embd, n, b_.router_logits.get(), b_.matmul.get(), pool_);
  int* const chosen = b_.chosen_expert.get();
  float* const weight = b_.chosen_weight.get();
  for (int r = 0; r < n; ++r) {
    const bool take_runner_up =
        std::find(b_.routing_overrides.begin(), b_.routing_overrides.end(), RoutingOverride{il, r0 + r}) !=
        b_.routing_overrides.end();
    b_.routing_margins.get()[size_t(il) * b_.max_rows + r0 + r] =
        Route(m, b_.tokens.get()[r0 + r], b_.router_logits.get() + size_t(r) * m.n_expert, take_runner_up,
              chosen + r * K, weight + r * K);
  }

  // Expert e's rows go to slots first[e] .. first[e + 1] - 1.
  int* const first = b_.expert_rows.get();
  int* const next = first + m.n_expert + 1;  // each expert's next free slot
  std::fill_n(first, m.n_expert + 1, 0);
  for (int p = 0; p < n * K; ++p) ++first[chosen[p] + 1];
  for (int e = 0; e < m.n_expert; ++e) first[e + 1] += first[e];
  std::copy_n(first, m.n_expert, next);
  int* const slot = b_.pair_slot.get();  // pair p = (row p / K, its k-th expert) sits at slot[p]
  for (int p = 0; p < n * K; ++p) {
    slot[p] = next[chosen[p]]++;
    std::memcpy(b_.expert_in.get() + size_t(slot[p]) * n_embd, in + size_t(p / K) * n_embd, sizeof(float) * n_embd);
  }

  const int n_pairs = n * K;
  std::vector<MatMulGroup>& groups = b_.groups;
  auto touched = [&](auto&& add_group) {
    groups.clear();
    for (int e = 0; e < m.n_expert; ++e) {
      if (first[e + 1] > first[e]) add_group(e, first[e], first[e + 1] - first[e]);
    }
  };
  touched([&](int e, int begin, int count) {
    groups.push_back({&m.gate[e], begin, count, b_.expert_gate.get() + size_t(begin) * n_ff});
    groups.push_back({&m.up[e], begin, count, b_.expert_up.get() + size_t(begin) * n_ff});
  });
  b_.experts_touched += static_cast<int>(groups.size() / 2);
  b_.expert_bytes_read += groups.size() / 2 * model_.expert_bytes(il);
  MatMulGroups(groups, b_.expert_in.get(), n_pairs, b_.matmul.get(), pool_);
  Activate(act, m.clamp, b_.expert_gate.get(), b_.expert_up.get(), int64_t(n_pairs) * n_ff);
  touched([&](int e, int begin, int count) {
    groups.push_back({&m.down[e], begin, count, b_.expert_out.get() + size_t(begin) * n_embd});
  });
  MatMulGroups(groups, b_.expert_gate.get(), n_pairs, b_.matmul.get(), pool_);

  // As llama.cpp: each expert's output times its scale, times its weight,
  // summed in the router's order.
  for (int r = 0; r < n; ++r) {
    float* o = out + size_t(r) * n_embd;
    for (int k = 0; k < K; ++k) {
      const int p = r * K + k;
      const float* y = b_.expert_out.get() + size_t(slot[p]) * n_embd;
      const float scale = m.expert_scale ? m.expert_scale[chosen[p]] : 1.0f;
      for (int j = 0; j < n_embd; ++j) {
        const float term = y[j] * scale * weight[p];
        o[j] = k == 0 ? term : o[j] + term;
      }
    }
  }
}

// Gemma 4 per-layer embeddings (llama.cpp gemma4.cpp build_inp_per_layer and
// project_per_layer_inputs): row r's input of layer l is (rms(proj_l(x0) /
// sqrt(n_embd), per_layer_proj_norm) + per_layer_token_embd[t]_l * sqrt(E))
// / sqrt(2), with x0 the scaled token embedding.
void ForwardPass::PreparePerLayerInputs(const TokenId* tokens) {
  const HParams& hp = model_.hparams();
  const int E = hp.n_embd_per_layer;
  if (E == 0) return;
  const int width = E * hp.n_layer;
  float* const inputs = b_.per_layer_inputs.get();
  MatMul(model_.per_layer_model_proj, residual(), n_rows_, inputs, b_.matmul.get(), pool_);
  const WeightMatrix& table = model_.per_layer_token_embd;
  const float proj_scale = 1.0f / std::sqrt(static_cast<float>(hp.n_embd));
  const float token_scale = std::sqrt(static_cast<float>(E));
  const float input_scale = 1.0f / std::sqrt(2.0f);
  for (int i = 0; i < n_rows_; ++i) {
    float* row = inputs + size_t(i) * width;
    float* token_row = b_.per_layer_token.get();
    DequantizeRow(table.type, static_cast<const uint8_t*>(table.data) + tokens[i] * table.row_bytes, token_row, width);
    for (int l = 0; l < hp.n_layer; ++l) {
      float* slice = row + l * E;
      kakeya::Scale(slice, E, proj_scale);
      kakeya::RmsNorm(slice, model_.per_layer_proj_norm, E, hp.norm_eps, slice);
      for (int j = 0; j < E; ++j) slice[j] = (slice[j] + token_row[l * E + j] * token_scale) * input_scale;
    }
  }
}

void ForwardPass::AddPerLayerInput(const Layer& L, int il) {
  const HParams& hp = model_.hparams();
  const int E = hp.n_embd_per_layer;
  float* const g = b_.gate.get();
  MatMul(L.per_layer_input.gate, residual(), n_rows_, g, b_.matmul.get(), pool_);
  for (int i = 0; i < n_rows_; ++i) {
    const float* input = b_.per_layer_inputs.get() + size_t(i) * E * hp.n_layer + size_t(il) * E;
    GeluMul(g + size_t(i) * E, input, E, g + size_t(i) * E);
  }
  MatMul(L.per_layer_input.proj, g, n_rows_, branch(), b_.matmul.get(), pool_);
  RmsNorm(branch(), L.per_layer_input.post_norm, branch());
  Add(residual(), branch());
}

}  // namespace kakeya
