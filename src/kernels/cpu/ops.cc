#include "kernels/cpu/ops.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>
#include <limits>

#include "base/portable_math.h"
#include "kernels/cpu/dequant.h"
#include "kernels/cpu/matmul.h"
#include "kernels/cpu/vec16-inl.h"

namespace kakeya {

void AddInPlace(float* x, const float* y, int n) {
  for (int i = 0; i < n; ++i) x[i] += y[i];
}


// The sum of squares in double (as ggml) with 8 partial sums (lane l sums
// elements l, l + 8, ...) added in a fixed tree, then the scaling 16 lanes at a
// time. One chain of dependent double adds made this latency-bound: a norm of
// 384 took ~0.4 us, and a layer runs 4 of them per row plus the q/k norms.
// A float's square is exact in double, so fused or separate multiply-adds give
// the same sum.
static inline __attribute__((always_inline)) void RmsNormBody(const float* x, const float* w, int n, float eps,
                                                      float* out) {
  Double8x part = {};
  int i = 0;
  for (; i + 8 <= n; i += 8) {
    Float8x f;
    std::memcpy(&f, x + i, sizeof f);
    const Double8x d = __builtin_convertvector(f, Double8x);
    part += d * d;
  }
  for (int l = 0; i < n; ++i, ++l) part[l] += static_cast<double>(x[i]) * x[i];
  const Double2x pair = FoldHalves<Double2x>(FoldHalves<Double4x>(part));
  const float mean = static_cast<float>((pair[0] + pair[1]) / n);
  const float scale = 1.0f / std::sqrt(mean + eps);
  i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    Float16x v = Load16(x + i) * scale;
    if (w != nullptr) v *= Load16(w + i);
    std::memcpy(out + i, &v, sizeof v);
  }
  for (; i < n; ++i) out[i] = w != nullptr ? x[i] * scale * w[i] : x[i] * scale;
}

// theta advances by a float multiply per pair, as ggml's rope cache does, so
// the angles are those llama.cpp rotates by; pow, cos and sin are the portable
// ones (base/portable_math.h: libm's last bits differ between CPUs), in double
// and rounded to float.
void RopeAngles(int n_rot, int pos, float base, const float* freq_factors, float* cos_sin) {
  const float theta_scale = static_cast<float>(PortablePow(base, -2.0f / static_cast<float>(n_rot)));
  const int half = n_rot / 2;
  float theta = static_cast<float>(pos);
  for (int i = 0; i < half; ++i) {
    const float angle = freq_factors != nullptr ? theta / freq_factors[i] : theta;
    double s, c;
    PortableSinCos(angle, &s, &c);
    cos_sin[i] = static_cast<float>(c);
    cos_sin[half + i] = static_cast<float>(s);
    theta *= theta_scale;
  }
}

void Rope(float* x, int n_heads, int head_dim, int n_rot, const float* cos_sin, bool adjacent_pairs) {
  const int half = n_rot / 2;
  for (int h = 0; h < n_heads; ++h) {
    float* v = x + static_cast<int64_t>(h) * head_dim;
    for (int i = 0; i < half; ++i) {
      const float c = cos_sin[i];
      const float s = cos_sin[half + i];
      const int a = adjacent_pairs ? 2 * i : i;
      const int b = adjacent_pairs ? 2 * i + 1 : i + half;
      const float x0 = v[a];
      const float x1 = v[b];
      v[a] = x0 * c - x1 * s;
      v[b] = x0 * s + x1 * c;
    }
  }
}

namespace {

// GELU (tanh form) as ggml's CPU backend computes it: the input rounded to
// F16, the result rounded to F16. It is a function of the input's 16 F16 bits,
// so it is tabulated once (as ggml does), which replaces a tanh per element:
// on the shipped 12M model that tanh was 3x the time of all the matmuls. The
// tanh is PortableTanh (the same bits on every CPU) of the float argument.
const float* GeluTable() {
  static const std::vector<float> table = [] {
    constexpr float kSqrt2OverPi = 0.79788456080286535588f;
    constexpr float kCoef = 0.044715f;
    std::vector<float> t(1 << 16);
    for (uint32_t bits = 0; bits < t.size(); ++bits) {
      const float h = F16ToF32(static_cast<uint16_t>(bits));
      const float tanh = static_cast<float>(PortableTanh(kSqrt2OverPi * h * (1.0f + kCoef * h * h)));
      t[bits] = F16ToF32(F32ToF16(0.5f * h * (1.0f + tanh)));
    }
    return t;
  }();
  return table.data();
}

// F32ToF16 (dequant.cc) of 16 lanes, each of its branches a select.
inline __attribute__((always_inline)) UInt16x F32ToF16Lanes(Float16x f) {
  UInt16x u, sub_bits;
  std::memcpy(&u, &f, sizeof u);
  const UInt16x sign = (u >> 16) & 0x8000u;
  const UInt16x a = u & 0x7FFFFFFFu;
  Float16x sub;
  std::memcpy(&sub, &a, sizeof sub);
  sub += 0.5f;
  std::memcpy(&sub_bits, &sub, sizeof sub_bits);
  UInt16x h = (a + 0xC8000FFFu + ((a >> 13) & 1u)) >> 13;
  h = a < 0x38800000u ? sub_bits - 0x3F000000u : h;
  const UInt16x infinity = UInt16x{} + 0x7C00u;
  h = a >= 0x477FF000u ? infinity : h;
  h = a > 0x7F800000u ? (0x7E00u | ((a >> 13) & 0x3FFu)) : h;
  return sign | h;
}

}  // namespace

