#include "speculative/auto_drafter.h"

#include <algorithm>

#include "base/error.h"

namespace kakeya {
namespace {

constexpr double kDecay = 0.95;     // per step of the same drafter: ~20 steps of memory
constexpr int kWarmSteps = 4;       // steps each drafter gets before rates decide
constexpr int kExploreEvery = 32;   // then one step in this many goes to the least tried

}  // namespace

AutoDrafter::AutoDrafter(std::vector<std::unique_ptr<Drafter>> drafters)
    : drafters_(std::move(drafters)), rates_(drafters_.size()) {
  if (drafters_.empty()) Fail("auto needs at least one drafter");
  for (size_t i = 0; i < drafters_.size(); ++i) order_.push_back(static_cast<int>(i));
}

std::vector<int> AutoDrafter::target_taps() const {
  std::vector<int> taps;
  for (const auto& d : drafters_) {
    const std::vector<int> t = d->target_taps();
    taps.insert(taps.end(), t.begin(), t.end());
  }
  return taps;  // Context::SetHiddenTaps drops duplicates
}

void AutoDrafter::Begin(std::span<const TokenId> prompt) {
  for (auto& d : drafters_) d->Begin(prompt);
  std::fill(rates_.begin(), rates_.end(), Rate{});
  steps_ = 0;
}

void AutoDrafter::Observe(const Context& target, int n_rows) {
  for (auto& d : drafters_) d->Observe(target, n_rows);
}

void AutoDrafter::RankForThisStep() {
  auto rate = [&](int i) { return rates_[i].ms > 0 ? rates_[i].tokens / rates_[i].ms : 0.0; };
  std::sort(order_.begin(), order_.end(), [&](int a, int b) { return rate(a) > rate(b) || (rate(a) == rate(b) && a < b); });
  auto least_tried = std::min_element(order_.begin(), order_.end(),
                                      [&](int a, int b) { return rates_[a].steps < rates_[b].steps; });
  const bool warming = rates_[*least_tried].steps < kWarmSteps;
  if (warming || steps_ % kExploreEvery == kExploreEvery - 1) std::rotate(order_.begin(), least_tried, least_tried + 1);
}

int AutoDrafter::Draft(const DraftRequest& request, std::span<TokenId> out) {
  draft_start_ = Clock::now();
  RankForThisStep();
  ++steps_;
  for (int i : order_) {
    const int n = drafters_[i]->Draft(request, out);
    if (n > 0) {
      last_ = i;
      return n;
    }
  }
  last_ = order_.front();
  return 0;
}

void AutoDrafter::Accept(std::span<const TokenId> history, int drafted, int accepted) {
  // Draft() to here spans the draft and the target's verify of it: the cost
  // of a step with this drafter, against the tokens the step committed.
  if (drafted > 0) {
    Rate& r = rates_[last_];
    r.tokens = kDecay * r.tokens + (accepted + 1);
    r.ms = kDecay * r.ms + std::chrono::duration<double, std::milli>(Clock::now() - draft_start_).count();
    ++r.steps;
  }
  for (size_t i = 0; i < drafters_.size(); ++i) {
    const bool drafted_this = static_cast<int>(i) == last_;
    drafters_[i]->Accept(history, drafted_this ? drafted : 0, drafted_this ? accepted : 0);
  }
}

}  // namespace kakeya
