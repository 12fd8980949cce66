#include "kernels/cpu/ops.h"

#include <algorithm>
#include <cmath>
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

// q . k with 16 partial sums (lane l sums elements l, l + 16, ...) added in a
// fixed tree at the end.
inline __attribute__((always_inline)) float Dot(const float* q, const float* k, int n) {
  Float16x part = {};
  int d = 0;
  for (; d + kLanes <= n; d += kLanes) part += Load16(q + d) * Load16(k + d);
  for (int l = 0; d < n; ++d, ++l) part[l] += q[d] * k[d];
  for (int width = kLanes / 2; width > 0; width /= 2) {
    for (int l = 0; l < width; ++l) part[l] += part[l + width];
  }
  return part[0];
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
  double sum = 0.0;
  for (int j = 0; j < n_keys; ++j) {
    scores[j] = std::exp(scores[j] - max_score);
    sum += scores[j];
  }
  const float inv_sum = static_cast<float>(1.0 / sum);
  for (int j = 0; j < n_keys; ++j) scores[j] *= inv_sum;
  // 16 output elements at a time, summed over the keys in a register (the
  // same order for every element as a plain loop over keys).
  float* oh = out + static_cast<int64_t>(head) * s.value_dim;
  int d0 = 0;
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
