// Lossless speculative decoding: the decode loop (docs/design.md, "The
// speculative step"). A drafter proposes a block, the target verifies the whole block in
// one batched forward, the agreeing prefix plus the target's own next token
// is committed and the rest trimmed from the target's cache in O(1).
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "engine/generate.h"
#include "engine/limits.h"
#include "speculative/verifier.h"
#include "speculative/drafter.h"
#include "speculative/step_cost.h"

namespace kakeya {

struct SpecOptions {
  int block = 0;        // rows per verify step (1 + drafts); 0 = adaptive
  int max_block = kAdaptiveMaxBlock;  // upper bound for the adaptive size; rows the target context must allow
  bool trace = false;   // record every step in SpecStats::trace (allocates per step)
  SampledVerify verify = SampledVerify::kMatch;  // how drafts are checked when sampling
  // Benchmarking only, never lossless: accept drafts at random so that a
  // step commits synthetic_accept tokens on average (bonus included; in
  // (1, block], needs a fixed block), whatever the target says. Measures the
  // machinery apart from the drafter's quality, as llama.cpp's
  // --spec-synth-len does. 0 = off.
  double synthetic_accept = 0;
  uint64_t synthetic_seed = 0;
};

// One verify step, for comparing proposals with another engine's.
struct SpecTraceStep {
  int pos = 0;                 // tokens in the target's cache before the step (the bonus's position)
  std::vector<TokenId> draft;  // the proposals
  int accepted = 0;            // how many of them the target kept
};

// Steps that proposed a draft, per drafter (auto picks one per step).
struct DrafterStats {
  std::string name;
  int steps = 0;
  int drafted = 0;
  int accepted = 0;
  std::vector<int> drafted_by_pos;   // [i]: steps that proposed a draft at position i
  std::vector<int> accepted_by_pos;  // [i]: ... and had it accepted
  double draft_ms = 0;
  double verify_ms = 0;
};

struct SpecStats {
  std::string method;
  int block = 0;                    // the fixed block, or 0 when adaptive
  int steps = 0;                    // verify steps (target forwards after the prefill)
  int drafted = 0;                  // draft tokens proposed
  int accepted = 0;                 // draft tokens accepted
  std::vector<int> drafted_by_pos;  // [i]: steps that proposed a draft at position i
  std::vector<int> accepted_by_pos; // [i]: ... and had it accepted
  double draft_ms = 0;
  double verify_ms = 0;   // target forward + verification
  double commit_ms = 0;   // trims, commits, drafter bookkeeping
  std::vector<DrafterStats> by_drafter;
  std::vector<SpecTraceStep> trace;  // with SpecOptions::trace
  // Tokens committed per verify step, the bonus included (1.0: no draft ever accepted).
  double mean_accept_len() const { return steps > 0 ? double(steps + accepted) / steps : 0.0; }
};

// What the rest of a step holds when a sequence sizes its draft: rows other
// sequences put into the same forward, and the tokens those rows are
// expected to commit. A lone sequence sees none.
struct StepLoad {
  int rows = 0;
  double tokens = 0;
};

// Called with each committed token and the logits row it was chosen from
// (valid during the call); return false to stop.
using TokenSink = std::function<bool(TokenId token, std::span<const float> logits)>;

// One sequence's speculative decoding, one step at a time, so that a server
// can run the steps of several sequences in one forward (ADR 0009): Plan()
// says which rows the sequence puts into the next forward (a prompt chunk, or
// the bonus and its drafts); the caller runs them (alone: Context::Forward;
// beside other sequences: RunForward) and Apply() verifies, commits and
// emits. Plain decoding is the drafter-less case: one row per step.
class SpeculativeDecoder {
 public:
  // drafter: null for plain decoding. cost: the step cost model this
  // sequence sizes its drafts with (shared by a server's slots). The target
  // context needs max_logit_rows >= the largest block.
  SpeculativeDecoder(Context& target, Drafter* drafter, const SpecOptions& spec, StepCost& cost);
  ~SpeculativeDecoder();

  // Starts a request: clears the target's cache and sets up the drafter.
  // Throws Error for an empty prompt, one that does not fit the context, or
  // bad sampling parameters. Allocates (per request, not per step).
  void Start(std::span<const TokenId> prompt, const GenerateOptions& options, TokenSink on_token);
  bool finished() const { return finished_; }
  bool prefilling() const { return prompt_done_ < static_cast<int>(result_.prompt_tokens.size()); }

