// Qwen3.5's Gated DeltaNet layer (docs/formats/qwen35.md 3), over the rows
// of a forward, with its state in the sequence's RecurrentState
// (cache/recurrent_state.h, ADR 0017).
//
// A row's state update reads only the state the previous row left and the
// row's own inputs, in one fixed order of float operations, so the verify
// forward over L rows leaves the state L single steps leave, bit for bit,
// whatever the threads (tasks are (sequence, value head) pairs, each run by
// one thread from first row to last).
#include <algorithm>
#include <cmath>
#include <cstring>

#include "base/portable_math.h"
#include "kernels/cpu/ops.h"
#include "model/forward_pass.h"

namespace kakeya {

void ForwardBuffers::AllocateDeltaNet(const Model& model, int n_threads) {
  const size_t B = max_rows;
  int channels = 0, values = 0, heads = 0, state = 0;
  for (const Layer& L : model.layers) {
    const GatedDeltaNet& d = L.deltanet;
    if (!d.present()) continue;
    channels = std::max(channels, d.conv_channels());
    values = std::max(values, d.value_width());
    heads = std::max(heads, d.n_v_heads);
    state = std::max(state, d.head_k_dim * d.head_v_dim + d.head_v_dim);
  }
  deltanet_mixed = Buffer<float>(B * channels);
  deltanet_conv = Buffer<float>(B * channels);
  deltanet_z = Buffer<float>(B * values);
  deltanet_out = Buffer<float>(B * values);
  deltanet_beta = Buffer<float>(B * heads);
  deltanet_decay = Buffer<float>(B * heads);
  deltanet_state = Buffer<float>(size_t(n_threads) * state);
}

namespace {

float Sigmoid(float x) { return static_cast<float>(PortableSigmoid(x)); }
float Silu(float x) { return x * Sigmoid(x); }
// log(1 + e^x), as ggml: x itself past 20, where the two agree in float.
float Softplus(float x) { return x > 20.0f ? x : static_cast<float>(PortableLog(1.0 + PortableExp(x))); }

// x / sqrt(sum x^2 + eps): the reference's RMS norm with eps / n, scaled by 1 / sqrt(n).
void L2Normalize(float* x, int n, float eps) {
  float sum = 0.0f;
  for (int i = 0; i < n; ++i) sum += x[i] * x[i];
  const float scale = 1.0f / std::sqrt(sum + eps);
  for (int i = 0; i < n; ++i) x[i] *= scale;
}

// One row's inputs of the rule for one value head.
struct StepRow {
  const float* k;  // [head_k_dim], L2-normed
  const float* v;  // [head_v_dim]
  float log_decay;
  float beta;
};

// The gated delta rule on one head's state S [head_k_dim, head_v_dim]:
// S *= e^g; d = (v - S^T k) * beta; S += k d^T; and, for a row of the
// forward (q not null), o = S^T q / sqrt(head_k_dim). `u` is [head_v_dim]
// scratch. Each column of S is summed over k's index in order, so vector
// lanes never change a bit.
void DeltaRuleStep(const StepRow& r, int dk, int dv, float* S, float* u, const float* q, float* o) {
  const float decay = static_cast<float>(PortableExp(r.log_decay));
  std::fill_n(u, dv, 0.0f);
  for (int i = 0; i < dk; ++i) {
    float* row = S + size_t(i) * dv;
    const float ki = r.k[i];
    for (int c = 0; c < dv; ++c) {
      row[c] *= decay;
      u[c] += row[c] * ki;
    }
  }
  for (int c = 0; c < dv; ++c) u[c] = (r.v[c] - u[c]) * r.beta;
  if (q == nullptr) {
    for (int i = 0; i < dk; ++i) {
      float* row = S + size_t(i) * dv;
      const float ki = r.k[i];
      for (int c = 0; c < dv; ++c) row[c] += ki * u[c];
    }
    return;
  }
  std::fill_n(o, dv, 0.0f);
  for (int i = 0; i < dk; ++i) {
    float* row = S + size_t(i) * dv;
    const float ki = r.k[i], qi = q[i];
    for (int c = 0; c < dv; ++c) {
      row[c] += ki * u[c];
      o[c] += row[c] * qi;
    }
  }
  const float scale = 1.0f / std::sqrt(static_cast<float>(dk));
  for (int c = 0; c < dv; ++c) o[c] *= scale;
}

}  // namespace

void ForwardPass::DeltaNet(const Layer& L, int il, const float* in, float* out) {
  const GatedDeltaNet& d = L.deltanet;
  const float eps = model_.hparams().norm_eps;
  const int channels = d.conv_channels(), kw = d.key_width(), vw = d.value_width();
  const int Hk = d.n_k_heads, Hv = d.n_v_heads, dk = d.head_k_dim, dv = d.head_v_dim, kc = d.conv_kernel;
  float* const mixed = b_.deltanet_mixed.get();
  float* const conv = b_.deltanet_conv.get();
  float* const z = b_.deltanet_z.get();
  float* const beta = b_.deltanet_beta.get();
  float* const decay = b_.deltanet_decay.get();
  float* const o_rows = b_.deltanet_out.get();
  const MatMulOutput projections[] = {{&d.qkv, mixed}, {&d.gate, z}, {&d.beta, beta}, {&d.alpha, decay}};
  MatMulSharedInput(projections, in, n_rows_, b_.matmul.get(), pool_);

  // The causal convolution over each sequence's inputs, earlier positions'
  // from its ring, then SiLU; the ring then takes the rows a later forward
  // may read (all reads of this forward are done by then).
  for (const SequenceSlice& s : slices_) {
    const RecurrentState& rs = *s.cache->recurrent();
    pool_.Run(s.n_rows, [&](int64_t r, int) {
      const int row = s.first_row + static_cast<int>(r), pos = s.first_pos + static_cast<int>(r);
      float* y = conv + size_t(row) * channels;
      std::fill_n(y, channels, 0.0f);
      for (int j = 0; j < kc; ++j) {
        const int p = pos - (kc - 1) + j;
        if (p < 0) continue;
        const float* x = p < s.first_pos ? rs.conv_input(il, p) : mixed + size_t(s.first_row + p - s.first_pos) * channels;
        for (int c = 0; c < channels; ++c) y[c] += x[c] * d.conv[size_t(c) * kc + j];
      }
      for (int c = 0; c < channels; ++c) y[c] = Silu(y[c]);
      for (int h = 0; h < 2 * Hk; ++h) L2Normalize(y + size_t(h) * dk, dk, eps);
      for (int j = 0; j < Hv; ++j) {
        const size_t at = size_t(row) * Hv + j;
        decay[at] = Softplus(decay[at] + d.dt_bias[j]) * d.decay[j];
        beta[at] = Sigmoid(beta[at]);
      }
    });
    const int end = s.first_pos + s.n_rows;
    for (int pos = std::max(s.first_pos, end - rs.conv_slots(il)); pos < end; ++pos) {
      std::memcpy(rs.conv_input(il, pos), mixed + size_t(s.first_row + pos - s.first_pos) * channels,
                  sizeof(float) * channels);
    }
  }

  // The rule's inputs of the rows a trim may return to, kept for a replay.
  std::vector<RecurrentPlan>& plans = b_.recurrent_plans;
  plans.clear();
  for (const SequenceSlice& s : slices_) {
    const RecurrentState& rs = *s.cache->recurrent();
    const RecurrentPlan& plan = plans.emplace_back(rs.Plan(s.first_pos, s.n_rows, s.cache->n_committed()));
    for (int pos = std::max(s.first_pos, plan.new_base); pos < s.first_pos + s.n_rows; ++pos) {
      const int row = s.first_row + pos - s.first_pos;
      float* step = rs.step_inputs(il, pos);
      const float* y = conv + size_t(row) * channels;
      std::memcpy(step, y + kw, sizeof(float) * (kw + vw));
      std::memcpy(step + kw + vw, decay + size_t(row) * Hv, sizeof(float) * Hv);
      std::memcpy(step + kw + vw + Hv, beta + size_t(row) * Hv, sizeof(float) * Hv);
    }
  }

  // The recurrence, one task per (sequence, value head).
  const size_t state_stride = size_t(dk) * dv + dv;
  pool_.Run(int64_t(slices_.size()) * Hv, [&](int64_t task, int thread) {
    const SequenceSlice& s = slices_[task / Hv];
    const RecurrentPlan& plan = plans[task / Hv];
    const RecurrentState& rs = *s.cache->recurrent();
    const int j = static_cast<int>(task % Hv), kh = j % Hk;
    const size_t head = size_t(j) * dk * dv;
    float* const S = b_.deltanet_state.get() + thread * state_stride;
    float* const u = S + size_t(dk) * dv;
    const size_t state_bytes = sizeof(float) * dk * dv;
    float* const base = rs.state(il, plan.base_buffer) + head;
    auto step_at = [&](int pos) {
      if (pos < s.first_pos) {
        const float* step = rs.step_inputs(il, pos);
        return StepRow{step + size_t(kh) * dk, step + kw + size_t(j) * dv, step[kw + vw + j], step[kw + vw + Hv + j]};
      }
      const int row = s.first_row + pos - s.first_pos;
      const float* y = conv + size_t(row) * channels;
      return StepRow{y + kw + size_t(kh) * dk, y + 2 * kw + size_t(j) * dv, decay[size_t(row) * Hv + j],
                     beta[size_t(row) * Hv + j]};
    };
    // The base moves to new_base by a write of the state there, unless the
    // head already is that state (the buffers swap).
    const bool base_moves = plan.new_base > plan.base_pos && !plan.swap;
    if (plan.from_head) {
      if (base_moves && plan.new_base <= plan.first) {
        std::memcpy(S, base, state_bytes);
        for (int pos = plan.base_pos; pos < plan.new_base; ++pos) DeltaRuleStep(step_at(pos), dk, dv, S, u, nullptr, nullptr);
        std::memcpy(base, S, state_bytes);
      }
      std::memcpy(S, rs.state(il, 1 - plan.base_buffer) + head, state_bytes);
    } else {
      std::memcpy(S, base, state_bytes);
      for (int pos = plan.base_pos; pos < plan.first; ++pos) {
        if (base_moves && pos == plan.new_base) std::memcpy(base, S, state_bytes);
        DeltaRuleStep(step_at(pos), dk, dv, S, u, nullptr, nullptr);
      }
    }
    for (int pos = plan.first; pos < plan.first + plan.rows; ++pos) {
      if (base_moves && pos == plan.new_base && !(plan.from_head && plan.new_base <= plan.first)) {
        std::memcpy(base, S, state_bytes);
      }
      const int row = s.first_row + pos - s.first_pos;
      const float* q = conv + size_t(row) * channels + size_t(kh) * dk;
      DeltaRuleStep(step_at(pos), dk, dv, S, u, q, o_rows + size_t(row) * vw + size_t(j) * dv);
    }
    std::memcpy(rs.state(il, plan.head_buffer) + head, S, state_bytes);
  });

  // Each head's output RMS-normed, times SiLU of its gate, then projected.
  for (int i = 0; i < n_rows_; ++i) {
    for (int j = 0; j < Hv; ++j) {
      float* o = o_rows + size_t(i) * vw + size_t(j) * dv;
      const float* g = z + size_t(i) * vw + size_t(j) * dv;
      kakeya::RmsNorm(o, d.norm, dv, eps, o);
      for (int c = 0; c < dv; ++c) o[c] *= Silu(g[c]);
    }
  }
  MatMul(d.out, o_rows, n_rows_, out, b_.matmul.get(), pool_);
}

}  // namespace kakeya
