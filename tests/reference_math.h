// The float64 building blocks of the naive reference forwards
// (reference_forward_test.cc, gemma4_reference.h): weights are F32 read from
// the GGUF, everything else is double.
#pragma once

#include <cmath>
#include <cstddef>
#include <vector>

namespace kakeya::reference {

// y[o] = sum_i w[o * n_in + i] * x[i], with n_in = x.size().
inline std::vector<double> MatVec(const float* w, const std::vector<double>& x, int n_out) {
  std::vector<double> y(n_out);
  for (int o = 0; o < n_out; ++o) {
    const float* row = w + size_t(o) * x.size();
    double sum = 0;
    for (size_t i = 0; i < x.size(); ++i) sum += row[i] * x[i];
    y[o] = sum;
  }
  return y;
}

inline void Accumulate(std::vector<double>& x, const std::vector<double>& y) {
  for (size_t i = 0; i < x.size(); ++i) x[i] += y[i];
}

inline void Scale(std::vector<double>& x, double s) {
  for (double& v : x) v *= s;
}

// x / rms(x) * w, the weights used as stored; w == nullptr: no weight.
inline std::vector<double> RmsNorm(const std::vector<double>& x, const float* w, double eps) {
  double ss = 0;
  for (double v : x) ss += v * v;
  const double inv = 1.0 / std::sqrt(ss / x.size() + eps);
  std::vector<double> y(x.size());
  for (size_t i = 0; i < x.size(); ++i) y[i] = x[i] * inv * (w ? w[i] : 1.0f);
  return y;
}

}  // namespace kakeya::reference
