// Repetition controls, applied to a row's logits before the sampler's
// filters, from the tokens before that row (llama.cpp's penalties and DRY
// samplers, same flags, same defaults, same arithmetic):
//   repeat      logit / penalty if > 0, logit * penalty otherwise, for every
//               token seen in the last repeat_last_n tokens;
//   frequency   logit -= frequency_penalty * (times seen there);
//   presence    logit -= presence_penalty (if seen there at all);
//   DRY         "don't repeat yourself" (p-e-w, 2024): a token that would
//               extend a sequence already seen earlier in the last
//               dry_penalty_last_n tokens, by a match of n >= allowed_length
//               tokens, loses dry_multiplier * dry_base^(n - allowed_length).
//               A match never crosses a sequence breaker (a token whose text
//               holds one of the breaker strings), and breakers are never
//               penalized themselves.
// The history is the whole sequence before the row, prompt included, as
// llama.cpp's command line feeds its sampler. Because a row's penalties
// depend only on the tokens before it, the speculative verifier applies them
// to every row of a block with that row's own history and stays exact.
#pragma once

#include <span>
#include <vector>

#include "sampling/sampling_params.h"
#include "tokenizer/tokenizer.h"

namespace kakeya {

class RepetitionPenalties {
 public:
  // tokenizer: for DRY's breakers (null: no token is a breaker).
  // max_history: the longest history DRY will see (its scratch is sized
  // once; a longer one is cut to its last max_history tokens).
  RepetitionPenalties(const SamplingParams& p, int n_vocab, const Tokenizer* tokenizer, int max_history);

  bool active() const { return counting_ || dry_; }

  // out = logits with the penalties for `history` applied. No allocation.
  void Apply(std::span<const TokenId> history, std::span<const float> logits, std::span<float> out);

 private:
  void ApplyCounts(std::span<const TokenId> window, std::span<float> out);
  void ApplyDry(std::span<const TokenId> window, std::span<float> out);

  SamplingParams p_;
  bool counting_ = false;  // repeat, frequency or presence
  bool dry_ = false;
  std::vector<int> count_;          // [n_vocab] occurrences in the window, zero between calls
  std::vector<bool> breaker_;       // [n_vocab] DRY sequence breakers
  std::vector<int> z_;              // [max_history] Z-array of the reversed window
  std::vector<int> longest_;        // [n_vocab] longest match a token would extend, zero between calls
  std::vector<TokenId> touched_;    // [max_history] tokens with longest_ > 0
  int max_exponent_ = 0;
};

}  // namespace kakeya
