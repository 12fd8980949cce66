// Repetition controls against a naive float64 reference written here from
// their definitions (llama.cpp's penalties and DRY samplers): random
// histories over a small alphabet, so that repeats abound, with real
// breaker tokens from a tokenizer; a hand-worked DRY example; and the
// sampler picking the penalized argmax.
#include "sampling/penalties.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "base/error.h"
#include "model/model.h"
#include "sampling/sampler.h"

namespace kakeya {
namespace {

std::vector<double> NaivePenalized(const std::vector<float>& logits, const std::vector<TokenId>& history,
                                   const SamplingParams& p, const std::vector<bool>& breaker) {
  std::vector<double> out(logits.begin(), logits.end());
  const auto last = [&](int n) {
    const size_t k = n < 0 ? history.size() : std::min<size_t>(n, history.size());
    return std::vector<TokenId>(history.end() - k, history.end());
  };
  if (p.repeat_last_n != 0) {
    std::map<TokenId, int> count;
    for (TokenId t : last(p.repeat_last_n)) ++count[t];
    for (const auto& [t, c] : count) {
      out[t] = out[t] <= 0 ? out[t] * p.repeat_penalty : out[t] / p.repeat_penalty;
      out[t] -= c * p.frequency_penalty + p.presence_penalty;
    }
  }
  if (p.dry_multiplier > 0 && p.dry_penalty_last_n != 0) {
    const std::vector<TokenId> w = last(p.dry_penalty_last_n);
    const int n = static_cast<int>(w.size());
    std::map<TokenId, int> longest;
    // Candidate w[j] follows the earlier sequence ending at j - 1; it repeats
    // the tail for as long as the two agree and the tail has no breaker.
    for (int j = 1; j < n; ++j) {
      int len = 0;
      while (len < j && w[j - 1 - len] == w[n - 1 - len] && !breaker[w[n - 1 - len]]) ++len;
      if (len >= p.dry_allowed_length) longest[w[j]] = std::max(longest[w[j]], len);
    }
    for (const auto& [t, len] : longest) {
      if (!breaker[t]) out[t] -= p.dry_multiplier * std::pow(double(p.dry_base), len - p.dry_allowed_length);
    }
  }
  return out;
}

class PenaltiesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    model_ = Model::Load(std::string(KAKEYA_FIXTURES) + "/models/tiny-llama-f32.gguf");
    n_vocab_ = model_->hparams().n_vocab;
  }
  std::unique_ptr<Model> model_;
  int n_vocab_ = 0;
};

TEST_F(PenaltiesTest, MatchTheNaiveReference) {
  const Tokenizer& tok = model_->tokenizer();
  SamplingParams defaults;
  std::vector<bool> breaker(n_vocab_, false);
  for (TokenId id = 0; id < tok.n_vocab(); ++id) {
    for (const std::string& b : defaults.dry_sequence_breakers) {
      if (std::string(tok.TokenText(id)).find(b) != std::string::npos) breaker[id] = true;
    }
  }
  std::vector<TokenId> alphabet = {450, 4996, 1735, 642, 338, 263};
  int n_breakers = 0;
  for (TokenId id = 0; id < n_vocab_ && n_breakers < 2; ++id) {
    if (breaker[id]) alphabet.push_back(id), ++n_breakers;
  }
  ASSERT_EQ(n_breakers, 2) << "the fixture vocabulary has breaker tokens";

  std::mt19937 rng(5);
  std::normal_distribution<float> normal(0.0f, 2.0f);
  int dry_hits = 0;
  for (int trial = 0; trial < 300; ++trial) {
    SamplingParams p;
    p.repeat_last_n = std::vector<int>{-1, 0, 8, 64}[trial % 4];
    p.repeat_penalty = 1.0f + 0.1f * (trial % 5);
    p.frequency_penalty = 0.05f * (trial % 3);
    p.presence_penalty = 0.2f * (trial % 2);
    p.dry_multiplier = trial % 7 == 0 ? 0.0f : 0.8f;
    p.dry_base = 1.75f;
    p.dry_allowed_length = 1 + trial % 3;
    p.dry_penalty_last_n = std::vector<int>{-1, 40, 200}[trial % 3];
    std::vector<TokenId> history;
    const int n = 1 + trial * 3;
    // Repeat a motif with mutations so that DRY finds matches of every length.
    std::vector<TokenId> motif;
    for (int i = 0; i < 6; ++i) motif.push_back(alphabet[rng() % alphabet.size()]);
    for (int i = 0; i < n; ++i) history.push_back(rng() % 5 == 0 ? alphabet[rng() % alphabet.size()] : motif[i % 6]);
    std::vector<float> logits(n_vocab_);
    for (float& l : logits) l = normal(rng);

    RepetitionPenalties penalties(p, n_vocab_, &tok, 4096);
    std::vector<float> got(n_vocab_);
    penalties.Apply(history, logits, got);
    const std::vector<double> want = NaivePenalized(logits, history, p, breaker);
    for (int t = 0; t < n_vocab_; ++t) {
      ASSERT_NEAR(got[t], want[t], 1e-4 * (1 + std::abs(want[t]))) << "trial " << trial << " token " << t;
    }
    for (TokenId t : alphabet) dry_hits += p.dry_multiplier > 0 && got[t] < logits[t] - 0.5f;
  }
  EXPECT_GT(dry_hits, 50) << "DRY must actually fire in this test";
}

