// AutoDrafter's choice among drafters, driven as the speculative loop drives
// it (Draft, a verdict, Accept) over a known text, with scripted drafters
// whose proposals, drafting time and upkeep are set by the test. Steps take
// kStepMs of wall time (slept), so that "free" (microseconds) and "costly"
// (milliseconds) stay apart by two orders of magnitude on a loaded machine.
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "speculative/auto_drafter.h"

namespace kakeya {
namespace {

constexpr double kStepMs = 4;

void SleepMs(double ms) {
  if (ms > 0) std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(ms));
}

// The text every test generates: a token sequence with no repeats, so that
// only the scripted drafters know what comes next.
TokenId TruthAt(size_t i) { return static_cast<TokenId>(1000 + i); }

// Proposes the true continuation once the history reaches right_from tokens
// (wrong tokens before), after draft_ms; costs upkeep_ms in each Accept.
class ScriptedDrafter final : public Drafter {
 public:
  ScriptedDrafter(std::string name, size_t right_from, double draft_ms, double upkeep_ms)
      : name_(std::move(name)), right_from_(right_from), draft_ms_(draft_ms), upkeep_ms_(upkeep_ms) {}

  std::string name() const override { return name_; }
  void Begin(std::span<const TokenId>) override {}
  int Draft(const DraftRequest& request, std::span<TokenId> out) override {
    SleepMs(draft_ms_);
    const size_t h = request.history.size();
    const int n = std::min<int>(request.max_tokens, static_cast<int>(out.size()));
    for (int i = 0; i < n; ++i) out[i] = h >= right_from_ ? TruthAt(h + i) : TokenId{7};
    return n;
  }
  void Accept(std::span<const TokenId>, int, int) override {
    ++accepts;
    SleepMs(upkeep_ms_);
  }

  int accepts = 0;  // Accept() calls: they stop when auto drops the drafter

