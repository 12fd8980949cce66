// The shipped target with its shipped drafters (models/): greedy output with
// each drafter, and with auto running them all, is the plain output token for
// token, over generations that wrap the 128-token sliding windows several
// times and pass the 512-token training context, with 1 and 2 threads.
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
const std::string kTarget = kModels + "kakeya-pystdlib.gguf";

ContextOptions Options(int n_prompt, int n_tokens, int threads) {
  return ContextOptions{.n_ctx = n_prompt + n_tokens + kAdaptiveMaxBlock, .max_batch = 64, .n_threads = threads,
                        .max_logit_rows = kAdaptiveMaxBlock};
}

GenerateOptions Greedy(int n_tokens) {
  GenerateOptions o;
  o.n_predict = n_tokens;
  o.ignore_eos = true;
  o.sampling.temperature = 0;
  return o;
}

struct Config {
  std::string kind;  // a registry kind, or "auto"
  int block;         // 0: adaptive
  int threads;
};

// n_tokens of plain greedy output (2 threads), then the same with each config.
void CheckShipped(int n_tokens, const std::vector<Config>& configs) {
  const std::unique_ptr<Model> target = Model::Load(kTarget);
  const std::vector<TokenId> prompt = target->tokenizer().Encode("def parse_args(argv=None):\n", true, true);
  const int n_prompt = static_cast<int>(prompt.size());
  std::vector<TokenId> plain;
  {
    Context ctx(*target, Options(n_prompt, n_tokens, 2));
    plain = DecodePlainly(ctx, prompt, Greedy(n_tokens), nullptr).tokens;
  }
  ASSERT_EQ(static_cast<int>(plain.size()), n_tokens);

  const DrafterSources shipped{.shipped_target = kTarget};
  for (const Config& c : configs) {
    SCOPED_TRACE(c.kind + " block " + std::to_string(c.block) + " threads " + std::to_string(c.threads));
    Context ctx(*target, Options(n_prompt, n_tokens, c.threads));
    const std::unique_ptr<Drafter> drafter =
        MakeDrafter(c.kind, shipped, DrafterSetup{*target, ctx, "", Greedy(n_tokens).sampling, kAdaptiveMaxBlock});
    SpecStats stats;
    const GenerateResult r = Generate(ctx, drafter.get(), prompt, Greedy(n_tokens),
                                      SpecOptions{.block = c.block, .max_block = kAdaptiveMaxBlock}, nullptr, &stats);
    EXPECT_EQ(r.tokens, plain);
    EXPECT_GT(stats.accepted, 0) << "the drafter never got a proposal accepted";
    if (c.kind == "auto") {
      EXPECT_GE(stats.by_drafter.size(), 2u) << "auto used one drafter only";
    }
  }
}

// CI's share: 640 tokens still pass the 512-token training context and wrap
// the 128-token windows (a ring of 128 + 64 rows) three times; every shipped
// drafter adaptive, auto with 1 and 2 threads, and one fixed block per
// drafter. The full sweep is ShippedDraftersSweep below.
TEST(ShippedDraftersSlow, GreedyOutputEqualsPlainAcrossRingWraps) {
  CheckShipped(640, {{"dflash", 0, 2}, {"mtp", 0, 2}, {"auto", 0, 2}, {"dflash", 4, 2}, {"mtp", 2, 2}, {"auto", 0, 1}});
}

// 1,500 tokens, every config with 2 threads and the adaptive ones with 1
// (about 1.5 min: scripts/test.sh --slow, not CI).
TEST(ShippedDraftersSweep, GreedyOutputEqualsPlainAcrossRingWraps) {
  std::vector<Config> configs;
  for (int threads : {2, 1}) {
    configs.insert(configs.end(), {{"dflash", 0, threads}, {"mtp", 0, threads}, {"auto", 0, threads}});
    if (threads == 2) {
      configs.insert(configs.end(), {{"dflash", 2, 2}, {"dflash", 4, 2}, {"dflash", 8, 2}, {"mtp", 2, 2}, {"mtp", 4, 2}});
    }
  }
  CheckShipped(1500, configs);
}

}  // namespace
}  // namespace kakeya
