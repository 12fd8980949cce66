#include "sampling/penalties.h"

#include <algorithm>
#include <cmath>

#include "base/portable_math.h"

namespace kakeya {
namespace {

// The last `last_n` tokens of `history` (-1: all of it).
std::span<const TokenId> Window(std::span<const TokenId> history, int last_n) {
  const size_t n = last_n < 0 ? history.size() : std::min<size_t>(last_n, history.size());
  return history.last(n);
}

}  // namespace

RepetitionPenalties::RepetitionPenalties(const SamplingParams& p, int n_vocab, const Tokenizer* tokenizer,
                                         int max_history)
    : p_(p) {
  counting_ = p.repeat_last_n != 0 &&
              (p.repeat_penalty != 1.0f || p.frequency_penalty != 0.0f || p.presence_penalty != 0.0f);
  dry_ = p.dry_multiplier > 0 && p.dry_penalty_last_n != 0;
  if (counting_) count_.assign(n_vocab, 0);
  if (!dry_) return;
  longest_.assign(n_vocab, 0);
  z_.resize(std::max(1, max_history));
  touched_.resize(std::max(1, max_history));
  breaker_.assign(n_vocab, false);
  if (tokenizer != nullptr) {
    for (TokenId id = 0; id < std::min(n_vocab, tokenizer->n_vocab()); ++id) {
      const std::string_view text = tokenizer->TokenText(id);
      for (const std::string& b : p.dry_sequence_breakers) {
        if (text.find(b) != std::string_view::npos) breaker_[id] = true;
      }
    }
  }
  // The largest exponent whose power still fits a float (llama.cpp's clamp).
  if (p.dry_base > 1.000001f) {
    max_exponent_ = static_cast<int>(88.7228391f / static_cast<float>(PortableLog(p.dry_base)));
  }
}

void RepetitionPenalties::Apply(std::span<const TokenId> history, std::span<const float> logits,
                                std::span<float> out) {
  std::copy(logits.begin(), logits.end(), out.begin());
  if (counting_) ApplyCounts(Window(history, p_.repeat_last_n), out);
  if (dry_) {
    const std::span<const TokenId> window = Window(history, p_.dry_penalty_last_n);
    ApplyDry(window.last(std::min(window.size(), z_.size())), out);
  }
}

void RepetitionPenalties::ApplyCounts(std::span<const TokenId> window, std::span<float> out) {
  const int n_vocab = static_cast<int>(out.size());
  for (TokenId t : window) {
    if (t >= 0 && t < n_vocab) ++count_[t];
  }
  for (TokenId t : window) {
    if (t < 0 || t >= n_vocab || count_[t] == 0) continue;
    float& logit = out[t];
    logit = logit <= 0 ? logit * p_.repeat_penalty : logit / p_.repeat_penalty;
    logit -= count_[t] * p_.frequency_penalty + p_.presence_penalty;
    count_[t] = 0;  // each token once; also leaves the counts zero for the next call
  }
}

// With the window reversed (r[k] = window[n - 1 - k]), the Z-array z[k] is
// the length of the longest common suffix of the window and its prefix
// ending k tokens earlier: the earlier sequence, which was followed by
// window[n - k], repeats the window's tail for z[k] tokens. Emitting
// window[n - k] now would extend that repeat. O(n) for the whole window.
void RepetitionPenalties::ApplyDry(std::span<const TokenId> window, std::span<float> out) {
  const int n = static_cast<int>(window.size());
  const int n_vocab = static_cast<int>(out.size());
  const auto rev = [&](int k) { return window[n - 1 - k]; };
  const auto is_breaker = [&](TokenId t) { return t >= 0 && t < n_vocab && breaker_[t]; };
  // A repeat cannot reach back past the last breaker.
  int limit = n;
  for (int k = 0; k < n; ++k) {
    if (is_breaker(rev(k))) {
      limit = k;
      break;
    }
  }
  if (limit < p_.dry_allowed_length) return;

  int n_touched = 0;
  int box_left = 0, box_right = 0;  // the Z-box [box_left, box_right)
  for (int k = 1; k < n; ++k) {
    int z = k < box_right ? std::min(box_right - k, z_[k - box_left]) : 0;
    while (k + z < n && rev(z) == rev(k + z)) ++z;
    if (k + z > box_right) box_left = k, box_right = k + z;
    z_[k] = z;
    const int repeat = std::min(z, limit);
    const TokenId next = window[n - k];
    if (repeat < p_.dry_allowed_length || next < 0 || next >= n_vocab) continue;
    if (longest_[next] == 0) touched_[n_touched++] = next;
    longest_[next] = std::max(longest_[next], repeat);
  }
  for (int i = 0; i < n_touched; ++i) {
    const TokenId t = touched_[i];
    if (!breaker_[t]) {
      int exponent = longest_[t] - p_.dry_allowed_length;
      if (max_exponent_ > 0) exponent = std::min(exponent, max_exponent_);
      out[t] -= static_cast<float>(p_.dry_multiplier * PortablePow(p_.dry_base, exponent));
    }
    longest_[t] = 0;
  }
}

}  // namespace kakeya
