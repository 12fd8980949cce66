// Row-wise operations of a transformer layer. Every function works on one row
// (one token) at a time with a fixed reduction order, so a row's result never
// depends on the other rows of the batch or on the thread count.
#pragma once

#include <cstddef>
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

// The first position a query at `pos` attends to with a sliding window of
// `window` positions (0: every earlier position). One definition for both
// sides of the ring's soundness: attention (AttendKvHead) reads exactly these
// positions, and the cache (cache/kv_cache.h) keeps them.
inline int FirstVisiblePosition(int pos, int window) { return window > 0 && pos >= window ? pos - window + 1 : 0; }

// Attention of rows of one sequence for the query heads of one KV head.
// Row r is the token at position first_pos + r; it sees the keys of positions
// [FirstVisiblePosition(first_pos + r, window), first_pos + r] (above; the
// cache's rule for what a ring keeps too). The cache is a ring of `capacity` rows
// (a full cache is a ring that never wraps): position p is row p % capacity of
// k (F32 [capacity, k_stride]) and v (F32 [capacity, v_stride]). Keys are
// visited in position order, so a ring and a full cache give the same bits,
// and a row's result does not depend on the other rows of the call.
// Query head h reads KV head h / (n_head / n_head_kv); row r's queries are
// F32 [n_head, head_dim] at q + r * q_stride, and the call writes heads
// kv_head * group .. + group - 1 of its outputs, F32 [n_head, value_dim] at
// out + r * out_stride. scratch: AttendScratchFloats(s, n_rows, keys of the
// last row) floats.
struct AttentionShape {
  int n_head;
  int n_head_kv;
  int head_dim;
  int value_dim;
  float scale;    // multiplies q.k
  float softcap;  // > 0: scores become softcap * tanh(score / softcap) (gemma2)
};
struct AttentionRows {
  int n_rows;
  int first_pos;
  int window;  // 0: every earlier position
  const float* q;
  int64_t q_stride;
  float* out;
  int64_t out_stride;
  // >= 0: every row sees the keys up to this position instead of up to its
  // own (a block drafter's non-causal block); the scratch is sized by it.
  int block_end = -1;
};
struct KvView {
  const float* k;
  int64_t k_stride;
  const float* v;
  int64_t v_stride;
  int capacity;
};
size_t AttendScratchFloats(const AttentionShape& s, int n_rows, int max_keys);
void AttendKvHead(const AttentionShape& s, int kv_head, const AttentionRows& rows, const KvView& kv,
                  float* scratch);

// out[i] = gelu(gate[i]) * up[i] with ggml's CPU GELU: tanh approximation,
// evaluated on the input rounded to F16 and rounded to F16 again (ggml looks
// it up in an F16 table); 0 below -10 and identity above 10. out may alias gate.
void GeluMul(const float* gate, const float* up, int n, float* out);

// x[i] *= s
void Scale(float* x, int n, float s);

// x[i] = cap * tanh(x[i] / cap)
void SoftCap(float* x, int n, float cap);

}  // namespace kakeya
