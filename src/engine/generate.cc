#include "engine/generate.h"

#include <algorithm>

namespace kakeya {

const char* StopReasonName(StopReason r) {
  switch (r) {
    case StopReason::kLength: return "length";
    case StopReason::kEndOfGeneration: return "eos";
    case StopReason::kContextFull: return "context_full";
  }
  return "unknown";
}

std::vector<TopLogit> TopLogits(std::span<const float> logits, int n) {
  std::vector<TopLogit> all(logits.size());
  for (size_t i = 0; i < logits.size(); ++i) all[i] = {static_cast<TokenId>(i), logits[i]};
  n = std::min<int>(n, static_cast<int>(all.size()));
  std::partial_sort(all.begin(), all.begin() + n, all.end(), [](const TopLogit& a, const TopLogit& b) {
    return a.logit > b.logit || (a.logit == b.logit && a.id < b.id);
  });
  all.resize(n);
  return all;
}

void Prefill(Context& ctx, std::span<const TokenId> prompt, const std::function<void(int)>& after_chunk) {
  ctx.Clear();
  const size_t chunk = ctx.options().max_batch;
  for (size_t start = 0; start < prompt.size(); start += chunk) {
    const size_t n = std::min(chunk, prompt.size() - start);
    ctx.Forward(prompt.subspan(start, n), false);
    ctx.Commit();
    if (after_chunk) after_chunk(static_cast<int>(n));
  }
}

}  // namespace kakeya
