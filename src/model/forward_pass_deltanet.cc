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

// The columns a task runs every row on before the next ones: one head's
// [head_k_dim, 64] slab of the state (32 KiB on Qwen3.5) stays in L1 across
// the rows, and the whole state is read and written once per forward
// however many rows it replays.
static constexpr int kColumnBlock = 64;

void ForwardBuffers::AllocateDeltaNet(const Model& model, int n_threads) {
  const size_t B = max_rows;
  int channels = 0, values = 0, heads = 0, state = 0;
  for (const Layer& L : model.layers) {
    const GatedDeltaNet& d = L.deltanet;
    if (!d.present()) continue;
    channels = std::max(channels, d.conv_channels());
    values = std::max(values, d.value_width());
    heads = std::max(heads, d.n_v_heads);
    state = std::max(state, d.head_v_dim + d.head_k_dim * kColumnBlock);
  }
  deltanet_mixed = Buffer<float>(B * channels);
  deltanet_conv = Buffer<float>(B * channels);
  deltanet_z = Buffer<float>(B * values);
  deltanet_out = Buffer<float>(B * values);
  deltanet_beta = Buffer<float>(B * heads);
  deltanet_decay = Buffer<float>(B * heads);
  deltanet_scratch = Buffer<float>(size_t(n_threads) * state);
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
  float decay;     // e^g
  float beta;
};

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
        decay[at] = static_cast<float>(PortableExp(Softplus(decay[at] + d.dt_bias[j]) * d.decay[j]));
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

  // The recurrence, one task per (sequence, value head), in place on the
  // buffer the forward leaves its state in.
  const float o_scale = 1.0f / std::sqrt(static_cast<float>(dk));
  pool_.Run(int64_t(slices_.size()) * Hv, [&](int64_t task, int thread) {
    const SequenceSlice& s = slices_[task / Hv];
    const RecurrentPlan& plan = plans[task / Hv];
    const RecurrentState& rs = *s.cache->recurrent();
    const int j = static_cast<int>(task % Hv), kh = j % Hk;
    const size_t head = size_t(j) * dk * dv;
    float* const u = b_.deltanet_scratch.get() + size_t(thread) * (dv + dk * kColumnBlock);
    float* const slab = u + dv;
    float* const base = rs.state(il, plan.base_buffer) + head;
    float* const S = rs.state(il, plan.head_buffer) + head;
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
    // A slab of columns [c, c + width) as dk contiguous rows of width: in
    // place its rows would lie dv floats apart, all in a few sets of L1.
    auto slab_copy = [&](const float* from, size_t from_stride, float* to, size_t to_stride, int width) {
      for (int i = 0; i < dk; ++i) std::memcpy(to + i * to_stride, from + i * from_stride, sizeof(float) * width);
    };
    // Rows [from, to) on the slab of `state`'s columns [c, c + width); the
    // slab goes to the base before row new_base when `to_base`.
    auto run = [&](float* state, int from, int to, int c, int width, bool to_base) {
      slab_copy(state + c, dv, slab, width, width);
      for (int pos = from; pos < to; ++pos) {
        if (to_base && pos == plan.new_base) slab_copy(slab, width, base + c, dv, width);
        const StepRow r = step_at(pos);
        const bool output = pos >= plan.first;
        const int row = s.first_row + pos - s.first_pos;
        DeltaRuleStep(r.k, r.v + c, r.decay, r.beta, dk, width, width, slab, u,
                      output ? conv + size_t(row) * channels + size_t(kh) * dk : nullptr,
                      output ? o_rows + size_t(row) * vw + size_t(j) * dv + c : nullptr, o_scale);
      }
      slab_copy(slab, width, state + c, dv, width);
    };
    // The base moves to new_base by a write of the state there, unless the
    // head already is that state (the buffers swap). From the head, a base
    // that moves no further than the forward's first row is replayed in place.
    const bool base_moves = plan.new_base > plan.base_pos && !plan.swap;
    const bool base_alone = plan.from_head && base_moves && plan.new_base <= plan.first;
    const float* start = plan.from_head ? rs.state(il, 1 - plan.base_buffer) + head : base;
    if (start != S) std::memcpy(S, start, sizeof(float) * dk * dv);
    const int from = plan.from_head ? plan.first : plan.base_pos;
    for (int c = 0; c < dv; c += kColumnBlock) {
      const int width = std::min(kColumnBlock, dv - c);
      if (base_alone) run(base, plan.base_pos, plan.new_base, c, width, false);
      run(S, from, plan.first + plan.rows, c, width, base_moves && !base_alone);
    }
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
