#include "speculative/verifier.h"

#include <algorithm>

namespace kakeya {
namespace {

// The history row i of the block sees: the committed tokens and drafts 0 .. i-1.
std::span<const TokenId> RowHistory(std::span<const TokenId> history, int m, int i) {
  return history.first(history.size() - m + i);
}

// A draw from `probs`; with a grammar, kNoTokenAllowed when nothing has
// mass (the grammar allows no token).
TokenId NextOrNone(Sampler& sampler, std::span<const float> probs, const GrammarMatcher* grammar) {
  const TokenId t = sampler.DrawFrom(probs);
  return grammar != nullptr && !(probs[t] > 0) ? kNoTokenAllowed : t;
}

}  // namespace

Verdict VerifyMatch(const BlockLogits& logits, std::span<const TokenId> drafts, Sampler& sampler,
                    std::span<const TokenId> history, GrammarMatcher* grammar) {
  const int m = static_cast<int>(drafts.size());
  Verdict v;
  for (;; ++v.accepted) {
    v.next = sampler.Sample(logits.row(v.accepted), RowHistory(history, m, v.accepted), grammar);
    if (v.accepted == m || v.next != drafts[v.accepted]) return v;
    if (grammar != nullptr) grammar->Accept(v.next);
  }
}

Verdict VerifyRejection(const BlockLogits& logits, std::span<const TokenId> drafts,
                        std::span<const float> draft_probs, Sampler& sampler, std::span<const TokenId> history,
                        std::span<float> p, std::span<float> residual, GrammarMatcher* grammar) {
  const int m = static_cast<int>(drafts.size());
  const size_t n_vocab = logits.n_vocab;
  Verdict v;
  for (int i = 0; i < m; ++i) {
    sampler.Distribution(logits.row(i), RowHistory(history, m, i), p, grammar);
    const TokenId d = drafts[i];
    const std::span<const float> q =
        draft_probs.empty() ? std::span<const float>() : draft_probs.subspan(i * n_vocab, n_vocab);
    const double q_d = q.empty() ? 1.0 : q[d];
    // Accept with probability min(1, p/q), written without a division.
    if (sampler.Uniform() * q_d < p[d]) {
      ++v.accepted;
      if (grammar != nullptr) grammar->Accept(d);
      continue;
    }
    for (size_t t = 0; t < n_vocab; ++t) {
      const float q_t = q.empty() ? (static_cast<TokenId>(t) == d ? 1.0f : 0.0f) : q[t];
      residual[t] = std::max(0.0f, p[t] - q_t);
    }
    v.next = NextOrNone(sampler, residual, grammar);
    v.resampled = true;
    return v;
  }
  sampler.Distribution(logits.row(m), history, p, grammar);
  v.next = NextOrNone(sampler, p, grammar);
  return v;
}

}  // namespace kakeya
