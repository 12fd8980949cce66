// deepseek4's blocks of a forward pass (docs/formats/deepseek4.md): the
// hyper-connection streams and their mixers, and the hybrid attention over
// a raw window and compressed blocks (cache/compressed_kv.h). As every block
// of forward_pass.h, each works row by row, or splits (row, head) pairs over
// threads, so that a row's bits do not depend on the batch or the threads.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>

#include "base/portable_math.h"
#include "kernels/cpu/ops.h"
#include "model/forward_pass.h"

namespace kakeya {

void ForwardBuffers::AllocateHybrid(const Model& model, int n_ctx, int n_threads) {
  const HParams& hp = model.hparams();
  const size_t B = max_rows, W = size_t(hp.n_hyper) * hp.n_embd;
  int low_rank_width = 0, group_width = 0, o_lora = 0, block_width = 0, index_dim = 0, index_heads = 0;
  int top_k = 0, window = 0;
  for (const Layer& L : model.layers) {
    const HybridAttention& h = L.hybrid;
    const int groups = static_cast<int>(h.out_a.size());
    low_rank_width = std::max({low_rank_width, static_cast<int>(h.q_a.n_out), groups * static_cast<int>(h.out_a[0].n_out)});
    group_width = std::max(group_width, static_cast<int>(h.out_a[0].n_in));
    o_lora = std::max(o_lora, static_cast<int>(h.out_a[0].n_out));
    block_width = std::max(block_width, h.blocks.width());
    index_dim = std::max(index_dim, h.index_blocks.dim);
    index_heads = std::max(index_heads, h.index_heads);
    top_k = std::max(top_k, h.index_top_k);
    window = std::max(window, L.attn.window);
  }
  streams = Buffer<float>(B * W);
  streams_normed = Buffer<float>(B * W);
  mixes = Buffer<float>(B * kHyperMixes);
  low_rank = Buffer<float>(B * low_rank_width);
  group_in = Buffer<float>(B * group_width);
  group_out = Buffer<float>(B * o_lora);
  block_kv = Buffer<float>(B * block_width);
  block_score = Buffer<float>(B * block_width);
  index_kv = Buffer<float>(B * 2 * index_dim);
  index_score = Buffer<float>(B * 2 * index_dim);
  index_q = Buffer<float>(B * index_heads * index_dim);
  index_weights = Buffer<float>(B * index_heads);
  selected_blocks = Buffer<int>(B * std::max(top_k, 1));
  index_dots = Buffer<float>(size_t(index_heads) * (size_t(n_ctx) / 4 + 2));
  // A query's keys: its raw window (and the later rows of a block that is
  // not causal) and at most every block of ratio 4.
  hybrid_floats = size_t(window) + B + size_t(n_ctx) / 4 + 2;
  hybrid_scores = Buffer<float>(size_t(n_threads) * hybrid_floats);
  hybrid_order = Buffer<int>(size_t(n_threads) * hybrid_floats);
  hybrid_rows = Buffer<const float*>(size_t(n_threads) * hybrid_floats);
  int rope_dims = 0;
  for (const Layer& L : model.layers) rope_dims = std::max(rope_dims, L.hybrid.rope.dims);
  hybrid_angles = Buffer<float>(B * 2 * rope_dims);
}

namespace {

float Sigmoid(float x) { return 1.0f / (1.0f + static_cast<float>(PortableExp(-x))); }

// cos then sin of the rotation at `pos` (sin negated for the inverse), as
// ggml's rope cache with YaRN (ggml_rope_cache_init, rope_yarn).
void YarnAngles(const YarnRope& r, int pos, bool inverse, float* cos_sin) {
  const int half = r.dims / 2;
  const float theta_scale = static_cast<float>(PortablePow(r.base, -2.0f / static_cast<float>(r.dims)));
  float mscale = r.attn_factor;
  if (r.ext_factor != 0.0f) mscale *= 1.0f + 0.1f * static_cast<float>(PortableLog(1.0f / r.freq_scale));
  float theta_extrap = static_cast<float>(pos);
  for (int i = 0; i < half; ++i) {
    float theta = r.freq_scale * theta_extrap;
    if (r.ext_factor != 0.0f) {
      const float y = (static_cast<float>(i) - r.corr_low) / std::max(0.001f, r.corr_high - r.corr_low);
      const float ramp_mix = (1.0f - std::min(1.0f, std::max(0.0f, y))) * r.ext_factor;
      theta = theta * (1.0f - ramp_mix) + theta_extrap * ramp_mix;
    }
    double s, c;
    PortableSinCos(theta, &s, &c);
    cos_sin[i] = static_cast<float>(c) * mscale;
    cos_sin[half + i] = static_cast<float>(s) * mscale * (inverse ? -1.0f : 1.0f);
    theta_extrap *= theta_scale;
  }
}

// The rotation (angles of YarnAngles) of the last `dims` values of each of
// n_heads heads of `dim`.
void RopeTail(const float* cos_sin, int dims, float* x, int n_heads, int dim) {
  Rope(x + (dim - dims), n_heads, dim, dims, cos_sin, /*adjacent_pairs=*/true);
}

// ggml's soft_max over n values in place: exp(x - max) summed in double,
// then scaled by the float inverse of the sum; `sink` (-inf: none) joins the
// denominator only.
void SoftMax(float* x, int n, float sink) {
  float max = sink;
  for (int i = 0; i < n; ++i) max = std::max(max, x[i]);
  double sum = 0;
  for (int i = 0; i < n; ++i) sum += (x[i] = static_cast<float>(PortableExp(x[i] - max)));
  if (sink != -INFINITY) sum += PortableExp(sink - max);
  const float inv = static_cast<float>(1.0 / sum);
  for (int i = 0; i < n; ++i) x[i] *= inv;
}

}  // namespace

void Deepseek4RawKey(const HybridAttention& h, const float* kv, int pos, float eps, float* key) {
  float cos_sin[2 * 512];  // the loader caps rope dims at 512
  YarnAngles(h.rope, pos, false, cos_sin);
  kakeya::RmsNorm(kv, h.kv_norm, static_cast<int>(h.kv.n_out), eps, key);
  RopeTail(cos_sin, h.rope.dims, key, 1, static_cast<int>(h.kv.n_out));
}

void ForwardPass::BeginHyperStreams() {
  const HParams& hp = model_.hparams();
  if (hp.n_hyper == 0) return;
  const size_t E = hp.n_embd;
  for (int r = 0; r < n_rows_; ++r) {
    for (int h = 0; h < hp.n_hyper; ++h) {
      std::memcpy(b_.streams.get() + (size_t(r) * hp.n_hyper + h) * E, residual() + r * E, sizeof(float) * E);
    }
  }
}

// HyperPre's first half: the mixes of each row's RMS-normed streams.
void ForwardPass::HyperPre(const HyperMixer& m, float* out) {
  const HParams& hp = model_.hparams();
  const int E = hp.n_embd, W = kHyperStreams * E;
  for (int r = 0; r < n_rows_; ++r) {
    kakeya::RmsNorm(b_.streams.get() + size_t(r) * W, nullptr, W, hp.norm_eps, b_.streams_normed.get() + size_t(r) * W);
  }
  MatMul(m.fn, b_.streams_normed.get(), n_rows_, b_.mixes.get(), b_.matmul.get(), pool_);
  const float eps = hp.hyper_eps;
  for (int r = 0; r < n_rows_; ++r) {
    float* mix = b_.mixes.get() + size_t(r) * kHyperMixes;
    float* pre = mix;
    float* post = mix + kHyperStreams;
    float* comb = mix + 2 * kHyperStreams;  // comb[dst + 4 * src]
    for (int h = 0; h < kHyperStreams; ++h) {
      pre[h] = Sigmoid(pre[h] * m.scale[0] + m.base[h]) + eps;
      post[h] = 2.0f * Sigmoid(post[h] * m.scale[1] + m.base[kHyperStreams + h]);
    }
    // Sinkhorn: a softmax over dst for each src, then columns and rows
    // normalised in turn (ggml's fused dsv4_hc_comb, in its order).
    constexpr int S = kHyperStreams;
    for (int src = 0; src < S; ++src) {
      float* col = comb + S * src;
      float max = -INFINITY;
      for (int dst = 0; dst < S; ++dst) max = std::max(max, col[dst] = col[dst] * m.scale[2] + m.base[2 * S + dst + S * src]);
      float sum = 0.0f;
      for (int dst = 0; dst < S; ++dst) sum += (col[dst] = static_cast<float>(PortableExp(col[dst] - max)));
      const float inv = 1.0f / sum;
      for (int dst = 0; dst < S; ++dst) col[dst] = col[dst] * inv + eps;
    }
    auto normalize = [&](bool over_src) {
      for (int a = 0; a < S; ++a) {
        float sum = eps;
        for (int b = 0; b < S; ++b) sum += over_src ? comb[a + S * b] : comb[b + S * a];
        const float inv = 1.0f / sum;
        for (int b = 0; b < S; ++b) (over_src ? comb[a + S * b] : comb[b + S * a]) *= inv;
      }
    };
    normalize(true);
    for (int i = 1; i < hp.hyper_sinkhorn_iterations; ++i) {
      normalize(false);
      normalize(true);
    }
    const float* x = b_.streams.get() + size_t(r) * W;
    float* o = out + size_t(r) * E;
    for (int i = 0; i < E; ++i) {
      float sum = 0.0f;
      for (int h = 0; h < S; ++h) sum += x[h * E + i] * pre[h];
      o[i] = sum;
    }
  }
}

void ForwardPass::HyperPost(const float* branch) {
  const int E = model_.hparams().n_embd, S = kHyperStreams;
  for (int r = 0; r < n_rows_; ++r) {
    const float* mix = b_.mixes.get() + size_t(r) * kHyperMixes;
    const float* post = mix + S;
    const float* comb = mix + 2 * S;
    float* x = b_.streams.get() + size_t(r) * S * E;
    const float* y = branch + size_t(r) * E;
    for (int i = 0; i < E; ++i) {
      float old[kHyperStreams];
      for (int h = 0; h < S; ++h) old[h] = x[h * E + i];
      for (int dst = 0; dst < S; ++dst) {
        float sum = y[i] * post[dst];
        for (int src = 0; src < S; ++src) sum += old[src] * comb[dst + S * src];
        x[dst * E + i] = sum;
      }
    }
  }
}

void ForwardPass::EndHyperStreams() {
  const HParams& hp = model_.hparams();
  if (hp.n_hyper == 0) return;
  const HyperMixer& m = model_.hc_head;
  const int E = hp.n_embd, W = kHyperStreams * E;
  for (int r = 0; r < n_rows_; ++r) {
    kakeya::RmsNorm(b_.streams.get() + size_t(r) * W, nullptr, W, hp.norm_eps, b_.streams_normed.get() + size_t(r) * W);
  }
  MatMul(m.fn, b_.streams_normed.get(), n_rows_, b_.mixes.get(), b_.matmul.get(), pool_);
  for (int r = 0; r < n_rows_; ++r) {
    const float* mix = b_.mixes.get() + size_t(r) * kHyperStreams;  // the head mixes kHyperStreams values
    float pre[kHyperStreams];
    for (int h = 0; h < kHyperStreams; ++h) pre[h] = Sigmoid(mix[h] * m.scale[0] + m.base[h]) + hp.hyper_eps;
    const float* x = b_.streams.get() + size_t(r) * W;
    for (int i = 0; i < E; ++i) {
      float sum = 0.0f;
      for (int h = 0; h < kHyperStreams; ++h) sum += x[h * E + i] * pre[h];
      residual()[size_t(r) * E + i] = sum;
    }
  }
}

// The inputs of each row's position into the compressor's ring, and the
// block of each row that ends one (docs/formats/deepseek4.md 4).
void ForwardPass::CompressBlocks(const Compressor& c, int il, const float* in, bool index) {
  const int width = c.width(), dim = c.dim;
  float* const kv = index ? b_.index_kv.get() : b_.block_kv.get();
  float* const score = index ? b_.index_score.get() : b_.block_score.get();
  const MatMulOutput outputs[] = {{&c.kv, kv}, {&c.gate, score}};
  MatMulSharedInput(outputs, in, n_rows_, b_.matmul.get(), pool_);
  const float eps = model_.hparams().norm_eps;
  const YarnRope& rope = model_.layers[il].hybrid.rope;
  for (const SequenceSlice& s : slices_) {
    const CompressedKv& cache = *s.cache->compressed();
    auto inputs = [&](int pos) { return index ? cache.index_inputs(il, pos) : cache.inputs(il, pos); };
    for (int i = s.first_row; i < s.first_row + s.n_rows; ++i) {
      const int pos = s.first_pos + (i - s.first_row);
      float* row = inputs(pos);
      std::memcpy(row, kv + size_t(i) * width, sizeof(float) * width);
      const float* ape = c.ape + size_t(pos % c.ratio) * width;
      for (int j = 0; j < width; ++j) row[width + j] = score[size_t(i) * width + j] + ape[j];
    }
    for (int i = s.first_row; i < s.first_row + s.n_rows; ++i) {
      const int pos = s.first_pos + (i - s.first_row);
      if ((pos + 1) % c.ratio != 0) continue;
      const int b = pos / c.ratio, start = pos + 1 - c.ratio;
      float* block = index ? cache.index_block(il, b) : cache.block(il, b);
      float w[2 * 128];
      float v[2 * 128];
      for (int ch = 0; ch < dim; ++ch) {
        // Ratio 4 overlaps: the previous block's positions through the first
        // half of the projections (none before 0), its own through the second.
        const int n = c.span();
        for (int j = 0; j < n; ++j) {
          const int p = start - (n - c.ratio) + j;
          const int col = c.ratio == 4 ? (j < c.ratio ? ch : dim + ch) : ch;
          if (p < 0) {
            v[j] = 0.0f, w[j] = -INFINITY;
            continue;
          }
          const float* r = inputs(p);
          v[j] = r[col];
          w[j] = r[width + col];
        }
        SoftMax(w, n, -INFINITY);
        double sum = 0;
        for (int j = 0; j < n; ++j) sum += double(v[j] * w[j]);
        block[ch] = static_cast<float>(sum);
      }
      kakeya::RmsNorm(block, c.norm, dim, eps, block);
      float cos_sin[512];
      YarnAngles(rope, start, false, cos_sin);
      RopeTail(cos_sin, rope.dims, block, 1, dim);
    }
  }
}

// Ratio-4 layers: each row's top-k blocks by the lightning indexer's score,
// into selected_blocks (docs/formats/deepseek4.md 4). A row whose visible
// blocks fit the top-k reads them all, unscored; otherwise its indexer
// heads' dot products with every visible block are one F32 MatMul (the
// blocks are its weight matrix), on all threads.
void ForwardPass::SelectBlocks(const Layer& L, int il, const float* in, const float* q_low_rank) {
  const HybridAttention& h = L.hybrid;
  const int IH = h.index_heads, ID = h.index_blocks.dim, K = h.index_top_k;
  MatMul(h.index_q_b, q_low_rank, n_rows_, b_.index_q.get(), b_.matmul.get(), pool_);
  MatMul(h.index_weights, in, n_rows_, b_.index_weights.get(), b_.matmul.get(), pool_);
  const float weight_scale = 1.0f / std::sqrt(static_cast<float>(ID * IH));
  float* const dots = b_.index_dots.get();     // [IH, n_visible]
  float* const score = b_.hybrid_scores.get();  // thread 0's: this runs on one thread between MatMuls
  int* const order = b_.hybrid_order.get();
  for (const SequenceSlice& s : slices_) {
    const CompressedKv& cache = *s.cache->compressed();
    for (int i = s.first_row; i < s.first_row + s.n_rows; ++i) {
      const int pos = s.first_pos + (i - s.first_row);
      const int n_visible = (pos + 1) / 4;
      int* selected = b_.selected_blocks.get() + size_t(i) * K;
      std::fill(selected, selected + K, -1);
      if (n_visible <= K) {
        for (int b = 0; b < n_visible; ++b) selected[b] = b;
        continue;
      }
      float* q = b_.index_q.get() + size_t(i) * IH * ID;
      RopeTail(b_.hybrid_angles.get() + size_t(i) * 2 * h.rope.dims, h.rope.dims, q, IH, ID);
      const WeightMatrix blocks{DType::kF32, ID, n_visible, cache.index_blocks(il), int64_t{ID} * int64_t{sizeof(float)}};
      MatMul(blocks, q, IH, dots, b_.matmul.get(), pool_);
      // A block's score adds its heads' terms in head order, as one sum per
      // block would, but a head at a time over the blocks (contiguous, vectorized).
      const float* weights = b_.index_weights.get() + size_t(i) * IH;
      std::fill_n(score, n_visible, 0.0f);
      for (int hd = 0; hd < IH; ++hd) {
        const float w = weights[hd] * weight_scale;
        const float* d = dots + size_t(hd) * n_visible;
        for (int b = 0; b < n_visible; ++b) score[b] += std::max(0.0f, d[b]) * w;
      }
      // The top k in a strict order (score, then the lower index), so any
      // selection algorithm picks the same blocks in the same order.
      const auto better = [&](int x, int y) { return score[x] > score[y] || (score[x] == score[y] && x < y); };
      std::iota(order, order + n_visible, 0);
      std::nth_element(order, order + K - 1, order + n_visible, better);
      std::sort(order, order + K, better);
      std::copy_n(order, K, selected);
    }
  }
}

// docs/formats/deepseek4.md 3.
void ForwardPass::Hybrid(const Layer& L, int il, const float* in, float* out) {
  const HybridAttention& h = L.hybrid;
  const AttentionSpec& a = L.attn;
  const int H = a.n_head, D = a.head_dim, QL = static_cast<int>(h.q_a.n_out);
  const float eps = model_.hparams().norm_eps;
  float* const qr = b_.low_rank.get();
  float* const q_rows = b_.q.get();
  float* const kv_rows = b_.k.get();
  float* const o_rows = b_.attn.get();
  const MatMulOutput first[] = {{&h.q_a, qr}, {&h.kv, kv_rows}};
  MatMulSharedInput(first, in, n_rows_, b_.matmul.get(), pool_);
  for (int i = 0; i < n_rows_; ++i) kakeya::RmsNorm(qr + size_t(i) * QL, h.q_a_norm, QL, eps, qr + size_t(i) * QL);
  MatMul(h.q_b, qr, n_rows_, q_rows, b_.matmul.get(), pool_);
  // Each row's rotation at its position, and its inverse, once for the layer:
  // queries, keys, the indexer's queries and the output's un-rotation.
  const int R = h.rope.dims;
  for (const SequenceSlice& s : slices_) {
    const CompressedKv& cache = *s.cache->compressed();
    for (int i = s.first_row; i < s.first_row + s.n_rows; ++i) {
      const int pos = s.first_pos + (i - s.first_row);
      float* angles = b_.hybrid_angles.get() + size_t(i) * 2 * R;
      YarnAngles(h.rope, pos, false, angles);
      YarnAngles(h.rope, pos, true, angles + R);
      float* q = q_rows + size_t(i) * H * D;
      for (int hd = 0; hd < H; ++hd) kakeya::RmsNorm(q + hd * D, nullptr, D, eps, q + hd * D);
      RopeTail(angles, R, q, H, D);
      float* key = cache.raw_key(il, pos);
      kakeya::RmsNorm(kv_rows + size_t(i) * D, h.kv_norm, D, eps, key);
      RopeTail(angles, R, key, 1, D);
    }
  }
  const int ratio = h.blocks.ratio;
  if (ratio > 0) CompressBlocks(h.blocks, il, in, false);
  if (ratio == 4) {
    CompressBlocks(h.index_blocks, il, in, true);
    SelectBlocks(L, il, in, qr);
  }

  // Each (row, head): softmax over the raw window and the blocks, with the
  // head's sink in the denominator; keys are the values.
  const float scale = 1.0f / std::sqrt(static_cast<float>(D));
  for (const SequenceSlice& s : slices_) {
    const CompressedKv& cache = *s.cache->compressed();
    pool_.Run(int64_t(s.n_rows) * H, [&](int64_t task, int thread) {
      const int r = static_cast<int>(task / H), hd = static_cast<int>(task % H);
      const int i = s.first_row + r, pos = s.first_pos + r;
      const float* q = q_rows + size_t(i) * H * D + size_t(hd) * D;
      float* score = b_.hybrid_scores.get() + size_t(thread) * b_.hybrid_floats;
      const int last_raw = h.causal ? pos : s.first_pos + s.n_rows - 1;
      const int first_raw = std::max(0, pos - a.window + 1), n_raw = last_raw + 1 - first_raw;
      const int* selected = b_.selected_blocks.get() + size_t(i) * std::max(h.index_top_k, 1);
      const int n_visible = ratio > 0 ? (pos + 1) / ratio : 0;
      const int n_blocks = ratio == 4 ? std::min(n_visible, h.index_top_k) : n_visible;
      const float** keys = b_.hybrid_rows.get() + size_t(thread) * b_.hybrid_floats;
      for (int j = 0; j < n_raw; ++j) keys[j] = cache.raw_key(il, first_raw + j);
      for (int j = 0; j < n_blocks; ++j) keys[n_raw + j] = cache.block(il, ratio == 4 ? selected[j] : j);
      const int n = n_raw + n_blocks;
      DotEach(q, keys, n, D, score);
      for (int j = 0; j < n; ++j) score[j] *= scale;
      SoftMax(score, n, h.sinks[hd]);
      WeightedSum(score, keys, n, D, o_rows + size_t(i) * H * D + size_t(hd) * D);
    });
  }

  // Un-rotate each head's output, then the grouped low-rank projection.
  const int groups = static_cast<int>(h.out_a.size()), group_width = H / groups * D;
  const int o_lora = static_cast<int>(h.out_a[0].n_out);
  for (int i = 0; i < n_rows_; ++i) {
    RopeTail(b_.hybrid_angles.get() + size_t(i) * 2 * R + R, R, o_rows + size_t(i) * H * D, H, D);
  }
  float* const low_rank = b_.low_rank.get();  // the queries' low rank is no longer needed
  for (int g = 0; g < groups; ++g) {
    for (int i = 0; i < n_rows_; ++i) {
      std::memcpy(b_.group_in.get() + size_t(i) * group_width, o_rows + size_t(i) * H * D + size_t(g) * group_width,
                  sizeof(float) * group_width);
    }
    MatMul(h.out_a[g], b_.group_in.get(), n_rows_, b_.group_out.get(), b_.matmul.get(), pool_);
    for (int i = 0; i < n_rows_; ++i) {
      std::memcpy(low_rank + size_t(i) * groups * o_lora + size_t(g) * o_lora, b_.group_out.get() + size_t(i) * o_lora,
                  sizeof(float) * o_lora);
    }
  }
  MatMul(h.out_b, low_rank, n_rows_, out, b_.matmul.get(), pool_);
}

}  // namespace kakeya