// 16 lanes at a time: the F16 rounding inlined as selects and the table read
// per lane; as a scalar loop with a call to F32ToF16 per element it was 5% of a
// 4-row verify step on the shipped 20M model, all of it on the calling thread.
static inline __attribute__((always_inline)) void GeluMulBody(const float* gate, const float* up, int n, float* out) {
  const float* table = GeluTable();
  const Float16x zero = {};
  int i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    const Float16x x = Load16(gate + i);
    const UInt16x h = F32ToF16Lanes(x);
    Float16x g;
    for (int l = 0; l < kLanes; ++l) g[l] = table[h[l]];
    g = x <= zero - 10.0f ? zero : x >= zero + 10.0f ? x : g;
    const Float16x y = g * Load16(up + i);
    std::memcpy(out + i, &y, sizeof y);
  }
  for (; i < n; ++i) {
    const float x = gate[i];
    const float g = x <= -10.0f ? 0.0f : x >= 10.0f ? x : table[F32ToF16(x)];
    out[i] = g * up[i];
  }
}

// silu(g) = g * sigmoid(g), with the exponential only of -|g| (ExpNonPositive)
// so that it never overflows: sigmoid(g) = 1 / (1 + e) for g >= 0 and
// e / (1 + e) below, e = e^-|g|. With std::exp per element it ran on the
// calling thread while the other waited: 1.25B Q8_0, 2 threads, alternating
// runs, 128-row prefill 367-417 -> 337-375 ms, 16-row verify 60-67 -> 56-63.
static inline __attribute__((always_inline)) Float16x SiluMulLanes(Float16x g, Float16x up) {
  const Float16x zero = {};
  const Float16x e = ExpNonPositive(g < zero ? g : zero - g);
  return g * ((g < zero ? e : zero + 1.0f) / (1.0f + e)) * up;
}

static inline __attribute__((always_inline)) void SiluMulBody(const float* gate, const float* up, int n, float* out) {
  int i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    const Float16x y = SiluMulLanes(Load16(gate + i), Load16(up + i));
    std::memcpy(out + i, &y, sizeof y);
  }
  if (i == n) return;
  // The tail as one zero-padded vector: every element gets the same arithmetic.
  Float16x g = {}, u = {};
  std::memcpy(&g, gate + i, (n - i) * sizeof(float));
  std::memcpy(&u, up + i, (n - i) * sizeof(float));
  const Float16x y = SiluMulLanes(g, u);
  std::memcpy(out + i, &y, (n - i) * sizeof(float));
}

// Per row: 16 running sums added in SumLanes' tree, the tail after it in
// order: the same bits on every ISA. kRows rows at once, each with its own
// sums: one row's chain of dependent adds (32 for deepseek4's 512 dims) left
// the adder waiting.
template <int kRows>
static inline __attribute__((always_inline)) void DotRows(const float* q, const float* const* rows, int dim,
                                                          float* out) {
  Float16x acc[kRows] = {};
  int i = 0;
  for (; i + kLanes <= dim; i += kLanes) {
    const Float16x x = Load16(q + i);
    for (int k = 0; k < kRows; ++k) acc[k] += x * Load16(rows[k] + i);
  }
  for (int k = 0; k < kRows; ++k) {
    float sum = SumLanes(acc[k]);
    for (int t = i; t < dim; ++t) sum += q[t] * rows[k][t];
    out[k] = sum;
  }
}

static inline __attribute__((always_inline)) void DotEachBody(const float* q, const float* const* rows, int n,
                                                              int dim, float* out) {
  int j = 0;
  for (; j + 4 <= n; j += 4) DotRows<4>(q, rows + j, dim, out + j);
  for (; j < n; ++j) DotRows<1>(q, rows + j, dim, out + j);
}

// Each element summed over the rows in order, a chunk of 16 at a time;
// kChunks chunks at once, each with its own sum (one chunk's chain over the
// rows left the adder waiting, as in DotRows).
template <int kChunks>
static inline __attribute__((always_inline)) void WeightedChunks(const float* w, const float* const* rows, int n,
                                                                 int i, float* out) {
  Float16x acc[kChunks] = {};
  for (int j = 0; j < n; ++j) {
    const Float16x wj = Splat<Float16x>(w[j]);
    for (int c = 0; c < kChunks; ++c) acc[c] += wj * Load16(rows[j] + i + c * kLanes);
  }
  std::memcpy(out + i, acc, sizeof acc);
}

