#include "speculative/auto_drafter.h"

#include <algorithm>

#include "base/error.h"

namespace kakeya {
namespace {

constexpr double kDecay = 0.95;     // per step of the same drafter: ~20 steps of memory
constexpr int kWarmTries = 4;       // Draft() calls each drafter gets first, before rates decide
constexpr int kExploreEvery = 32;   // then one step in this many goes to the least tried
constexpr double kDropBelow = 0.75; // of the best rate: a drafter this slow is dropped
constexpr int kIdleSteps = 16;      // steps without drafting after which a drafter with upkeep goes
constexpr double kFreeUpkeep = 0.02;  // upkeep per step below this share of a step counts as free

double MsSince(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t).count();
}

}  // namespace

AutoDrafter::AutoDrafter(std::vector<std::unique_ptr<Drafter>> drafters)
    : drafters_(std::move(drafters)), rates_(drafters_.size()) {
  if (drafters_.empty()) Fail("auto needs at least one drafter");
  order_.reserve(drafters_.size());
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
  order_.clear();
  for (size_t i = 0; i < drafters_.size(); ++i) order_.push_back(static_cast<int>(i));
  steps_ = accepts_ = 0;
  step_ms_ = 0;
  RankForNextStep();
}

void AutoDrafter::Observe(const Context& target, int n_rows) {
  for (size_t i = 0; i < drafters_.size(); ++i) {
    if (rates_[i].dropped) continue;
    const auto t0 = Clock::now();
    drafters_[i]->Observe(target, n_rows);
    rates_[i].upkeep_ms += MsSince(t0);
  }
}

double AutoDrafter::PerMs(int i) const {
  const Rate& r = rates_[i];
  if (r.steps == 0) return 0;
  const double ms = r.ms + r.weight * r.upkeep_ms / r.steps;
  return ms > 0 ? r.tokens / ms : 0;
}

void AutoDrafter::DropLosers() {
  double best = 0;
  for (int i : order_) {
    if (rates_[i].tries >= kWarmTries) best = std::max(best, PerMs(i));
  }
  for (int i : order_) {
    const Rate& r = rates_[i];
    const bool loses = r.tries >= kWarmTries && r.steps > 0 && PerMs(i) < kDropBelow * best;
    const bool idle_with_upkeep =
        r.idle >= kIdleSteps && accepts_ > 0 && r.upkeep_ms / accepts_ > kFreeUpkeep * step_ms_;
    rates_[i].dropped = loses || idle_with_upkeep;
  }
  std::erase_if(order_, [&](int i) { return rates_[i].dropped; });
}

void AutoDrafter::RankForNextStep() {
  DropLosers();
  if (order_.empty()) return;
  auto rate = [&](int i) { return PerMs(i); };
  std::sort(order_.begin(), order_.end(), [&](int a, int b) { return rate(a) > rate(b) || (rate(a) == rate(b) && a < b); });
  auto least_tried = std::min_element(order_.begin(), order_.end(),
                                      [&](int a, int b) { return rates_[a].tries < rates_[b].tries; });
  const bool warming = rates_[*least_tried].tries < kWarmTries;
  if (warming || steps_ % kExploreEvery == kExploreEvery - 1) std::rotate(order_.begin(), least_tried, least_tried + 1);
}

int AutoDrafter::Draft(const DraftRequest& request, std::span<TokenId> out) {
  draft_start_ = Clock::now();
  ++steps_;
  for (int i : order_) {
    ++rates_[i].tries;
    const int n = drafters_[i]->Draft(request, out);
    if (n > 0) {
      last_ = i;
      return n;
    }
  }
  if (!order_.empty()) last_ = order_.front();
  return 0;
}

void AutoDrafter::Accept(std::span<const TokenId> history, int drafted, int accepted) {
  // Draft() to here spans the draft and the target's verify of it: the cost
  // of a step with this drafter, against the tokens the step committed.
  const auto now = Clock::now();
  if (accepts_++ > 0) {
    const double interval = std::chrono::duration<double, std::milli>(now - last_accept_).count();
    step_ms_ = step_ms_ > 0 ? kDecay * step_ms_ + (1 - kDecay) * interval : interval;
  }
  last_accept_ = now;
  if (drafted > 0) {
    Rate& r = rates_[last_];
    r.tokens = kDecay * r.tokens + (accepted + 1);
    r.ms = kDecay * r.ms + std::chrono::duration<double, std::milli>(now - draft_start_).count();
    r.weight = kDecay * r.weight + 1;
    ++r.steps;
  }
  for (size_t i = 0; i < drafters_.size(); ++i) {
    Rate& r = rates_[i];
    if (r.dropped) continue;
    const bool drafted_this = drafted > 0 && static_cast<int>(i) == last_;
    r.idle = drafted_this ? 0 : r.idle + 1;
    const auto t0 = Clock::now();
    drafters_[i]->Accept(history, drafted_this ? drafted : 0, drafted_this ? accepted : 0);
    r.upkeep_ms += MsSince(t0);
  }
  RankForNextStep();
}

}  // namespace kakeya
