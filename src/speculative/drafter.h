// The drafter interface of the speculative loop (DESIGN.md "The speculative
// step"; STYLE.md item 6). A drafter sees only committed tokens (and, for
// drafters that read the target's features, the hidden states the target's
// forward already produced); it never reaches into the target's cache.
// Adding a drafter is adding a file: the decode loop (spec/speculative.cc)
// only talks to this interface.
#pragma once

#include <span>
#include <string>

#include "tokenizer/tokenizer.h"

namespace kakeya {

// What a drafter proposes for one verify step.
struct DraftRequest {
  // All committed tokens: the prompt and everything generated so far. The
  // last one (the "bonus") is not yet in the target's cache; the drafted
  // tokens continue after it.
  std::span<const TokenId> history;
  int max_tokens = 0;  // propose at most this many (>= 1)
  // Sampled verification (temperature > 0): for each proposed token i the
  // drafter writes its full draft distribution q_i into probs[i * n_vocab ..],
  // from which it drew tokens[i]. Empty when verification is greedy, and for
  // deterministic drafters (whose q is one-hot at the proposed token).
  std::span<float> probs;
};

class Drafter {
 public:
  virtual ~Drafter() = default;

  // "ngram", "draft", ... (for statistics and --json).
  virtual std::string name() const = 0;

  // True if the drafter's proposals come with distributions (DraftRequest::probs);
  // false for deterministic drafters, treated as one-hot.
  virtual bool samples() const { return false; }

  // Called once per request with the prompt, before the first Draft().
  virtual void Begin(std::span<const TokenId> prompt) = 0;

  // Writes up to request.max_tokens proposals into `out` and returns how many
  // (0 = nothing to propose; the loop then runs a plain step). Must not
  // allocate in steady state.
  virtual int Draft(const DraftRequest& request, std::span<TokenId> out) = 0;

  // After verification: `history` holds all committed tokens (ending with the
  // new bonus), and `accepted` of the `drafted` proposals were accepted. The
  // drafter commits what matches and trims the rest of its own state (O(1)).
  virtual void Accept(std::span<const TokenId> history, int drafted, int accepted) = 0;
};

}  // namespace kakeya
