#include "kernels/cpu/ops.h"

#include <cmath>
#include <limits>

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

void AttendOneHead(const AttentionShape& s, int head, const float* q, const float* k_cache,
                   int64_t k_stride, const float* v_cache, int64_t v_stride, int n_keys,
                   float* scores, float* out) {
  const int kv_head = head / (s.n_head / s.n_head_kv);
  const float* qh = q + static_cast<int64_t>(head) * s.head_dim;
  float max_score = -std::numeric_limits<float>::infinity();
  for (int j = 0; j < n_keys; ++j) {
    const float* kj = k_cache + j * k_stride + static_cast<int64_t>(kv_head) * s.head_dim;
    float dot = 0.0f;
    for (int d = 0; d < s.head_dim; ++d) dot += qh[d] * kj[d];
    scores[j] = dot * s.scale;
    if (scores[j] > max_score) max_score = scores[j];
  }
  double sum = 0.0;
  for (int j = 0; j < n_keys; ++j) {
    scores[j] = std::exp(scores[j] - max_score);
    sum += scores[j];
  }
  const float inv_sum = static_cast<float>(1.0 / sum);
  float* oh = out + static_cast<int64_t>(head) * s.value_dim;
  for (int d = 0; d < s.value_dim; ++d) oh[d] = 0.0f;
  for (int j = 0; j < n_keys; ++j) {
    const float* vj = v_cache + j * v_stride + static_cast<int64_t>(kv_head) * s.value_dim;
    const float p = scores[j] * inv_sum;
    for (int d = 0; d < s.value_dim; ++d) oh[d] += p * vj[d];
  }
}

}  // namespace kakeya
