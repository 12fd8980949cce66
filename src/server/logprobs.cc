#include "server/logprobs.h"

#include <algorithm>
#include <cmath>

#include "engine/generate.h"

namespace kakeya {

TokenLogprob LogprobOf(std::span<const float> logits, TokenId chosen, int n_top) {
  float max_logit = -INFINITY;
  for (float x : logits) {
    if (x > max_logit) max_logit = x;  // NaN never wins
  }
  double sum = 0;
  for (float x : logits) {
    if (x > -INFINITY) sum += std::exp(static_cast<double>(x) - max_logit);
  }
  const double log_z = max_logit + std::log(sum);
  auto logprob = [&](TokenId id) {
    const float x = logits[id];
    return std::isnan(x) ? -INFINITY : static_cast<float>(x - log_z);
  };
  TokenLogprob out;
  out.token = chosen;
  out.logprob = logprob(chosen);
  if (n_top > 0) {
    for (const TopLogit& t : TopLogits(logits, n_top)) out.top.push_back({t.id, logprob(t.id)});
  }
  return out;
}

}  // namespace kakeya
