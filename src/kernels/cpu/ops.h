// Row-wise operations of a transformer layer. Every function works on one row
// (one token) at a time with a fixed reduction order, so a row's result never
// depends on the other rows of the batch or on the thread count.
#pragma once

#include <cstdint>

namespace kakeya {

// out[i] = x[i] / sqrt(mean(x^2) + eps) * w[i]; w may be null (no weight).
// The sum of squares is taken in double, as ggml does. out may alias x.
void RmsNorm(const float* x, const float* w, int n, float eps, float* out);

// Rotary position embedding of one token's heads, in place, in two steps so
// that the angles of a position are computed once per forward, not per head
// and layer. RopeAngles writes cos_sin: F32 [n_rot]: cos(theta_i) for i <
// n_rot/2, then sin(theta_i), with theta_i = pos * base^(-2i/n_rot), iterated
// in float as ggml does, divided by freq_factors[i] when given.
// Rope rotates x: F32 [n_heads, head_dim], pairs (x[2i], x[2i+1]) when
// `adjacent_pairs` (ggml mode NORM, llama), else (x[i], x[i + n_rot/2]) (NEOX:
// qwen, gemma). Elements >= n_rot pass through.
void RopeAngles(int n_rot, int pos, float base, const float* freq_factors, float* cos_sin);
void Rope(float* x, int n_heads, int head_dim, int n_rot, const float* cos_sin, bool adjacent_pairs);

// out[i] = silu(gate[i]) * up[i]. out may alias gate.
void SiluMul(const float* gate, const float* up, int n, float* out);

// x[i] += y[i]
void AddInPlace(float* x, const float* y, int n);

// Attention of one query row, one head, over the keys of positions
// [first_pos, first_pos + n_keys) of one sequence's cache. The cache is a ring
// of `capacity` rows (a full cache is a ring that never wraps): position p is
// row p % capacity of k_cache (F32 [capacity, k_stride]) and v_cache
// (F32 [capacity, v_stride]). Keys are visited in position order, so a ring
// and a full cache give the same bits. Query head h reads KV head
// h / (n_head / n_head_kv). q: F32 [n_head, head_dim]; `scores` is scratch of
// n_keys floats; writes out[head]: F32 [n_head, value_dim].
struct AttentionShape {
  int n_head;
  int n_head_kv;
  int head_dim;
  int value_dim;
  float scale;    // multiplies q.k
  float softcap;  // > 0: scores become softcap * tanh(score / softcap) (gemma2)
};
void AttendOneHead(const AttentionShape& s, int head, const float* q, const float* k_cache,
                   int64_t k_stride, const float* v_cache, int64_t v_stride, int capacity,
                   int first_pos, int n_keys, float* scores, float* out);

// out[i] = gelu(gate[i]) * up[i] with ggml's CPU GELU: tanh approximation,
// evaluated on the input rounded to F16 and rounded to F16 again (ggml looks
// it up in an F16 table); 0 below -10 and identity above 10. out may alias gate.
void GeluMul(const float* gate, const float* up, int n, float* out);

// x[i] *= s
void Scale(float* x, int n, float s);

// x[i] = cap * tanh(x[i] / cap)
void SoftCap(float* x, int n, float cap);

}  // namespace kakeya