  // The rows this sequence puts into the next forward: at most max_rows of
  // the prompt, or the bonus and the drafts whose expected tokens pay for
  // their cost in a step that also holds `others`. Drafts here.
  SequenceRows Plan(int max_rows, const StepLoad& others);
  // Tokens the planned rows are expected to commit (for the next sequence's StepLoad).
  double expected_tokens() const { return expected_tokens_; }
  // The drafter was parked: its upkeep cost more than its drafts saved.
  bool drafter_parked() const { return parked_; }
  // After the forward ran the planned rows (taking forward_ms): verifies the
  // block, commits the agreeing prefix and the target's next token, trims
  // the rest in O(1), and emits. Must not allocate.
  void Apply(double forward_ms);
  // Ends the request before its next step (the client went away); also how
  // a request ends by itself. Settles the statistics.
  void Stop();

  const GenerateResult& result() const { return result_; }
  GenerateResult& result() { return result_; }
  SpecStats& stats() { return stats_; }

 private:
  // One drafter's acceptance and draft cost (decayed sums): per drafter,
  // since auto switches between drafters whose acceptance and costs differ
  // by an order of magnitude.
  struct Policy {
    double accepted = 0;
    double trials = 0;
    double draft_ms = 0;  // per draft token
    bool draft_seen = false;
    int plain_steps = 0;
  };
  Policy& PolicyOf(const Drafter& d);
  int DraftsFor(const Drafter& d, const StepLoad& others);
  bool Emit(TokenId t, std::span<const float> logits);
  int ForcedDrafts(int most);

  Context& target_;
  Drafter* drafter_;
  SpecOptions spec_;
  StepCost& cost_;
  int max_block_;
  GenerateOptions options_;
  TokenSink on_token_;
  std::unique_ptr<Sampler> sampler_;
  std::optional<GrammarMatcher> grammar_;      // at the committed tokens' end
  std::optional<GrammarMatcher> row_grammar_;  // the verifier's copy, advanced over the accepted drafts
  double synthetic_rate_ = 0;  // per-draft acceptance that gives SpecOptions::synthetic_accept
  std::unique_ptr<Rng> synthetic_rng_;
  bool rejection_ = false;  // sampling, verified by VerifyRejection
  bool draft_has_probs_ = false;
  std::vector<std::pair<const Drafter*, Policy>> policies_;  // reserved
  std::vector<TokenId> history_;
  std::vector<TokenId> block_;
  std::vector<float> draft_probs_;
  std::vector<float> p_;
  std::vector<float> residual_;
  std::vector<DrafterStats> by_drafter_;
  int n_drafters_seen_ = 0;
  SpecStats stats_;
  GenerateResult result_;
  // Keeping the drafter warm (its Observe and Accept) costs this much per
  // step, decayed; when that upkeep makes every draft length lose to plain
  // decoding for kParkAfter steps in a row, the drafter is parked for the
  // rest of the request.
  double upkeep_ms_ = 0;
  int losing_steps_ = 0;
  bool parked_ = false;
  int prompt_done_ = 0;     // prompt tokens in the target's cache
  int planned_rows_ = 0;    // rows of the last Plan()
  int drafted_ = 0;         // drafts among them
  int forced_ = 0;          // ... of which the grammar forced (the drafter was not asked)
  double draft_ms_ = 0;     // the last Plan()'s drafting time
  double expected_tokens_ = 0;
  bool finished_ = true;
  std::chrono::steady_clock::time_point decode_start_;
};

// Generates after `prompt` on a context whose cache is cleared first:
// plainly when `drafter` is null (one row per step), else verifying its
// proposals in blocks. A SpeculativeDecoder run alone: the one decode loop of
// the command line (the server runs the same steps, ADR 0009). Greedy tokens
// are byte-identical with and without a drafter, and seeded sampled ones
// under match verification (ADR 0010); rejection verification keeps the
// distribution. Throws Error for an empty prompt, one that does not fit the
// context, bad sampling parameters or a block the context cannot hold (it
// needs max_logit_rows >= spec.max_block with a drafter).
GenerateResult Generate(Context& target, Drafter* drafter, std::span<const TokenId> prompt,
                        const GenerateOptions& options, const SpecOptions& spec, const TokenCallback& on_token,
                        SpecStats* stats);

}  // namespace kakeya
