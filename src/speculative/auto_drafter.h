// `--spec auto`: several drafters side by side, the one with the best
// measured tokens per millisecond proposes (llama.cpp's parallel drafters,
// "best wins"). All of them observe every target forward, so any can take
// over at the next step; each one's rate is a decayed average over the
// steps it drafted, so the choice follows the text. The others are tried
// again now and then, since a drafter that lost on one stretch of text may
// win on the next. When the picked drafter has nothing to propose (prompt
// lookup without a match), the next best one drafts instead.
//
// Keeping a drafter warm costs its per-token work on every committed token
// (a DFlash injection, an MTP catch-up row, a draft model's forward), whether
// it proposes or not: its upkeep, timed in Observe and Accept. A drafter's
// rate counts its upkeep: the tokens of its steps per ms of those steps plus
// the upkeep it cost since the request began, spread over its steps. A
// drafter whose rate, once it has had its warm-up tries, is below kDropBelow
// of the best measured one's is dropped for the rest of the request: it is
// no longer observed, and never asked again. So is one that costs upkeep but
// has not drafted for kIdleSteps steps: the draft-length policy found that
// drafting does not pay here (prose; or a server step already full of other
// requests' rows), and keeping it warm would cost every step for nothing. A
// drafter that has not proposed yet and costs nothing to keep is kept
// (prompt lookup costs nothing until the text repeats). When every drafter
// is dropped, auto proposes nothing and costs nothing.
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
  std::vector<int> target_taps() const override;
  void Begin(std::span<const TokenId> prompt) override;
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
    int tries = 0;      // Draft() calls it got, proposing or not (prompt lookup often has nothing)
    double upkeep_ms = 0;  // in its Observe and Accept since Begin
    int idle = 0;          // steps since it last drafted
    bool dropped = false;
  };
  // Tokens per ms of drafter i's steps, its upkeep included; 0 before it drafted.
  double PerMs(int i) const;
  // Drops the drafters that lose clearly, and idle ones that cost upkeep.
  void DropLosers();
  // The drafters in the order to ask them next step: best rate first, with
  // an untried or rarely tried one first now and then (after Begin and each
  // Accept, so that next_drafter() knows).
  void RankForNextStep();

  std::vector<std::unique_ptr<Drafter>> drafters_;
  std::vector<Rate> rates_;
  std::vector<int> order_;  // indices into drafters_ not dropped, reused every step
  int last_ = 0;            // the drafter of the last Draft()
  int steps_ = 0;    // Draft() calls
  int accepts_ = 0;  // steps since Begin (Accept() calls)
  double step_ms_ = 0;  // decayed mean time between Accept() calls: one step
  Clock::time_point draft_start_;
  Clock::time_point last_accept_;
};

}  // namespace kakeya