// "a b c ... a b" : c would repeat "a b" (2 tokens) -> multiplier * base^0;
// after "a b c d a b c", d would repeat 3 tokens -> multiplier * base^1.
TEST_F(PenaltiesTest, DryHandWorkedExample) {
  SamplingParams p;
  p.dry_multiplier = 0.8f;
  p.dry_base = 2.0f;
  p.dry_allowed_length = 2;
  const TokenId a = 450, b = 4996, c = 1735, d = 338, x = 263;
  RepetitionPenalties penalties(p, n_vocab_, &model_->tokenizer(), 64);
  std::vector<float> zero(n_vocab_, 0.0f), out(n_vocab_);
  penalties.Apply(std::vector<TokenId>{a, b, c, x, a, b}, zero, out);
  EXPECT_FLOAT_EQ(out[c], -0.8f);
  EXPECT_EQ(std::count_if(out.begin(), out.end(), [](float v) { return v != 0; }), 1);
  penalties.Apply(std::vector<TokenId>{a, b, c, d, x, a, b, c}, zero, out);
  EXPECT_FLOAT_EQ(out[d], -1.6f);
  penalties.Apply(std::vector<TokenId>{a, b, c, x, c}, zero, out);  // a 1-token repeat is allowed
  EXPECT_EQ(std::count_if(out.begin(), out.end(), [](float v) { return v != 0; }), 0);
}

TEST_F(PenaltiesTest, GreedySamplerPicksThePenalizedArgmax) {
  SamplingParams p;
  p.temperature = 0;
  p.repeat_penalty = 1.1f;
  std::vector<float> logits(n_vocab_, -5.0f);
  logits[10] = 2.0f;
  logits[11] = 1.9f;
  Sampler sampler(p, n_vocab_);
  EXPECT_EQ(sampler.Sample(logits, std::vector<TokenId>{3, 4}), 10);
  EXPECT_EQ(sampler.Sample(logits, std::vector<TokenId>{3, 10}), 11);  // 2.0 / 1.1 < 1.9
}

TEST(PenaltyParams, RejectsOutOfRangeValuesNamingTheFlag) {
  const auto error = [](auto&& mutate) {
    SamplingParams p;
    mutate(p);
    try {
      p.Validate();
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_NE(error([](SamplingParams& p) { p.repeat_penalty = 0; }).find("--repeat-penalty"), std::string::npos);
  EXPECT_NE(error([](SamplingParams& p) { p.repeat_last_n = -2; }).find("--repeat-last-n"), std::string::npos);
  EXPECT_NE(error([](SamplingParams& p) { p.dry_multiplier = -1; }).find("--dry-multiplier"), std::string::npos);
  EXPECT_NE(error([](SamplingParams& p) { p.dry_base = 0.5f; }).find("--dry-base"), std::string::npos);
  EXPECT_NE(error([](SamplingParams& p) { p.dry_allowed_length = 0; }).find("--dry-allowed-length"),
            std::string::npos);
  EXPECT_NE(error([](SamplingParams& p) { p.dry_sequence_breakers = {""}; }).find("--dry-sequence-breaker"),
            std::string::npos);
  EXPECT_EQ(error([](SamplingParams&) {}), "");
}

}  // namespace
}  // namespace kakeya
