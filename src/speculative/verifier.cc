#include "speculative/verifier.h"

#include <algorithm>

namespace kakeya {

Verdict VerifyGreedy(const BlockLogits& logits, std::span<const TokenId> drafts) {
  Verdict v;
  const int m = static_cast<int>(drafts.size());
  while (v.accepted < m && Argmax(logits.row(v.accepted)) == drafts[v.accepted]) ++v.accepted;
  v.next = Argmax(logits.row(v.accepted));
  return v;
}

Verdict VerifySampled(const BlockLogits& logits, std::span<const TokenId> drafts,
                      std::span<const float> draft_probs, Sampler& sampler, std::span<float> p,
                      std::span<float> residual) {
  const int m = static_cast<int>(drafts.size());
  const size_t n_vocab = logits.n_vocab;
  Verdict v;
  for (int i = 0; i < m; ++i) {
    sampler.Distribution(logits.row(i), p);
    const TokenId d = drafts[i];
    const std::span<const float> q =
        draft_probs.empty() ? std::span<const float>() : draft_probs.subspan(i * n_vocab, n_vocab);
    const double q_d = q.empty() ? 1.0 : q[d];
    // Accept with probability min(1, p/q), written without a division.
    if (sampler.Uniform() * q_d < p[d]) {
      ++v.accepted;
      continue;
    }
    for (size_t t = 0; t < n_vocab; ++t) {
      const float q_t = q.empty() ? (static_cast<TokenId>(t) == d ? 1.0f : 0.0f) : q[t];
      residual[t] = std::max(0.0f, p[t] - q_t);
    }
    v.next = sampler.DrawFrom(residual);
    v.resampled = true;
    return v;
  }
  sampler.Distribution(logits.row(m), p);
  v.next = sampler.DrawFrom(p);
  return v;
}

}  // namespace kakeya
