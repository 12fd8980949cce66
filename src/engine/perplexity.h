// Cross-entropy of a model on documents (kakeya perplexity, and the held-out
// loss of the shipped model, tools/train/verify.py).
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "model/context.h"

namespace kakeya {

struct CrossEntropy {
  int64_t predicted = 0;  // tokens scored
  double nats = 0;        // sum of -log p(token | tokens before it in its window)
};

// Each document (token ids, BOS first if the model uses one) is cut into
// windows of `window` inputs; each window starts from an empty cache, and
// every token after the first of the document is predicted exactly once.
// Forward passes take ctx.options().max_batch rows at a time; ctx needs
// n_ctx >= window. `progress` (optional) is called after each window with
// the running totals.
CrossEntropy ScoreDocuments(Context& ctx, std::span<const std::vector<TokenId>> docs, int window,
                            const std::function<void(const CrossEntropy&)>& progress = {});

}  // namespace kakeya
