#include "engine/perplexity.h"

#include <algorithm>
#include <cmath>
#include <iterator>
#include <vector>

#include "base/error.h"
#include "base/portable_math.h"
#include "sampling/sampler.h"

namespace kakeya {
namespace {

// -log softmax(logits)[target], in double.
double NegLogProb(std::span<const float> logits, TokenId target) {
  double max = -INFINITY;
  for (float v : logits) max = std::max(max, static_cast<double>(v));
  double sum = 0;
  for (float v : logits) sum += PortableExp(static_cast<double>(v) - max);
  return PortableLog(sum) + max - static_cast<double>(logits[target]);
}

// log softmax(logits), in double.
void LogSoftmax(std::span<const float> logits, std::vector<double>& out) {
  double max = -INFINITY;
  for (float v : logits) max = std::max(max, static_cast<double>(v));
  double sum = 0;
  for (float v : logits) sum += PortableExp(static_cast<double>(v) - max);
  const double log_sum = PortableLog(sum) + max;
  out.resize(logits.size());
  for (size_t i = 0; i < logits.size(); ++i) out[i] = logits[i] - log_sum;
}

// Calls fn(ids, s, e) for each window: inputs ids[s, e), each predicting the
// token after it.
template <typename Fn>
void ForEachWindow(std::span<const std::vector<TokenId>> docs, int window, const Fn& fn) {
  for (const std::vector<TokenId>& ids : docs) {
    for (size_t s = 0; s + 1 < ids.size(); s += static_cast<size_t>(window)) {
      fn(ids, s, std::min(ids.size() - 1, s + static_cast<size_t>(window)));
    }
  }
}

}  // namespace

Comparison CompareDocuments(Context& ctx, Context& reference, std::span<const std::vector<TokenId>> docs, int window,
                            std::span<const int> band_starts,
                            const std::function<void(const CrossEntropy&)>& progress) {
  if (window < 1 || window > ctx.options().n_ctx || window > reference.options().n_ctx) {
    Fail("perplexity window ", window, " must be between 1 and the context size ", ctx.options().n_ctx);
  }
  if (band_starts.empty() || band_starts.front() != 0) Fail("the first band must start at position 0");
  Comparison out;
  for (int start : band_starts) out.bands.push_back({start});
  const size_t batch = static_cast<size_t>(std::min(ctx.options().max_batch, reference.options().max_batch));
  std::vector<double> lp, lq;
  ForEachWindow(docs, window, [&](const std::vector<TokenId>& ids, size_t s, size_t e) {
    ctx.Clear();
    reference.Clear();
    for (size_t c = s; c < e; c += batch) {
      const size_t n = std::min(batch, e - c);
      const std::span<const TokenId> rows(ids.data() + c, n);
      ctx.Forward(rows, /*all_logits=*/true);
      reference.Forward(rows, /*all_logits=*/true);
      for (size_t i = 0; i < n; ++i) {
        const int at = static_cast<int>(c + i - s);  // position in the window
        Divergence& band = *std::prev(std::upper_bound(out.bands.begin(), out.bands.end(), at,
                                                       [](int p, const Divergence& b) { return p < b.first_position; }));
        const std::span<const float> q = ctx.logits(static_cast<int>(i)), p = reference.logits(static_cast<int>(i));
        LogSoftmax(p, lp);
        LogSoftmax(q, lq);
        double kl = 0;
        for (size_t t = 0; t < lp.size(); ++t) kl += PortableExp(lp[t]) * (lp[t] - lq[t]);
        band.kl_nats += kl;
        ++band.positions;
        band.top1_agree += Argmax(p) == Argmax(q);
        out.ce.nats -= lq[ids[c + i + 1]];
        out.reference_ce.nats -= lp[ids[c + i + 1]];
      }
      ctx.Commit();
      reference.Commit();
    }
    out.ce.predicted += static_cast<int64_t>(e - s);
    out.reference_ce.predicted = out.ce.predicted;
    if (progress) progress(out.ce);
  });
  return out;
}

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
