#include "kernels/cpu/ops.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>
#include <limits>

#include "kernels/cpu/dequant.h"

namespace kakeya {

void RmsNorm(const float* x, const float* w, int n, float eps, float* out) {
  double sum = 0.0;
  for (int i = 0; i < n; ++i) sum += static_cast<double>(x[i]) * x[i];
  const float mean = static_cast<float>(sum / n);
  const float scale = 1.0f / std::sqrt(mean + eps);
  if (w != nullptr) {
    for (int i = 0; i < n; ++i) out[i] = x[i] * scale * w[i];
  } else {
    for (int i = 0; i < n; ++i) out[i] = x[i] * scale;
  }
}

void Rope(float* x, int n_heads, int head_dim, int n_rot, int pos, float base,
          const float* freq_factors, bool adjacent_pairs) {
  const float theta_scale = std::pow(base, -2.0f / static_cast<float>(n_rot));
  const int half = n_rot / 2;
  for (int h = 0; h < n_heads; ++h) {
    float* v = x + static_cast<int64_t>(h) * head_dim;
    float theta = static_cast<float>(pos);
    for (int i = 0; i < half; ++i) {
      const float angle = freq_factors != nullptr ? theta / freq_factors[i] : theta;
      const float c = std::cos(angle);
      const float s = std::sin(angle);
      const int a = adjacent_pairs ? 2 * i : i;
      const int b = adjacent_pairs ? 2 * i + 1 : i + half;
      const float x0 = v[a];
      const float x1 = v[b];
      v[a] = x0 * c - x1 * s;
      v[b] = x0 * s + x1 * c;
      theta *= theta_scale;
    }
  }
}

void SiluMul(const float* gate, const float* up, int n, float* out) {
  for (int i = 0; i < n; ++i) {
    const float g = gate[i];
    out[i] = g / (1.0f + std::exp(-g)) * up[i];
  }
}

void AddInPlace(float* x, const float* y, int n) {
  for (int i = 0; i < n; ++i) x[i] += y[i];
}

namespace {

// 16 floats as one value: GCC/Clang vector extensions, lowered to whatever
// width the function is compiled for (one zmm, two ymm, four xmm) with the
// same element-wise arithmetic, so the sums below keep one order everywhere.
typedef float Float16x __attribute__((vector_size(64)));
constexpr int kLanes = 16;

inline __attribute__((always_inline)) Float16x Load16(const float* p) {
  Float16x v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

typedef float Float8x __attribute__((vector_size(32)));
typedef float Float4x __attribute__((vector_size(16)));
typedef float Float2x __attribute__((vector_size(8)));

// Adds the upper half of a vector onto its lower half: lane l += lane l + width/2.
template <typename Half, typename Whole>
inline __attribute__((always_inline)) Half FoldHalves(const Whole& v) {
  Half lo, hi;
  std::memcpy(&lo, &v, sizeof lo);
  std::memcpy(&hi, reinterpret_cast<const char*>(&v) + sizeof lo, sizeof hi);
  return lo + hi;
}

// The lanes of v added in a fixed tree: lane l += lane l + 8, then + 4, + 2, + 1.
inline __attribute__((always_inline)) float SumLanes(const Float16x& v) {
  const Float2x pair = FoldHalves<Float2x>(FoldHalves<Float4x>(FoldHalves<Float8x>(v)));
  return pair[0] + pair[1];
}

// q . k with 16 partial sums (lane l sums elements l, l + 16, ...) added by
// SumLanes (whole half-vectors, not lane by lane through memory).
inline __attribute__((always_inline)) float Dot(const float* q, const float* k, int n) {
  Float16x part = {};
  int d = 0;
  for (; d + kLanes <= n; d += kLanes) part += Load16(q + d) * Load16(k + d);
  for (int l = 0; d < n; ++d, ++l) part[l] += q[d] * k[d];
  return SumLanes(part);
}

// e^x for x <= 0 (softmax terms) in 16 lanes: Cephes' expf (x = n ln2 + r,
// degree-5 polynomial for e^r, 2^n through the exponent bits), within a few
// ulp of std::exp. Below -87 it returns ~1e-38 instead of denormals or 0,
// which no softmax sum (>= 1: the maximum's term is e^0) can see.
inline __attribute__((always_inline)) Float16x ExpNonPositive(Float16x x) {
  typedef int32_t Int16x __attribute__((vector_size(64)));
  const Float16x zero = {};
  x = x < zero - 87.0f ? zero - 87.0f : x;
  const Float16x magic = zero + 12582912.0f;  // 1.5 * 2^23: adding it rounds to an integer
  const Float16x t = x * 1.44269504088896341f + magic;
  const Float16x n = t - magic;
  Float16x r = x - n * 0.693359375f;
  r = r - n * -2.12194440e-4f;
  Float16x p = r * 1.9875691500e-4f + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.0f;
  Int16x t_bits, magic_bits;
  std::memcpy(&t_bits, &t, sizeof t);
  std::memcpy(&magic_bits, &magic, sizeof magic);
  const Int16x exponent = (t_bits - magic_bits + 127) << 23;  // the bits of 2^n
  Float16x scale;
  std::memcpy(&scale, &exponent, sizeof scale);
  return p * scale;
}

}  // namespace

// Compiled for AVX-512, AVX2 and the baseline and picked at load (ifunc): the
// dot products and the weighted sum of values vectorize to the CPU's width.
// Measured on Zen 5 (1.25B Q4_K_M, 8 rows, context 64): attention was 11% of
// the step with the baseline (SSE2) code alone.
#if defined(__x86_64__) && defined(__GNUC__)
__attribute__((target_clones("avx512f", "avx2", "default")))
#endif
void AttendOneHead(const AttentionShape& s, int head, const float* q, const float* k_cache,
                   int64_t k_stride, const float* v_cache, int64_t v_stride, int capacity,
                   int first_pos, int n_keys, float* scores, float* out) {
  const int kv_head = head / (s.n_head / s.n_head_kv);
  const float* qh = q + static_cast<int64_t>(head) * s.head_dim;
  const int64_t k_offset = static_cast<int64_t>(kv_head) * s.head_dim;
  const int64_t v_offset = static_cast<int64_t>(kv_head) * s.value_dim;
  float max_score = -std::numeric_limits<float>::infinity();
  int slot = first_pos % capacity;
  for (int j = 0; j < n_keys; ++j, slot = slot + 1 == capacity ? 0 : slot + 1) {
    const float* kj = k_cache + slot * k_stride + k_offset;
    float score = Dot(qh, kj, s.head_dim) * s.scale;
    if (s.softcap > 0.0f) score = s.softcap * std::tanh(score / s.softcap);
    scores[j] = score;
    if (score > max_score) max_score = score;
  }
  // e^(score - max), 16 keys at a time; the last partial vector is padded
  // with the maximum's own score and its padding lanes cleared after.
  Float16x sums = {};
  for (int j = 0; j < n_keys; j += kLanes) {
    const int lanes = std::min(kLanes, n_keys - j);
    Float16x x = {};
    x += max_score;
    std::memcpy(&x, scores + j, sizeof(float) * lanes);
    Float16x e = ExpNonPositive(x - max_score);
    for (int l = lanes; l < kLanes; ++l) e[l] = 0.0f;
    std::memcpy(scores + j, &e, sizeof(float) * lanes);
    sums += e;
  }
  const float inv_sum = 1.0f / SumLanes(sums);
  for (int j = 0; j < n_keys; ++j) scores[j] *= inv_sum;
  // Output elements summed over the keys in registers, in key order for every
  // element (the order of a plain loop over keys). 64 elements per pass make
  // four independent accumulator chains: one chain waits on the latency of
  // each add, which made this loop 37% of attention.
  float* oh = out + static_cast<int64_t>(head) * s.value_dim;
  constexpr int kChains = 4;
  int d0 = 0;
  for (; d0 + kChains * kLanes <= s.value_dim; d0 += kChains * kLanes) {
    Float16x acc[kChains] = {};
    slot = first_pos % capacity;
    for (int j = 0; j < n_keys; ++j, slot = slot + 1 == capacity ? 0 : slot + 1) {
      const float* vj = v_cache + slot * v_stride + v_offset + d0;
      for (int c = 0; c < kChains; ++c) acc[c] += scores[j] * Load16(vj + c * kLanes);
    }
    std::memcpy(oh + d0, acc, sizeof acc);
  }
  for (; d0 + kLanes <= s.value_dim; d0 += kLanes) {
    Float16x acc = {};
    slot = first_pos % capacity;
    for (int j = 0; j < n_keys; ++j, slot = slot + 1 == capacity ? 0 : slot + 1) {
      acc += scores[j] * Load16(v_cache + slot * v_stride + v_offset + d0);
    }
    std::memcpy(oh + d0, &acc, sizeof acc);
  }
  for (; d0 < s.value_dim; ++d0) {  // value_dim not a multiple of 16
    float acc = 0;
    slot = first_pos % capacity;
    for (int j = 0; j < n_keys; ++j, slot = slot + 1 == capacity ? 0 : slot + 1) {
      acc += scores[j] * v_cache[slot * v_stride + v_offset + d0];
    }
    oh[d0] = acc;
  }
}

namespace {

// GELU (tanh form) as ggml's CPU backend computes it: the input rounded to
// F16, the result rounded to F16. It is a function of the input's 16 F16 bits,
// so it is tabulated once (as ggml does), which replaces a tanh per element:
// on the shipped 12M model that tanh was 3x the time of all the matmuls.
const float* GeluTable() {
  static const std::vector<float> table = [] {
    constexpr float kSqrt2OverPi = 0.79788456080286535588f;
    constexpr float kCoef = 0.044715f;
    std::vector<float> t(1 << 16);
    for (uint32_t bits = 0; bits < t.size(); ++bits) {
      const float h = F16ToF32(static_cast<uint16_t>(bits));
      t[bits] = F16ToF32(F32ToF16(0.5f * h * (1.0f + std::tanh(kSqrt2OverPi * h * (1.0f + kCoef * h * h)))));
    }
    return t;
  }();
  return table.data();
}

}  // namespace

void GeluMul(const float* gate, const float* up, int n, float* out) {
  const float* table = GeluTable();
  for (int i = 0; i < n; ++i) {
    const float x = gate[i];
    const float g = x <= -10.0f ? 0.0f : x >= 10.0f ? x : table[F32ToF16(x)];
    out[i] = g * up[i];
  }
}

void Scale(float* x, int n, float s) {
  for (int i = 0; i < n; ++i) x[i] *= s;
}

void SoftCap(float* x, int n, float cap) {
  for (int i = 0; i < n; ++i) x[i] = cap * std::tanh(x[i] / cap);
}

}  // namespace kakeya
