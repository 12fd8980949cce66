#include "speculative/auto_drafter.h"

#include <algorithm>

#include "base/error.h"

namespace kakeya {
namespace {

constexpr double kDecay = 0.95;      // per step of the same drafter: ~20 steps of memory
constexpr int kWarmSteps = 4;        // steps a costly drafter drafts before its rate can drop it
constexpr int kExploreEvery = 32;    // one step in this many goes to the least tried drafter
constexpr double kDropBelow = 0.75;  // of the best rate, or of plain decoding's after two steps: dropped
constexpr double kIdleUpkeep = 0.5;  // of the request's share of a plain step: idle upkeep at which a costly drafter goes
constexpr double kFreeShare = 0.02;  // upkeep and asking per step below this share of a step: free
constexpr double kUntriedAcceptance = 0.5;  // a costly drafter's before it drafted
constexpr int kMaxPeek = 16;         // tokens of a free drafter's proposal scored per step

double MsSince(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t).count();
}

}  // namespace

AutoDrafter::AutoDrafter(std::vector<std::unique_ptr<Drafter>> drafters)
    : drafters_(std::move(drafters)), rates_(drafters_.size()), score_(drafters_.size()),
      peek_(drafters_.size() * kMaxPeek), peeked_(drafters_.size()), observe_ms_(drafters_.size()) {
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
  step_ms_ = plain_ms_ = plain_share_ms_ = 0;
  std::fill(peeked_.begin(), peeked_.end(), 0);
  RankForNextStep({});
}

void AutoDrafter::PlainCost(double step_ms, double share_ms) {
  plain_ms_ = step_ms;
  plain_share_ms_ = share_ms;
}

void AutoDrafter::Observe(const Context& target, int n_rows) {
  for (size_t i = 0; i < drafters_.size(); ++i) {
    if (rates_[i].dropped) continue;
    const auto t0 = Clock::now();
    drafters_[i]->Observe(target, n_rows);
    observe_ms_[i] = MsSince(t0);
    rates_[i].upkeep_ms += observe_ms_[i];
  }
}

double AutoDrafter::PerMs(int i) const {
  const Rate& r = rates_[i];
  if (r.steps == 0) return 0;
  const double ms = r.ms + r.weight * r.upkeep_ms / r.steps;
  return ms > 0 ? r.tokens / ms : 0;
}

double AutoDrafter::expected_acceptance() const {
  if (order_.empty() || !Free(order_.front())) return -1;
  return Acceptance(order_.front());
}

bool AutoDrafter::Free(int i) const {
  // Classified once a step's time is known (the second Accept on) and the
  // drafter was asked; until then it counts as costly.
  const Rate& r = rates_[i];
  if (step_ms_ <= 0 || r.tries == 0) return false;
  return r.upkeep_ms / accepts_ <= kFreeShare * step_ms_ && r.ask_ms / std::max(1, r.tries) <= kFreeShare * step_ms_;
}

void AutoDrafter::DropLosers() {
  if (step_ms_ <= 0) return;
  double best = 0;
  for (int i : order_) {
    if (rates_[i].steps >= kWarmSteps) best = std::max(best, PerMs(i));
  }
  for (int i : order_) {
    if (Free(i)) continue;
    const Rate& r = rates_[i];
    const bool loses = (r.steps >= 2 && PerMs(i) < kDropBelow * PlainPerMs()) ||
                       (r.steps >= kWarmSteps && (PerMs(i) < kDropBelow * best || PerMs(i) < PlainPerMs()));
    const bool idle = r.idle_upkeep_ms >= kIdleUpkeep * (plain_share_ms_ > 0 ? plain_share_ms_ : step_ms_);
    rates_[i].dropped = loses || idle;
  }
  std::erase_if(order_, [&](int i) { return rates_[i].dropped; });
}

