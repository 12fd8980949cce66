// `--spec auto`: several drafters side by side, the one with the best
// measured tokens per millisecond proposes (llama.cpp's parallel drafters,
// "best wins"). All of them observe every target forward, so any can take
// over at the next step; rates and acceptances are decayed averages, so the
// choice follows the text. When the picked drafter has nothing to propose,
// the next one drafts instead.
//
// Drafters differ in what they cost when they do not propose. Keeping a
// model drafter warm costs its per-token work on every committed token (a
// DFlash injection, an MTP catch-up row), timed in Observe and Accept: its
// upkeep; asking it costs a forward of its own. Prompt lookup costs nothing
// to keep and nothing to ask (below kFreeShare of a step): it is free.
// - A free drafter is asked after every step for its proposal for the next
//   one, and that proposal is scored against what the step commits, whoever
//   drafted it: its acceptance is always known, at no cost. When it has a
//   proposal and its acceptance is at least the best costly drafter's
//   (discounted by the share of that drafter's steps spent drafting and on
//   upkeep), it drafts first. It is never dropped: a lookup that failed on
//   one stretch of text waits, for free, for the text to repeat.
// - A costly drafter drafts where no free drafter has a proposal as good,
//   or when its rate is: the tokens of its steps per ms of those steps plus
//   its upkeep since decoding began, spread over its steps. It is dropped
//   for the rest of the request when, after two steps, that rate is below
//   kDropBelow of plain decoding's (PlainCost's step_ms), or, once it has drafted
//   kWarmSteps times, below plain decoding's or below kDropBelow of the best
//   drafter's; and as soon as the upkeep it cost since it last
//   drafted reaches kIdleUpkeep of this sequence's share of a plain step
//   (PlainCost's share_ms: beside 7 other requests, an eighth of the step, since
//   each request's upkeep adds to it; the free drafter covers the text,
//   or the draft-length policy found that drafting does not pay: prose, or a
//   server step already full of other requests' rows). A dropped drafter is
//   no longer observed and never asked again.
// One step in kExploreEvery goes to the least tried drafter. When every
// drafter is dropped, auto proposes nothing and costs nothing.
#pragma once

#include <chrono>
#include <memory>
#include <vector>

#include "speculative/drafter.h"

namespace kakeya {

class AutoDrafter final : public Drafter {
 public:
  // Throws Error when `drafters` is empty.
  explicit AutoDrafter(std::vector<std::unique_ptr<Drafter>> drafters);

  std::string name() const override { return "auto"; }
  const Drafter& last_drafter() const override { return *drafters_[last_]; }
  const Drafter& next_drafter() const override { return order_.empty() ? static_cast<const Drafter&>(*this) : *drafters_[order_.front()]; }
  // Sampled verification needs the proposer's distributions; auto only
  // mixes deterministic (greedy-drafting) drafters, see drafter_registry.cc.
  bool samples() const override { return false; }
  // A free drafter's scored acceptance when it drafts first (the loop's own
  // count of its few drafted steps would lag behind).
  double expected_acceptance() const override;
  std::vector<int> target_taps() const override;
  void Begin(std::span<const TokenId> prompt) override;
  void PlainCost(double step_ms, double share_ms) override;
  void Observe(const Context& target, int n_rows) override;
  int Draft(const DraftRequest& request, std::span<TokenId> out) override;
  void Accept(std::span<const TokenId> history, int drafted, int accepted) override;

 private:
  using Clock = std::chrono::steady_clock;
  struct Rate {
    double tokens = 0;  // decayed sums over the steps this drafter drafted
    double ms = 0;
    double weight = 0;  // decayed count of those steps
    int steps = 0;      // steps it drafted
    int tries = 0;      // times it was asked (Draft() or a free drafter's peek), proposing or not
    double upkeep_ms = 0;  // in its Observe and Accept since Begin
    double ask_ms = 0;     // in those asks since Begin
    double idle_upkeep_ms = 0;  // upkeep since it last drafted (the prompt's excluded)
    bool ready = true;     // a free drafter: has a proposal for the next step
    double hits = 0;       // decayed per-draft acceptance (a geometric model, as the
    double trials = 0;     // loop's): kept drafts, and kept + first rejected
    bool dropped = false;
  };
  // Tokens per ms of drafter i's steps, its upkeep included; 0 before it drafted.
  double PerMs(int i) const;
  // Plain decoding's tokens per ms; 0 before the loop measured it.
  double PlainPerMs() const { return plain_ms_ > 0 ? 1 / plain_ms_ : 0; }
  // Per-draft acceptance of drafter i, (hits + 1) / (trials + 2).
  double Acceptance(int i) const { return (rates_[i].hits + 1) / (rates_[i].trials + 2); }
  // True when keeping and asking drafter i costs nothing worth counting.
  bool Free(int i) const;
  // Drops the costly drafters that lose, and idle ones.
  void DropLosers();
  // The drafters in the order to ask them next step (after Begin and each
  // Accept, so that next_drafter() knows).
  void RankForNextStep(std::span<const TokenId> history);

  std::vector<std::unique_ptr<Drafter>> drafters_;
  std::vector<Rate> rates_;
  std::vector<int> order_;      // indices into drafters_ not dropped, reused every step
  std::vector<double> score_;   // per drafter, for ranking
  // Free drafters' proposals for the next step, asked after each step and
  // scored against what the step commits, whoever drafted it: kMaxPeek per drafter.
  std::vector<TokenId> peek_;
  std::vector<int> peeked_;     // proposals in peek_ per drafter
  size_t peek_history_ = 0;     // history length when peeked
  std::vector<double> observe_ms_;  // per drafter, its last Observe()
  int last_ = 0;                // the drafter of the last Draft()
  int steps_ = 0;    // Draft() calls
  int accepts_ = 0;  // steps since Begin (Accept() calls)
  double step_ms_ = 0;   // decayed mean time between Accept() calls: one step
  double plain_ms_ = 0;        // a step without drafts (PlainCost)
  double plain_share_ms_ = 0;  // this sequence's part of it per token
  Clock::time_point draft_start_;
  Clock::time_point last_accept_;
};

}  // namespace kakeya
