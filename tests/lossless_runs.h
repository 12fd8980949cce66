// The architecture tests' two lossless checks (deepseek4_test, qwen35_test):
//  * speculative output with each of a model's drafters, and with a replay of
//    the output whose proposals are spoiled at random, equals plain decoding
//    (plain_decoding.h) token for token;
//  * a row's logits are the same bits however the sequence is cut into
//    forwards and rolled back.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "model/context.h"
#include "model/model.h"
#include "plain_decoding.h"
#include "replay_drafter.h"
#include "speculative/drafter_registry.h"
#include "speculative/speculative.h"

namespace kakeya {

struct LosslessRun {
  float temperature;
  int threads, block;
};

struct DrafterUnderTest {
  const char* spec;
  DrafterSources sources;
  bool drafts_every_step = false;  // reads the target (MTP, DSpark) or is a model: it proposes at every step
};

inline void CheckSpeculativeEqualsPlain(const std::string& model_path, int n_predict,
                                        const std::vector<LosslessRun>& runs,
                                        const std::vector<DrafterUnderTest>& drafters) {
  SCOPED_TRACE(model_path);
  const std::unique_ptr<Model> model = Model::Load(model_path);
  const std::vector<TokenId> prompt = model->tokenizer().Encode("The quick brown fox jumps over the lazy dog.", true, true);
  const int n_ctx = static_cast<int>(prompt.size()) + n_predict + 16;
  for (const LosslessRun& run : runs) {
    SCOPED_TRACE("temperature " + std::to_string(run.temperature) + " threads " + std::to_string(run.threads) +
                 " block " + std::to_string(run.block));
    GenerateOptions o;
    o.n_predict = n_predict;
    o.ignore_eos = true;
    o.sampling.temperature = run.temperature;
    o.sampling.seed = 11;
    std::vector<TokenId> plain;
    {
      Context ctx(*model, ContextOptions{.n_ctx = n_ctx, .max_batch = 64, .n_threads = 2});
      plain = DecodePlainly(ctx, prompt, o, nullptr).tokens;
    }
    std::vector<TokenId> full = prompt;
    full.insert(full.end(), plain.begin(), plain.end());
    // Logit rows for a verify block and no more: a recurrent state then keeps
    // only what rolling back a block needs.
    Context ctx(*model, ContextOptions{.n_ctx = n_ctx, .max_batch = 64, .n_threads = run.threads,
                                       .max_logit_rows = std::max(run.block, 2)});
    const SpecOptions spec_options{.block = run.block};
    ReplayDrafter replay(full);
    SpecStats stats;
    EXPECT_EQ(Generate(ctx, &replay, prompt, o, spec_options, nullptr, &stats).tokens, plain);
    EXPECT_GT(stats.accepted, n_predict / 4);
    const DrafterSetup setup{*model, ctx, "", o.sampling, std::max(run.block, 2)};
    for (const DrafterUnderTest& choice : drafters) {
      SCOPED_TRACE(choice.spec);
      const std::unique_ptr<Drafter> drafter = MakeDrafter(choice.spec, choice.sources, setup);
      SpecStats drafter_stats;
      EXPECT_EQ(Generate(ctx, drafter.get(), prompt, o, spec_options, nullptr, &drafter_stats).tokens, plain);
      // Random weights reject nearly all of it: the rollbacks are what is tested.
      if (choice.drafts_every_step) {
        EXPECT_GT(drafter_stats.drafted, n_predict / 2);
      }
    }
  }
}

// Random tokens in one forward, and in random pieces of which random tails
// are rolled back and run again (sometimes after a second forward without a
// commit, as a draft model's context does): every row's logits are the same
// bits. Returns the context of pieces, for checks of its state.
inline std::unique_ptr<Context> CheckRowsAreBitIdenticalHoweverCut(const Model& model, int n_rows, uint32_t seed,
                                                                    Context& whole) {
  std::mt19937 rng(seed);
  std::vector<TokenId> tokens(n_rows);
  for (TokenId& t : tokens) t = std::uniform_int_distribution<TokenId>(3, model.hparams().n_vocab - 1)(rng);
  whole.Forward(tokens, /*all_logits=*/true);
  auto pieces = std::make_unique<Context>(model, ContextOptions{.n_ctx = n_rows, .max_batch = 64, .n_threads = 1});
  while (pieces->n_past() < n_rows) {
    const int begin = pieces->n_past();
    const int n = std::min(n_rows - begin, std::uniform_int_distribution<int>(1, 24)(rng));
    pieces->Forward({tokens.data() + begin, size_t(n)}, true);
    int second = 0;
    if (pieces->n_past() < n_rows && std::uniform_int_distribution<int>(0, 2)(rng) == 0) {
      second = std::min(n_rows - pieces->n_past(), std::uniform_int_distribution<int>(1, 8)(rng));
      pieces->Forward({tokens.data() + begin + n, size_t(second)}, true);
    }
    const int dropped = std::uniform_int_distribution<int>(0, n + second - 1)(rng);
    if (dropped > 0) {  // roll back and run the dropped rows again
      pieces->Trim(dropped);
      pieces->Forward({tokens.data() + begin + n + second - dropped, size_t(dropped)}, true);
    }
    for (int r = 0; r < pieces->n_logit_rows(); ++r) {
      const int pos = pieces->n_past() - pieces->n_logit_rows() + r;
      EXPECT_EQ(std::memcmp(pieces->logits(r).data(), whole.logits(pos).data(), pieces->logits(r).size_bytes()), 0)
          << "position " << pos;
    }
    if (::testing::Test::HasFailure()) break;  // the first difference says it all
    pieces->Commit();
  }
  return pieces;
}

}  // namespace kakeya
