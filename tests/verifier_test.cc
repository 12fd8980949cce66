// Both verifiers keep the target's distribution exactly: speculative sampling
// (Leviathan et al. 2023, Theorem 1) and matching the seeded choice. Checked
// by counting: many seeded verifications of drafts drawn from a draft
// distribution q must emit tokens distributed as the target's p, by a
// chi-square test at significance 0.001; a deliberately biased verifier must
// fail the same test, so the test can fail. Matching must also emit exactly
// the tokens plain sampling picks at the same positions.
#include "speculative/verifier.h"

#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "stats_util.h"

namespace kakeya {
namespace {

constexpr int kVocab = 8;
constexpr int kTrials = 200000;
constexpr double kSignificance = 0.001;

SamplingParams Params(uint64_t seed) {
  SamplingParams p;
  p.temperature = 0.9f;
  p.top_k = 6;
  p.top_p = 1.0f;
  p.min_p = 0.0f;
  p.seed = seed;
  return p;
}

const std::vector<float> kRow0 = {1.0f, 2.5f, 0.3f, 2.0f, -1.0f, 1.8f, 0.9f, -3.0f};
const std::vector<float> kRow1 = {0.2f, -0.5f, 1.7f, 0.4f, 2.2f, -2.0f, 1.1f, 0.8f};
const std::vector<float> kRow2 = {1.5f, 1.4f, -0.3f, 0.0f, 0.6f, 2.1f, -1.2f, 0.5f};
// Draft distributions: deliberately different from the target's, and giving
// mass to tokens the target's top-k removes.
const std::vector<float> kQ0 = {0.30f, 0.05f, 0.20f, 0.05f, 0.10f, 0.10f, 0.15f, 0.05f};
const std::vector<float> kQ1 = {0.05f, 0.05f, 0.10f, 0.30f, 0.05f, 0.25f, 0.10f, 0.10f};

// Rows 0..2 back to back: the logits of a block of two drafts.
std::vector<float> ThreeRows() {
  std::vector<float> rows;
  for (const auto* r : {&kRow0, &kRow1, &kRow2}) rows.insert(rows.end(), r->begin(), r->end());
  return rows;
}

std::vector<double> TargetDistribution(const std::vector<float>& row) {
  Sampler s(Params(0), kVocab);
  std::vector<float> p(kVocab);
  s.Distribution(row, {}, p);
  return {p.begin(), p.end()};
}

int DrawFrom(const std::vector<float>& q, std::mt19937_64& rng) {
  std::discrete_distribution<int> d(q.begin(), q.end());
  return d(rng);
}

// A verifier that draws from p itself (not the residual) after a rejection:
// the classic mistake; it over-weights the draft's favourite tokens.
Verdict BiasedVerify(const BlockLogits& logits, std::span<const TokenId> drafts, std::span<const float> q,
                     Sampler& sampler, std::span<float> p) {
  Verdict v;
  for (size_t i = 0; i < drafts.size(); ++i) {
    sampler.Distribution(logits.row(i), {}, p);
    const double q_d = q.empty() ? 1.0 : q[i * kVocab + drafts[i]];
    if (sampler.Uniform() * q_d < p[drafts[i]]) {
      ++v.accepted;
      continue;
    }
    v.next = sampler.DrawFrom(p);
    return v;
  }
  sampler.Distribution(logits.row(v.accepted), {}, p);
  v.next = sampler.DrawFrom(p);
  return v;
}

enum class Mode { kRejection, kMatch, kBiased };

struct Counts {
  std::vector<int> first = std::vector<int>(kVocab);   // first emitted token
  std::vector<int> second = std::vector<int>(kVocab);  // second, when the first draft was accepted
  std::vector<int> third = std::vector<int>(kVocab);   // third, when both drafts were accepted
};

// Two drafts per step from q0, q1 (or the fixed tokens 3 and 4 for a
// deterministic drafter), verified against rows 0..2.
Counts CountEmitted(bool deterministic, Mode mode) {
  const std::vector<float> rows = ThreeRows();
  const BlockLogits logits{rows, kVocab};
  std::vector<float> q;
  if (!deterministic) {
    q.insert(q.end(), kQ0.begin(), kQ0.end());
    q.insert(q.end(), kQ1.begin(), kQ1.end());
  }
  Sampler sampler(Params(42), kVocab);
  std::mt19937_64 draft_rng(7);
  std::vector<float> p(kVocab), residual(kVocab);
  Counts c;
  for (int trial = 0; trial < kTrials; ++trial) {
    const TokenId drafts[2] = {deterministic ? 3 : DrawFrom(kQ0, draft_rng), deterministic ? 4 : DrawFrom(kQ1, draft_rng)};
    Verdict v;
    if (mode == Mode::kMatch) {
      // A fresh seed per trial; the drafts are the history's last two tokens.
      Sampler seeded(Params(trial), kVocab);
      v = VerifyMatch(logits, drafts, seeded, drafts);
    } else {
      v = mode == Mode::kBiased ? BiasedVerify(logits, drafts, q, sampler, p)
                                : VerifyRejection(logits, drafts, q, sampler, drafts, p, residual);
    }
    const TokenId emitted[3] = {v.accepted > 0 ? drafts[0] : v.next,
                                v.accepted > 1 ? drafts[1] : v.next, v.next};
    ++c.first[emitted[0]];
    if (v.accepted >= 1) ++c.second[emitted[1]];
    if (v.accepted >= 2) ++c.third[emitted[2]];
  }
  return c;
}

void ExpectTargetDistribution(const Counts& c) {
  EXPECT_GT(GoodnessOfFitPValue(c.first, TargetDistribution(kRow0)), kSignificance);
  EXPECT_GT(GoodnessOfFitPValue(c.second, TargetDistribution(kRow1)), kSignificance);
  EXPECT_GT(GoodnessOfFitPValue(c.third, TargetDistribution(kRow2)), kSignificance);
}

TEST(VerifyRejection, DraftModelProposalsKeepTheTargetDistribution) {
  ExpectTargetDistribution(CountEmitted(/*deterministic=*/false, Mode::kRejection));
}

TEST(VerifyRejection, DeterministicProposalsKeepTheTargetDistribution) {
  ExpectTargetDistribution(CountEmitted(/*deterministic=*/true, Mode::kRejection));
}

TEST(VerifyRejection, ABiasedVerifierFailsTheSameTest) {
  for (bool deterministic : {false, true}) {
    const Counts c = CountEmitted(deterministic, Mode::kBiased);
    EXPECT_LT(GoodnessOfFitPValue(c.first, TargetDistribution(kRow0)), kSignificance) << deterministic;
  }
}

TEST(VerifyMatch, SampledProposalsKeepTheTargetDistribution) {
  ExpectTargetDistribution(CountEmitted(/*deterministic=*/false, Mode::kMatch));
  ExpectTargetDistribution(CountEmitted(/*deterministic=*/true, Mode::kMatch));
}

// Every row's token is the one plain sampling picks at that position, with
// the row's own history (the penalties see the drafts before the row).
TEST(VerifyMatch, EmitsWhatPlainSamplingPicksAtEachPosition) {
  const std::vector<float> rows = ThreeRows();
  const BlockLogits logits{rows, kVocab};
  SamplingParams params = Params(0);
  params.repeat_penalty = 1.5f;
  params.presence_penalty = 0.3f;
  int accepted_some = 0;
  for (uint64_t seed = 0; seed < 500; ++seed) {
    params.seed = seed;
    Sampler sampler(params, kVocab), plain(params, kVocab);
    std::vector<TokenId> history = {5, 1, 7};
    const size_t committed = history.size();
    // Drafts: what plain sampling picks, except a wrong second one on odd seeds.
    for (int i = 0; i < 2; ++i) {
      TokenId t = plain.Sample(logits.row(i), history);
      if (i == 1 && seed % 2 == 1) t = (t + 1) % kVocab;
      history.push_back(t);
    }
    const std::span<const TokenId> drafts = std::span<const TokenId>(history).subspan(committed);
    const Verdict v = VerifyMatch(logits, drafts, sampler, history);
    EXPECT_EQ(v.accepted, seed % 2 == 1 ? 1 : 2) << seed;
    const std::span<const TokenId> before_next = std::span<const TokenId>(history).first(committed + v.accepted);
    EXPECT_EQ(v.next, plain.Sample(logits.row(v.accepted), before_next)) << seed;
    accepted_some += v.accepted;
  }
  EXPECT_GT(accepted_some, 0);
}

TEST(VerifyMatch, GreedyAcceptsTheAgreeingPrefixAndAddsTheTargetsToken) {
  const std::vector<float> rows = ThreeRows();
  const BlockLogits logits{rows, kVocab};
  SamplingParams greedy_params = Params(0);
  greedy_params.temperature = 0;
  Sampler greedy(greedy_params, kVocab);
  const auto verify = [&](std::vector<TokenId> drafts) { return VerifyMatch(logits, drafts, greedy, drafts); };
  // argmax: row0 -> 1, row1 -> 4, row2 -> 5
  EXPECT_EQ(verify({1, 4}).accepted, 2);
  EXPECT_EQ(verify({1, 4}).next, 5);
  EXPECT_EQ(verify({1, 0}).accepted, 1);
  EXPECT_EQ(verify({1, 0}).next, 4);
  EXPECT_EQ(verify({2, 4}).accepted, 0);
  EXPECT_EQ(verify({2, 4}).next, 1);
  EXPECT_EQ(VerifyMatch(BlockLogits{std::span<const float>(rows).first(kVocab), kVocab}, {}, greedy, {}).next, 1);
}

}  // namespace
}  // namespace kakeya
