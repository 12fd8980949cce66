#include "engine/generate.h"

#include <algorithm>
#include <chrono>

#include "base/error.h"

namespace kakeya {
namespace {

double MsSince(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

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

GenerateResult Generate(Context& ctx, std::span<const TokenId> prompt,
                        const GenerateOptions& options, const TokenCallback& on_token) {
  if (prompt.empty()) Fail("the prompt is empty: nothing to generate from");
  const int n_ctx = ctx.options().n_ctx;
  if (static_cast<int>(prompt.size()) >= n_ctx) {
    Fail("the prompt has ", prompt.size(), " tokens but the context holds ", n_ctx,
         " (pass a larger -c, up to the model's training context)");
  }
  options.sampling.Validate();
  const Tokenizer& tokenizer = ctx.model().tokenizer();
  Sampler sampler(options.sampling, ctx.model().hparams().n_vocab, &tokenizer, n_ctx);

  GenerateResult result;
  result.prompt_tokens.assign(prompt.begin(), prompt.end());
  // The whole sequence: the sampler's position and the repetition controls' history.
  std::vector<TokenId> sequence(prompt.begin(), prompt.end());
  sequence.reserve(prompt.size() + options.n_predict);

  const auto t_prefill = std::chrono::steady_clock::now();
  Prefill(ctx, prompt);
  result.prefill_ms = MsSince(t_prefill);

  const auto t_decode = std::chrono::steady_clock::now();
  result.tokens.reserve(options.n_predict);
  for (int step = 0; step < options.n_predict; ++step) {
    const std::span<const float> logits = ctx.logits(0);
    if (options.n_top > 0) result.top.push_back(TopLogits(logits, options.n_top));
    const TokenId next = sampler.Sample(logits, sequence);
    result.tokens.push_back(next);
    sequence.push_back(next);
    const bool keep_going = on_token ? on_token(next) : true;
    if (!options.ignore_eos && tokenizer.IsEndOfGeneration(next)) {
      result.stop = StopReason::kEndOfGeneration;
      break;
    }
    if (!keep_going || step + 1 == options.n_predict) break;
    if (ctx.n_past() >= n_ctx) {
      result.stop = StopReason::kContextFull;
      break;
    }
    const TokenId feed[1] = {next};
    ctx.Forward(feed, false);
    ctx.Commit();
  }
  result.decode_ms = MsSince(t_decode);
  return result;
}

}  // namespace kakeya
