// The shipped target with its shipped drafters (models/): greedy output with
// each drafter, and with auto running them all, is the plain output token for
// token, over 1,500 tokens that wrap the 128-token sliding windows many
// times and pass the 512-token training context, with 1 and 2 threads.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "engine/generate.h"
#include "model/context.h"
#include "model/model.h"
#include "speculative/drafter_registry.h"
#include "speculative/speculative.h"

namespace kakeya {
namespace {

const std::string kModels = std::string(KAKEYA_FIXTURES) + "/../../models/";
const std::string kTarget = kModels + "kakeya-pystdlib.gguf";
constexpr int kTokens = 1500;
constexpr int kMaxBlock = 16;

ContextOptions Options(int n_prompt, int threads) {
  return ContextOptions{.n_ctx = n_prompt + kTokens + kMaxBlock, .max_batch = 64, .n_threads = threads,
                        .max_logit_rows = kMaxBlock};
}

GenerateOptions Greedy() {
  GenerateOptions o;
  o.n_predict = kTokens;
  o.ignore_eos = true;
  o.sampling.temperature = 0;
  return o;
}

struct Config {
  std::string kind;  // a registry kind, or "auto"
  int block;         // 0: adaptive
};

TEST(ShippedDraftersSlow, GreedyOutputEqualsPlainAcrossRingWraps) {
  const std::unique_ptr<Model> target = Model::Load(kTarget);
  const std::vector<TokenId> prompt = target->tokenizer().Encode("def parse_args(argv=None):\n", true, true);
  const int n_prompt = static_cast<int>(prompt.size());
  std::vector<TokenId> plain;
  {
    Context ctx(*target, Options(n_prompt, 2));
    plain = Generate(ctx, prompt, Greedy(), nullptr).tokens;
  }
  ASSERT_EQ(static_cast<int>(plain.size()), kTokens);

  const std::vector<DrafterChoice> shipped = {{"draft", kModels + "kakeya-pystdlib-draft.gguf"},
                                              {"block", kModels + "kakeya-pystdlib-dflash.gguf"},
                                              {"mtp", kModels + "kakeya-pystdlib-mtp.gguf"}};
  for (int threads : {2, 1}) {
    std::vector<Config> configs = {{"block", 0}, {"mtp", 0}, {"auto", 0}};
    if (threads == 2) configs.insert(configs.end(), {{"block", 2}, {"block", 4}, {"block", 8}, {"mtp", 2}, {"mtp", 4}});
    for (const Config& c : configs) {
      SCOPED_TRACE(c.kind + " block " + std::to_string(c.block) + " threads " + std::to_string(threads));
      Context ctx(*target, Options(n_prompt, threads));
      const std::string path = c.kind == "block" ? shipped[1].path : c.kind == "mtp" ? shipped[2].path : "";
      const DrafterSetup setup{*target, ctx, path, Greedy().sampling, kMaxBlock};
      const std::unique_ptr<Drafter> drafter =
          c.kind == "auto" ? MakeAutoDrafter(setup, shipped) : FindDrafterKind(c.kind)->make(setup);
      SpecStats stats;
      const GenerateResult r =
          GenerateSpeculative(ctx, *drafter, prompt, Greedy(), SpecOptions{.block = c.block, .max_block = kMaxBlock},
                              nullptr, &stats);
      EXPECT_EQ(r.tokens, plain);
      EXPECT_GT(stats.accepted, 0) << "the drafter never got a proposal accepted";
      if (c.kind == "auto") {
        EXPECT_GE(stats.by_drafter.size(), 2u) << "auto used one drafter only";
      }
    }
  }
}

}  // namespace
}  // namespace kakeya
