// Statistics for tests that check sampled output against a distribution:
// Pearson's chi-square goodness of fit with its p-value.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <numeric>
#include <vector>

namespace kakeya {

// Upper regularized incomplete gamma Q(a, x) (Numerical Recipes 6.2): a
// series for P below a + 1, a continued fraction (modified Lentz) above.
inline double GammaQ(double a, double x) {
  if (x <= 0) return 1;
  const double prefix = std::exp(a * std::log(x) - x - std::lgamma(a));
  if (x < a + 1) {
    double term = 1 / a, sum = term;
    for (int n = 1; n < 1000 && term > sum * 1e-17; ++n) {
      term *= x / (a + n);
      sum += term;
    }
    return 1 - prefix * sum;
  }
  constexpr double kTiny = 1e-300;
  double b = x + 1 - a, c = 1 / kTiny, d = 1 / b, h = d;
  for (int i = 1; i < 1000; ++i) {
    const double an = -i * (i - a);
    b += 2;
    d = an * d + b;
    if (std::fabs(d) < kTiny) d = kTiny;
    c = b + an / c;
    if (std::fabs(c) < kTiny) c = kTiny;
    d = 1 / d;
    h *= d * c;
    if (std::fabs(d * c - 1) < 1e-16) break;
  }
  return prefix * h;
}

inline double ChiSquarePValue(double statistic, int df) { return GammaQ(df / 2.0, statistic / 2.0); }

// Pearson's goodness of fit of `counts` to `probs`; tokens with probability 0
// must never have been drawn.
inline double GoodnessOfFitPValue(const std::vector<int>& counts, const std::vector<double>& probs) {
  const double n = std::accumulate(counts.begin(), counts.end(), 0.0);
  double statistic = 0;
  int categories = 0;
  for (size_t i = 0; i < counts.size(); ++i) {
    if (probs[i] == 0) {
      EXPECT_EQ(counts[i], 0) << "token " << i << " has probability 0";
      continue;
    }
    const double expected = n * probs[i];
    statistic += (counts[i] - expected) * (counts[i] - expected) / expected;
    ++categories;
  }
  return ChiSquarePValue(statistic, categories - 1);
}

}  // namespace kakeya