static inline __attribute__((always_inline)) void WeightedSumBody(const float* w, const float* const* rows, int n,
                                                                  int dim, float* out) {
  int i = 0;
  for (; i + 4 * kLanes <= dim; i += 4 * kLanes) WeightedChunks<4>(w, rows, n, i, out);
  for (; i + kLanes <= dim; i += kLanes) WeightedChunks<1>(w, rows, n, i, out);
  for (; i < dim; ++i) {
    float sum = 0.0f;
    for (int j = 0; j < n; ++j) sum += w[j] * rows[j][i];
    out[i] = sum;
  }
}

// The columns in vectors of 16, four at a time, the key index inner: each
// vector's sum over the key index is a chain of dependent adds, and four
// independent chains keep the adder busy (one chain made the rule
// latency-bound). The decay multiplies S^T k once instead of S before it,
// so the first pass only reads S.
template <int kVectors>
static inline __attribute__((always_inline)) void DeltaRuleColumns(const float* k, const float* v, float decay,
                                                                   float beta, int dk, int stride, float* S,
                                                                   float* u, const float* q, float* o,
                                                                   float o_scale) {
  Float16x sum[kVectors] = {};
  for (int i = 0; i < dk; ++i) {
    for (int b = 0; b < kVectors; ++b) sum[b] += Load16(S + size_t(i) * stride + b * kLanes) * k[i];
  }
  Float16x d[kVectors], out[kVectors] = {};
  for (int b = 0; b < kVectors; ++b) {
    d[b] = (Load16(v + b * kLanes) - sum[b] * decay) * beta;
    std::memcpy(u + b * kLanes, &d[b], sizeof d[b]);
  }
  for (int i = 0; i < dk; ++i) {
    for (int b = 0; b < kVectors; ++b) {
      float* at = S + size_t(i) * stride + b * kLanes;
      const Float16x s = Load16(at) * decay + k[i] * d[b];
      std::memcpy(at, &s, sizeof s);
      if (q != nullptr) out[b] += s * q[i];
    }
  }
  if (q == nullptr) return;
  for (int b = 0; b < kVectors; ++b) {
    out[b] *= o_scale;
    std::memcpy(o + b * kLanes, &out[b], sizeof out[b]);
  }
}

static inline __attribute__((always_inline)) void DeltaRuleStepBody(const float* k, const float* v, float decay,
                                                                    float beta, int dk, int width, int stride,
                                                                    float* S, float* u, const float* q, float* o,
                                                                    float o_scale) {
  int c = 0;
  for (; c + 4 * kLanes <= width; c += 4 * kLanes) {
    DeltaRuleColumns<4>(k, v + c, decay, beta, dk, stride, S + c, u + c, q, o == nullptr ? o : o + c, o_scale);
  }
  for (; c + kLanes <= width; c += kLanes) {
    DeltaRuleColumns<1>(k, v + c, decay, beta, dk, stride, S + c, u + c, q, o == nullptr ? o : o + c, o_scale);
  }
  for (; c < width; ++c) {
    float sum = 0.0f;
    for (int i = 0; i < dk; ++i) sum += S[size_t(i) * stride + c] * k[i];
    u[c] = (v[c] - sum * decay) * beta;
    float out = 0.0f;
    for (int i = 0; i < dk; ++i) {
      float& s = S[size_t(i) * stride + c];
      s = s * decay + k[i] * u[c];
      if (q != nullptr) out += s * q[i];
    }
    if (q != nullptr) o[c] = out * o_scale;
  }
}

KAKEYA_PER_ISA(DeltaRuleStep,
               (const float* k, const float* v, float decay, float beta, int dk, int width, int stride, float* S,
                float* u, const float* q, float* o, float o_scale),
               (k, v, decay, beta, dk, width, stride, S, u, q, o, o_scale))
KAKEYA_PER_ISA(DotEach, (const float* q, const float* const* rows, int n, int dim, float* out), (q, rows, n, dim, out))
KAKEYA_PER_ISA(WeightedSum, (const float* w, const float* const* rows, int n, int dim, float* out),
               (w, rows, n, dim, out))
KAKEYA_PER_ISA(RmsNorm, (const float* x, const float* w, int n, float eps, float* out), (x, w, n, eps, out))
KAKEYA_PER_ISA(GeluMul, (const float* gate, const float* up, int n, float* out), (gate, up, n, out))
KAKEYA_PER_ISA(SiluMul, (const float* gate, const float* up, int n, float* out), (gate, up, n, out))

void Scale(float* x, int n, float s) {
  for (int i = 0; i < n; ++i) x[i] *= s;
}

void SoftCap(float* x, int n, float cap) {
  for (int i = 0; i < n; ++i) x[i] = cap * static_cast<float>(PortableTanh(x[i] / cap));
}

}  // namespace kakeya
