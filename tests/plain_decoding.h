// The tests' reference for plain decoding: prefill, then one token per
// forward, written as plainly as possible and apart from the product's decode
// loop (speculative/speculative.h's Generate, which runs plain decoding as
// its drafter-less case), so that the tests compare that loop, with and
// without drafters, against an independent one.
#pragma once

#include <optional>
#include <span>
#include <vector>

#include "base/error.h"
#include "engine/generate.h"
#include "model/context.h"
#include "sampling/sampler.h"

namespace kakeya {

inline GenerateResult DecodePlainly(Context& ctx, std::span<const TokenId> prompt, const GenerateOptions& options,
                                    const TokenCallback& on_token) {
  if (prompt.empty()) Fail("the prompt is empty");
  const int n_ctx = ctx.options().n_ctx;
  if (static_cast<int>(prompt.size()) >= n_ctx) Fail("the prompt does not fit the context");
  const Tokenizer& tokenizer = ctx.model().tokenizer();
  Sampler sampler(options.sampling, ctx.model().hparams().n_vocab, &tokenizer, n_ctx);
  GenerateResult result;
  result.prompt_tokens.assign(prompt.begin(), prompt.end());
  std::vector<TokenId> sequence(prompt.begin(), prompt.end());
  std::optional<GrammarMatcher> grammar;
  if (options.grammar != nullptr) grammar.emplace(*options.grammar);
  Prefill(ctx, prompt);
  for (int step = 0; step < options.n_predict; ++step) {
    const std::span<const float> logits = ctx.logits(0);
    const TokenId next = sampler.Sample(logits, sequence, grammar ? &*grammar : nullptr);
    if (next == kNoTokenAllowed) {
      result.stop = StopReason::kEndOfGeneration;
      break;
    }
    if (grammar && !tokenizer.IsEndOfGeneration(next)) grammar->Accept(next);
    if (options.n_top > 0) result.top.push_back(TopLogits(logits, options.n_top));
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
  return result;
}

}  // namespace kakeya