 private:
  std::string name_;
  size_t right_from_;
  double draft_ms_, upkeep_ms_;
};

struct Picks {
  std::vector<std::string> drafted_by;  // per step, the drafter auto picked ("" for none)
};

// Runs `steps` steps of up to 4 drafts each over the true text, the prompt
// being its first 16 tokens. A plain step costs kStepMs, of which this
// sequence's share per token is share_ms (kStepMs when alone).
Picks Drive(AutoDrafter& autod, int steps, double share_ms = kStepMs) {
  std::vector<TokenId> history;
  for (size_t i = 0; i < 16; ++i) history.push_back(TruthAt(i));
  autod.Begin(history);
  Picks run;
  std::vector<TokenId> out(4);
  for (int s = 0; s < steps; ++s) {
    autod.PlainCost(kStepMs, share_ms);
    const int n = autod.Draft(DraftRequest{history, 4, {}, nullptr}, out);
    int accepted = 0;
    while (accepted < n && out[accepted] == TruthAt(history.size() + accepted)) ++accepted;
    SleepMs(kStepMs);
    const size_t keep = history.size() + accepted + 1;
    while (history.size() < keep) history.push_back(TruthAt(history.size()));
    run.drafted_by.push_back(n > 0 ? autod.last_drafter().name() : "");
    autod.Accept(history, n, accepted);
  }
  return run;
}

int CountFrom(const Picks& run, int from, const std::string& name) {
  return static_cast<int>(std::count(run.drafted_by.begin() + from, run.drafted_by.end(), name));
}

TEST(AutoDrafter, AFreeDrafterThatFailedEarlyDraftsOnceItsProposalsAreRight) {
  // Prompt lookup's shape: free, wrong for the first ~10 steps, then right.
  // The costly one (a draft model's) is half right throughout.
  std::vector<std::unique_ptr<Drafter>> d;
  d.push_back(std::make_unique<ScriptedDrafter>("lookup", 40, 0, 0));
  d.push_back(std::make_unique<ScriptedDrafter>("model", 0, 1.0, 0));
  AutoDrafter autod(std::move(d));
  const Picks run = Drive(autod, 40);
  // Its proposals were scored on every step, drafting or not: once right, it
  // drafts (a drafter whose rate alone decided would have stayed behind the
  // model, whose steps it never got to measure again).
  EXPECT_GE(CountFrom(run, 25, "lookup"), 13) << "of the last 15 steps";
  EXPECT_GT(autod.expected_acceptance(), 0.8);
}

TEST(AutoDrafter, AFreeDrafterIsNeverDropped) {
  auto lookup = std::make_unique<ScriptedDrafter>("lookup", 1u << 30, 0, 0);  // always wrong
  ScriptedDrafter* lookup_ptr = lookup.get();
  std::vector<std::unique_ptr<Drafter>> d;
  d.push_back(std::move(lookup));
  d.push_back(std::make_unique<ScriptedDrafter>("model", 0, 0.5, 0));
  AutoDrafter autod(std::move(d));
  Drive(autod, 30);
  EXPECT_EQ(lookup_ptr->accepts, 30);
}

// An always-right free drafter beside a costly one with upkeep_ms in every
// Accept, over 30 steps: how many times the costly one was kept up (its
// Accept calls), and the picks.
std::pair<int, Picks> IdleCostlyDrafter(double upkeep_ms, double share_ms) {
  auto costly = std::make_unique<ScriptedDrafter>("costly", 0, 0, upkeep_ms);
  ScriptedDrafter* costly_ptr = costly.get();
  std::vector<std::unique_ptr<Drafter>> d;
  d.push_back(std::make_unique<ScriptedDrafter>("lookup", 0, 0, 0));
  d.push_back(std::move(costly));
  AutoDrafter autod(std::move(d));
  const Picks run = Drive(autod, 30, share_ms);
  return {costly_ptr->accepts, run};
}

TEST(AutoDrafter, DropsAnIdleCostlyDrafterWithinAFewSteps) {
  // The free drafter is always right, so the costly one (upkeep of half a
  // step in every Accept) never drafts after its first step: it goes.
  const auto [accepts, run] = IdleCostlyDrafter(0.5 * kStepMs, kStepMs);
  EXPECT_LE(accepts, 4) << "observed for nothing";
  EXPECT_EQ(CountFrom(run, 5, "lookup"), 25);
}

TEST(AutoDrafter, BesideOtherRequestsDropsAnIdleCostlyDrafterSooner) {
  // A twentieth of a step of upkeep per Accept: alone, 10 idle steps would
  // reach half a step. Beside 7 other requests each one's upkeep adds to the
  // shared step, so it is weighed against an eighth of the step.
  EXPECT_LE(IdleCostlyDrafter(0.05 * kStepMs, kStepMs / 8).first, 4) << "observed for nothing";
}

TEST(AutoDrafter, DropsACostlyDrafterSlowerThanPlainDecoding) {
  // Always wrong and 3 ms to ask: each of its steps gives one token for
  // more than a plain step's time.
  auto slow = std::make_unique<ScriptedDrafter>("draft", 1u << 30, 3.0, 0);
  ScriptedDrafter* slow_ptr = slow.get();
  std::vector<std::unique_ptr<Drafter>> d;
  d.push_back(std::move(slow));
  AutoDrafter autod(std::move(d));
  const Picks run = Drive(autod, 20);
  EXPECT_LE(CountFrom(run, 0, "draft"), 5);
  EXPECT_LE(slow_ptr->accepts, 5);
  EXPECT_EQ(CountFrom(run, 10, ""), 10) << "plain steps once it is gone";
}

TEST(AutoDrafter, KeepsACostlyDrafterThatPays) {
  // Right every time: 5 tokens per step for 1 ms of drafting.
  std::vector<std::unique_ptr<Drafter>> d;
  d.push_back(std::make_unique<ScriptedDrafter>("lookup", 1u << 30, 0, 0));  // never right
  d.push_back(std::make_unique<ScriptedDrafter>("draft", 0, 1.0, 0));
  AutoDrafter autod(std::move(d));
  const Picks run = Drive(autod, 30);
  EXPECT_GE(CountFrom(run, 10, "draft"), 19) << "of the last 20 steps (one may explore)";
}

}  // namespace
}  // namespace kakeya
