// Speculation changes nothing but the speed, sampled as well as greedy: with
// a seed, the token ids are plain decoding's for every drafter, block size
// and thread count, at temperatures 0.8 and 1.2 with the default filters, on
// the shipped pair and on the fixture pair; and they stay plain decoding's
// with the repetition penalties and DRY on. (The seeded choice depends on
// (seed, position) alone, and VerifyMatch checks drafts by equality with it.)
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "engine/generate.h"
#include "model/context.h"
#include "model/model.h"
#include "plain_decoding.h"
#include "speculative/drafter_registry.h"
#include "speculative/speculative.h"

namespace kakeya {
namespace {

const std::string kModels = std::string(KAKEYA_FIXTURES) + "/../../models/";
const std::string kFixtureModels = std::string(KAKEYA_FIXTURES) + "/models/";
constexpr int kTokens = 64;

struct Pair {
  std::string target;
  DrafterSources drafters;
  std::string prompt;
};

const Pair kShipped = {kModels + "kakeya-pystdlib.gguf", {.shipped_target = kModels + "kakeya-pystdlib.gguf"},
                       "import os\n\n\ndef read_config(path):\n"};
const Pair kFixture = {kFixtureModels + "tiny-llama-f32.gguf", {.draft = kFixtureModels + "tiny-draft-f32.gguf"},
                       "The quick brown fox jumps over the lazy dog. The quick brown"};

struct Config {
  std::string kind;  // "ngram", "draft", ..., or "auto"
  int block;         // 0: adaptive
};

GenerateOptions Options(float temperature, uint64_t seed) {
  GenerateOptions o;
  o.n_predict = kTokens;
  o.ignore_eos = true;
  o.sampling.temperature = temperature;
  o.sampling.seed = seed;
  return o;
}

// Plain decoding with 2 threads, then every config with 1 and 2 threads.
void CheckIdentical(const Pair& pair, const std::vector<Config>& configs, const GenerateOptions& options) {
  const std::unique_ptr<Model> target = Model::Load(pair.target);
  const std::vector<TokenId> prompt = target->tokenizer().Encode(pair.prompt, true, true);
  const auto context_options = [&](int threads) {
    return ContextOptions{.n_ctx = static_cast<int>(prompt.size()) + kTokens + kAdaptiveMaxBlock, .max_batch = 64,
                          .n_threads = threads, .max_logit_rows = kAdaptiveMaxBlock};
  };
  std::vector<TokenId> plain;
  {
    Context ctx(*target, context_options(2));
    plain = DecodePlainly(ctx, prompt, options, nullptr).tokens;
  }
  ASSERT_EQ(static_cast<int>(plain.size()), kTokens);
  int accepted = 0;
  for (const Config& c : configs) {
    for (int threads : {1, 2}) {
      SCOPED_TRACE(c.kind + " block " + std::to_string(c.block) + " threads " + std::to_string(threads));
      Context ctx(*target, context_options(threads));
      const std::unique_ptr<Drafter> drafter =
          MakeDrafterFrom(c.kind, AvailableDrafters(pair.drafters, *target),
                          DrafterSetup{*target, ctx, "", options.sampling, kAdaptiveMaxBlock});
      SpecStats stats;
      const GenerateResult r = Generate(ctx, drafter.get(), prompt, options,
                                        SpecOptions{.block = c.block, .max_block = kAdaptiveMaxBlock}, nullptr, &stats);
      EXPECT_EQ(r.tokens, plain);
      accepted += stats.accepted;
    }
  }
  EXPECT_GT(accepted, 0) << "no draft was ever accepted: the comparison would be vacuous";
}

const std::vector<Config> kShippedConfigs = {{"ngram", 0}, {"draft", 4}, {"draft", 16}, {"dflash", 0},
                                             {"mtp", 0},   {"auto", 0}};

TEST(SeededIdentity, ShippedPairAtTemperature08) { CheckIdentical(kShipped, kShippedConfigs, Options(0.8f, 11)); }

TEST(SeededIdentity, ShippedPairAtTemperature12) { CheckIdentical(kShipped, kShippedConfigs, Options(1.2f, 12)); }

TEST(SeededIdentity, FixturePair) {
  const std::vector<Config> configs = {{"ngram", 0}, {"draft", 4}, {"draft", 16}, {"auto", 0}};
  CheckIdentical(kFixture, configs, Options(0.8f, 13));
  CheckIdentical(kFixture, configs, Options(1.2f, 14));
}

GenerateOptions Penalized(float temperature) {
  GenerateOptions o = Options(temperature, 15);
  o.sampling.repeat_penalty = 1.15f;
  o.sampling.frequency_penalty = 0.1f;
  o.sampling.presence_penalty = 0.1f;
  o.sampling.dry_multiplier = 0.8f;
  return o;
}

TEST(SeededIdentity, RepetitionControlsStayExact) {
  const std::vector<Config> configs = {{"ngram", 0}, {"draft", 4}, {"auto", 0}};
  CheckIdentical(kShipped, configs, Penalized(0.0f));
  CheckIdentical(kShipped, configs, Penalized(0.8f));
}

}  // namespace
}  // namespace kakeya
