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

// out[j] = q . rows[j], rows of dim values (attention's scores over keys
// that lie apart: a ring, chosen blocks).
void DotEach(const float* q, const float* const* rows, int n, int dim, float* out);
// out = sum_j w[j] * rows[j] (dim values).
void WeightedSum(const float* w, const float* const* rows, int n, int dim, float* out);
// x[i] += y[i]
void AddInPlace(float* x, const float* y, int n);

// out[i] = gelu(gate[i]) * up[i] with ggml's CPU GELU: tanh approximation,
// evaluated on the input rounded to F16 and rounded to F16 again (ggml looks
// it up in an F16 table); 0 below -10 and identity above 10. out may alias gate.
void GeluMul(const float* gate, const float* up, int n, float* out);

// x[i] *= s
void Scale(float* x, int n, float s);

// One row of the gated delta rule (Gated DeltaNet) on `width` columns of one
// head's state S [dk, stride]: u = (v - decay * S^T k) * beta; S = decay * S
// + k u^T; and when q is not null, o = S^T q * o_scale (v, u, o: [width]).
// Columns are independent, so a caller may run every row on a block of
// columns before the next block. Each column is summed over the key index in
// order, so every ISA gives the same bits.
void DeltaRuleStep(const float* k, const float* v, float decay, float beta, int dk, int width, int stride, float* S,
                   float* u, const float* q, float* o, float o_scale);

// x[i] = cap * tanh(x[i] / cap)
void SoftCap(float* x, int n, float cap);

}  // namespace kakeya
