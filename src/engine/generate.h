// What a generation asks for and returns, and the chunked prefill. The
// decode loop itself, plain and speculative, is speculative/speculative.h's
// Generate (one loop: plain decoding is its drafter-less case).
#pragma once

#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "grammar/grammar.h"
#include "model/context.h"
#include "sampling/sampler.h"

namespace kakeya {

struct GenerateOptions {
  int n_predict = 256;       // tokens to generate at most
  bool ignore_eos = false;   // keep going past end-of-generation tokens
  int n_top = 0;             // record the n_top best raw logits of every step
  SamplingParams sampling;
  // The output must be a sentence of this grammar, which the matcher is at
  // the start of (null: unconstrained). Speculation keeps the output
  // byte-identical to plain decoding under the same grammar (ADR 0018).
  std::shared_ptr<const GrammarMatcher> grammar;
};

struct TopLogit {
  TokenId id;
  float logit;
};

enum class StopReason { kLength, kEndOfGeneration, kContextFull };
const char* StopReasonName(StopReason r);

struct GenerateResult {
  std::vector<TokenId> prompt_tokens;
  std::vector<TokenId> tokens;              // generated ids, end-of-generation token included
  std::vector<std::vector<TopLogit>> top;   // per generated step when n_top > 0
  StopReason stop = StopReason::kLength;
  double prefill_ms = 0;
  double decode_ms = 0;   // from the first decode step to the last token
};

// Called with each generated token as soon as it is chosen; return false to stop.
using TokenCallback = std::function<bool(TokenId)>;

// The n best logits, highest first, ties by lower id.
std::vector<TopLogit> TopLogits(std::span<const float> logits, int n);

// Clears the context and runs the prompt in chunks of max_batch rows,
// committing each and then calling after_chunk(rows) if given; the last row's
// logits are left in ctx.logits(0). Chunking does not change any row's bits
// (batch invariance).
void Prefill(Context& ctx, std::span<const TokenId> prompt, const std::function<void(int)>& after_chunk = {});


}  // namespace kakeya
