#include "engine/perplexity.h"

#include <algorithm>
#include <cmath>

#include "base/error.h"

namespace kakeya {
namespace {

// -log softmax(logits)[target], in double.
double NegLogProb(std::span<const float> logits, TokenId target) {
  double max = -INFINITY;
  for (float v : logits) max = std::max(max, static_cast<double>(v));
  double sum = 0;
  for (float v : logits) sum += std::exp(static_cast<double>(v) - max);
  return std::log(sum) + max - static_cast<double>(logits[target]);
}

}  // namespace

CrossEntropy ScoreDocuments(Context& ctx, std::span<const std::vector<TokenId>> docs, int window,
                            const std::function<void(const CrossEntropy&)>& progress) {
  if (window < 1 || window > ctx.options().n_ctx) {
    Fail("perplexity window ", window, " must be between 1 and the context size ", ctx.options().n_ctx);
  }
  const size_t batch = static_cast<size_t>(ctx.options().max_batch);
  CrossEntropy total;
  for (const std::vector<TokenId>& ids : docs) {
    for (size_t s = 0; s + 1 < ids.size(); s += static_cast<size_t>(window)) {
      // Inputs ids[s, e), each predicting the token after it.
      const size_t e = std::min(ids.size() - 1, s + static_cast<size_t>(window));
      ctx.Clear();
      for (size_t c = s; c < e; c += batch) {
        const size_t n = std::min(batch, e - c);
        ctx.Forward(std::span<const TokenId>(ids.data() + c, n), /*all_logits=*/true);
        for (size_t i = 0; i < n; ++i) total.nats += NegLogProb(ctx.logits(static_cast<int>(i)), ids[c + i + 1]);
        ctx.Commit();
      }
      total.predicted += static_cast<int64_t>(e - s);
      if (progress) progress(total);
    }
  }
  return total;
}

}  // namespace kakeya