// Scores, highest asked first: a free drafter with a proposal whose
// acceptance is at least the best costly drafter's, discounted by that one's
// share of drafting and upkeep (it then gives as many tokens for less);
// costly drafters by rate (untried: 0); a free drafter whose acceptance is
// lower; one without a proposal last.
void AutoDrafter::RankForNextStep(std::span<const TokenId> history) {
  DropLosers();
  if (order_.empty()) return;
  bool costly_measured = false;
  double costly_bar = 0;
  for (int i : order_) {
    const Rate& r = rates_[i];
    if (Free(i) || r.steps == 0) continue;
    costly_measured = true;
    const double overhead = r.ask_ms / std::max(1, r.tries) + r.upkeep_ms / std::max(1, accepts_);
    const double share = std::clamp(overhead * r.weight / std::max(r.ms, 1e-9), 0.0, 1.0);
    costly_bar = std::max(costly_bar, Acceptance(i) * (1 - share));
  }
  if (!costly_measured) costly_bar = kUntriedAcceptance;
  peek_history_ = history.size();
  for (int i : order_) {
    peeked_[i] = 0;
    if (!Free(i)) {
      score_[i] = PerMs(i);
      continue;
    }
    if (!history.empty()) {
      // Timed as asking, so that a drafter whose proposals cost (a draft
      // model that often had nothing) stops counting as free.
      const std::span<TokenId> peek = std::span<TokenId>(peek_).subspan(size_t(i) * kMaxPeek, kMaxPeek);
      const auto t0 = Clock::now();
      peeked_[i] = drafters_[i]->Draft(DraftRequest{history, kMaxPeek, {}, nullptr}, peek);
      rates_[i].ask_ms += MsSince(t0);
      ++rates_[i].tries;
      rates_[i].ready = peeked_[i] > 0;
    }
    score_[i] = !rates_[i].ready ? -1 : Acceptance(i) >= costly_bar ? 1e9 + Acceptance(i) : -0.5;
  }
  std::sort(order_.begin(), order_.end(),
            [&](int a, int b) { return score_[a] > score_[b] || (score_[a] == score_[b] && a < b); });
  if (steps_ % kExploreEvery == kExploreEvery - 1) {
    auto least_tried = std::min_element(order_.begin(), order_.end(),
                                        [&](int a, int b) { return rates_[a].tries < rates_[b].tries; });
    std::rotate(order_.begin(), least_tried, least_tried + 1);
  }
}

int AutoDrafter::Draft(const DraftRequest& request, std::span<TokenId> out) {
  draft_start_ = Clock::now();
  ++steps_;
  for (int i : order_) {
    ++rates_[i].tries;
    const auto t0 = Clock::now();
    const int n = drafters_[i]->Draft(request, out);
    rates_[i].ask_ms += MsSince(t0);
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
  if (accepts_ == 0) {
    // The prompt's upkeep is spent whatever auto does next: rates count from here.
    for (Rate& r : rates_) r.upkeep_ms = 0;
  }
  if (accepts_++ > 0) {
    const double interval = std::chrono::duration<double, std::milli>(now - last_accept_).count();
    step_ms_ = step_ms_ > 0 ? kDecay * step_ms_ + (1 - kDecay) * interval : interval;
  }
  last_accept_ = now;
  if (drafted > 0) {
    Rate& r = rates_[last_];
    r.hits = kDecay * r.hits + accepted;
    r.trials = kDecay * r.trials + accepted + (accepted < drafted ? 1 : 0);
    r.tokens = kDecay * r.tokens + (accepted + 1);
    r.ms = kDecay * r.ms + std::chrono::duration<double, std::milli>(now - draft_start_).count();
    r.weight = kDecay * r.weight + 1;
    ++r.steps;
  }
  // Score the free drafters' proposals for this step against what it
  // committed (the accepted drafts and the new bonus), whoever drafted it.
  const std::span<const TokenId> committed = history.subspan(std::min(peek_history_, history.size()));
  for (size_t i = 0; i < drafters_.size(); ++i) {
    if (peeked_[i] == 0 || (drafted > 0 && static_cast<int>(i) == last_)) continue;
    const int scored = std::min<int>(peeked_[i], static_cast<int>(committed.size()));
    int hits = 0;
    while (hits < scored && peek_[i * kMaxPeek + hits] == committed[hits]) ++hits;
    rates_[i].hits = kDecay * rates_[i].hits + hits;
    rates_[i].trials = kDecay * rates_[i].trials + hits + (hits < scored ? 1 : 0);
  }
  for (size_t i = 0; i < drafters_.size(); ++i) {
    Rate& r = rates_[i];
    if (r.dropped) continue;
    const bool drafted_this = drafted > 0 && static_cast<int>(i) == last_;
    const auto t0 = Clock::now();
    drafters_[i]->Accept(history, drafted_this ? drafted : 0, drafted_this ? accepted : 0);
    const double ms = MsSince(t0);
    r.upkeep_ms += ms;
    r.idle_upkeep_ms = drafted_this ? 0 : r.idle_upkeep_ms + ms + observe_ms_[i];
  }
  RankForNextStep(history);
}

}  // namespace kakeya
