// `--spec auto`: several drafters side by side, the one with the best
// measured tokens per millisecond proposes (llama.cpp's parallel drafters,
// "best wins"). All of them observe every target forward, so any can take
// over at the next step; each one's rate is a decayed average over the
// steps it drafted, so the choice follows the text. The others are tried
// again now and then, since a drafter that lost on one stretch of text may
// win on the next. When the picked drafter has nothing to propose (prompt
// lookup without a match), the next best one drafts instead.
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
    int steps = 0;
  };
  // The drafters in the order to ask them this step: best rate first, with
  // an untried or rarely tried one first now and then.
  void RankForThisStep();

  std::vector<std::unique_ptr<Drafter>> drafters_;
  std::vector<Rate> rates_;
  std::vector<int> order_;  // indices into drafters_, reused every step
  int last_ = 0;            // the drafter of the last Draft()
  int steps_ = 0;
  Clock::time_point draft_start_;
};

}  // namespace kakeya
