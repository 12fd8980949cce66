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

// How far a context's next-token distributions are from a reference
// context's over the same windows (kakeya perplexity --kl: a cache type
// against the exact f32 cache), by band of position in the window.
struct Divergence {
  int first_position = 0;  // the band's first position in a window (it ends where the next begins)
  int64_t positions = 0;
  double kl_nats = 0;      // sum of KL(reference || ctx) over the band's positions
  int64_t top1_agree = 0;  // positions where the argmaxes agree
};
struct Comparison {
  CrossEntropy ce, reference_ce;
  std::vector<Divergence> bands;
};
// As ScoreDocuments, with `reference` (n_ctx >= window, the same model) run
// on every window too; `band_starts` ascending from 0.
Comparison CompareDocuments(Context& ctx, Context& reference, std::span<const std::vector<TokenId>> docs, int window,
                            std::span<const int> band_starts,
                            const std::function<void(const CrossEntropy&)>& progress = {});

}  // namespace kakeya
