// The drafter interface of the speculative loop (docs/design.md, "The
// speculative step"; docs/conventions.md, item 6). A drafter sees only
// committed tokens (and, for drafters that read the target's features, the
// hidden states the target's forward already produced); it never writes the
// target's cache (Gemma 4's assistant reads it: its layers have no keys of
// their own). Adding a drafter is adding a file and a row in
// drafter_registry.cc's table (ADR 0012): the decode loop
// (speculative/speculative.cc) only talks to this interface.
#pragma once

#include <span>
#include <string>
#include <vector>

#include "engine/limits.h"
#include "sampling/sampler.h"
#include "tokenizer/tokenizer.h"

namespace kakeya {

class Context;
class Model;

// What every drafter is built from (drafter_registry.h's table).
struct DrafterSetup {
  const Model& target;
  Context& target_context;  // its pool is shared; its n_ctx bounds the drafter's cache
  std::string path;         // the drafter's file, or empty
  SamplingParams sampling;  // the target's (drafters that sample draw from the same filters)
  int max_block = kAdaptiveMaxBlock;  // rows of the largest verify step (1 + drafts)
  int draft_vocab = -1;  // --draft-vocab: ids a drafter's head scores (DraftVocabSize)
};

// The token ids a drafter that runs the target's output head (mtp, dspark)
// scores: the first DraftVocabSize ids, rounded up to a multiple of 16, or
// all of them (returns 0). `requested` < 0 asks for the default: the first
// kDefaultDraftVocab where the vocabulary numbers frequent tokens first and
// is more than twice as large, else all; 0 asks for all. Proposals are only
// proposals: a token outside the prefix is never drafted, and the target's
// verification keeps the output exact (docs/adr/0021-draft-vocabulary.md).
constexpr int kDefaultDraftVocab = 32768;
int DraftVocabSize(const Tokenizer& vocabulary, int requested);

// Throws Error naming `drafter_path` unless token id i means the same text in
// both vocabularies for every i, with the same BOS and EOS ids: verification
// compares token ids, so an id must mean the same thing to the drafter and
// the target. Sizes must be equal too (llama.cpp tolerates a small
// difference; we do not, since a drafter's distributions are compared with
// the target's over all ids).
void CheckVocabCompatible(const Tokenizer& target, const Tokenizer& drafter, const std::string& drafter_path);

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
  // How the target picks tokens (its filters and seed): drafters that have
  // logits pick proposal i with sampler->SampleAt(logits, history.size() + i),
  // the target's noise at that position, so that when their distribution is
  // close to the target's they propose the token the target will sample
  // (the argmax when greedy). Null: pick the argmax.
  Sampler* sampler = nullptr;

  // Proposal i's token from the drafter's logits for it (n_vocab of the target).
  TokenId Pick(std::span<const float> logits, int i) const {
    return sampler != nullptr ? sampler->SampleAt(logits, static_cast<int64_t>(history.size()) + i) : Argmax(logits);
  }
};

class Drafter {
 public:
  virtual ~Drafter() = default;

  // "ngram", "draft", ... (for statistics and --json).
  virtual std::string name() const = 0;

  // The drafter that made the last Draft()'s proposals: itself, or for a
  // drafter that picks among others (auto), the one it picked.
  virtual const Drafter& last_drafter() const { return *this; }
  // The drafter the next Draft() will ask first (auto: its current pick), so
  // that the loop sizes the draft with that drafter's measured acceptance and
  // costs.
  virtual const Drafter& next_drafter() const { return *this; }

  // The per-draft acceptance the next Draft()'s proposals can be expected
  // to have, where the drafter knows it better than the loop's count of the
  // steps it drafted (auto scores prompt lookup's proposals on every step,
  // whoever drafts); negative: no such estimate, the loop counts.
  virtual double expected_acceptance() const { return -1; }

  // True if the drafter's proposals come with distributions (DraftRequest::probs);
  // false for deterministic drafters, treated as one-hot.
  virtual bool samples() const { return false; }

  // The target's hidden-state taps this drafter reads (Context::SetHiddenTaps:
  // l < n_layer is the residual stream entering layer l, n_layer the final
  // residual before output_norm). The loop sets them on the target.
  virtual std::vector<int> target_taps() const { return {}; }

  // Called once per request with the prompt, before the target's prefill.
  virtual void Begin(std::span<const TokenId> prompt) = 0;

  // After every target forward, once its first n_rows rows are committed
  // (each prefill chunk; the bonus and the accepted drafts of a verify step):
  // they hold positions target.n_committed() - n_rows .. n_committed() - 1,
  // and row i's taps are target.tap(layer, i). Drafters that read the target's
  // features take them here, so one step's verify forward feeds the next
  // draft with no extra target forward. Must not allocate.
  virtual void Observe(const Context& target, int n_rows) {}

  // Before every decode step, what the step would cost without drafts, from
  // the loop's measured cost line (0 before it is measured): `step_ms` with
  // the other sequences' rows in the same forward, and `share_ms` this
  // sequence's part of it per token, step_ms / (1 + the other sequences'
  // tokens). Auto weighs its drafters' rates against step_ms and the upkeep
  // they cost while idle against share_ms: beside other requests a step is
  // slower, but each one's upkeep adds to it, serially.
  virtual void PlainCost(double step_ms, double share_ms) {}

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
