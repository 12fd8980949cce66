// logprobs / top_logprobs: the log-probability of each generated token under
// the model (log-softmax of the raw logits: before temperature and the
// sampling filters, as OpenAI reports them), and of the best alternatives.
#pragma once

#include <span>
#include <vector>

#include "tokenizer/tokenizer.h"

namespace kakeya {

struct TokenLogprob {
  TokenId token = 0;
  float logprob = 0;
  struct Alternative {
    TokenId token;
    float logprob;
  };
  std::vector<Alternative> top;  // best first, ties by lower id
};

// One pass over the vocabulary for the normalizer and one partial sort for
// the n_top best; called on the scheduler thread for requests that asked.
TokenLogprob LogprobOf(std::span<const float> logits, TokenId chosen, int n_top);

}  // namespace kakeya
