// The DSpark block drafter (speculative/dspark_drafter.h): its proposals and
// logits at every step of llama.cpp's speculative loop on the deepseek4
// fixture (tests/fixtures/models3 "DSpark", made with the reference engine),
// rollback that leaves nothing behind, the lossless loop with it (also in
// deepseek4_test), and files that do not fit.
#include "speculative/dspark_drafter.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "base/error.h"
#include "drafts_fixture.h"
#include "fixture_util.h"
#include "gguf_copy.h"
#include "model/context.h"
#include "model/model.h"
#include "speculative/drafter_registry.h"
#include "test_files.h"

namespace kakeya {
namespace {

using Tokens = std::vector<TokenId>;

const std::string kTarget = fixture::ModelPath("ds4-f32", "models3");
const std::string kDrafter = fixture::ModelPath("ds4-dspark-f32", "models3");

// Drives the target as the fixture's loop does, committing the reference's
// tokens, and compares every step's proposals with the reference's. The
// reference prefills all of the prompt but its last token, whose step comes
// first; kakeya prefills the whole prompt, so steps start at pos = n_prompt.
class DSparkParity : public ::testing::TestWithParam<const char*> {};

TEST_P(DSparkParity, ProposalsMatchLlamaCpp) {
  const fixture::RefDrafts ref = fixture::LoadRefDrafts("ds4-dspark-f32", GetParam(), "models3");
  const std::unique_ptr<Model> target = Model::Load(kTarget);
  Tokens full = ref.prompt_ids;
  full.insert(full.end(), ref.generated_ids.begin(), ref.generated_ids.end());
  const int n_prompt = static_cast<int>(ref.prompt_ids.size());

  Context ctx(*target, ContextOptions{.n_ctx = 2048, .max_batch = 64, .n_threads = 2});
  DSparkDrafter drafter(*target, kDrafter, 2048, ctx.pool());
  EXPECT_EQ(drafter.target_taps(), (std::vector<int>{1, 3, 5}));
  EXPECT_EQ(drafter.max_proposals(), 4);  // the anchor row proposes too
  ctx.SetHiddenTaps(drafter.target_taps());
  drafter.Begin(ref.prompt_ids);
  // The committed rows up to `end`, in pieces of at most 64.
  auto commit_to = [&](int end) {
    while (ctx.n_committed() < end) {
      const int n = std::min(64, end - ctx.n_committed());
      ctx.Forward({full.data() + ctx.n_committed(), size_t(n)}, /*all_logits=*/false);
      ctx.Commit();
      drafter.Observe(ctx, n);
    }
  };
  commit_to(n_prompt);

  int compared = 0, equal = 0;
  double worst = 0;
  for (const fixture::RefDraftStep& step : ref.steps) {
    if (step.pos < n_prompt) continue;
    SCOPED_TRACE(std::string(GetParam()) + " pos " + std::to_string(step.pos));
    commit_to(step.pos);
    ASSERT_EQ(full[step.pos], step.id_last);
    // The reference always runs the whole block (n_max rows, which see one
    // another) and cuts the draft near the end of the budget; so does this.
    const int m = static_cast<int>(step.draft.size());
    Tokens ours(ref.n_max);
    const std::span<const TokenId> history(full.data(), step.pos + 1);
    ASSERT_EQ(drafter.Draft({.history = history, .max_tokens = ref.n_max, .probs = {}}, ours), ref.n_max);
    for (int i = 0; i < m; ++i) {
      const auto& top = step.top[i];
      const std::span<const float> logits = drafter.logits(i);
      for (const auto& [id, logit] : top) {
        const double d = std::abs(double(logits[id]) - logit);
        worst = std::max(worst, d);
        EXPECT_LE(d, 1e-3 * std::max(1.0, std::abs(logit))) << "slot " << i << " token " << id;
      }
      // A later slot follows the earlier proposals (the Markov head), so
      // compare only while the proposals so far are the reference's.
      if (ours[i] != step.draft[i]) {
        EXPECT_LT(top[0].second - top[1].second, 2e-3 * std::max(1.0, std::abs(top[0].second)))
            << "slot " << i << ": proposes " << ours[i] << ", llama.cpp " << step.draft[i];
        ++compared;
        break;
      }
      ++compared;
      ++equal;
    }
  }
  EXPECT_GT(compared, 40);
  std::cout << "[dspark parity] " << GetParam() << ": " << equal << " of " << compared
            << " proposals equal to llama.cpp's, max |dlogit| " << worst << std::endl;
}

INSTANTIATE_TEST_SUITE_P(Prompts, DSparkParity, ::testing::Values("fox", "wrap"));

// A draft's rows leave nothing behind: drafting, then drafting again at the
// same position, gives bit-identical logits, and so does a fresh drafter
// that only saw the committed rows.
TEST(DSparkDrafter, DraftingLeavesTheContextAsItWas) {
  const std::unique_ptr<Model> target = Model::Load(kTarget);
  const Tokens prompt = target->tokenizer().Encode("The quick brown fox jumps over the lazy dog.", true, true);
  Context ctx(*target, ContextOptions{.n_ctx = 256, .max_batch = 64, .n_threads = 2});
  // The last prompt token is the bonus, not yet in the target's cache.
  const std::span<const TokenId> cached(prompt.data(), prompt.size() - 1);
  DSparkDrafter a(*target, kDrafter, 256, ctx.pool());
  ctx.SetHiddenTaps(a.target_taps());
  a.Begin(prompt);
  ctx.Forward(cached, false);
  ctx.Commit();
  a.Observe(ctx, static_cast<int>(cached.size()));
  Tokens first(4), second(4);
  ASSERT_EQ(a.Draft({.history = prompt, .max_tokens = 4, .probs = {}}, first), 4);
  const std::vector<float> before(a.logits(3).begin(), a.logits(3).end());
  ASSERT_EQ(a.Draft({.history = prompt, .max_tokens = 2, .probs = {}}, second), 2);
  ASSERT_EQ(a.Draft({.history = prompt, .max_tokens = 4, .probs = {}}, second), 4);
  EXPECT_EQ(first, second);
  EXPECT_EQ(std::vector<float>(a.logits(3).begin(), a.logits(3).end()), before);

  DSparkDrafter b(*target, kDrafter, 256, ctx.pool());
  b.Begin(prompt);
  b.Observe(ctx, static_cast<int>(cached.size()));
  Tokens fresh(4);
  ASSERT_EQ(b.Draft({.history = prompt, .max_tokens = 4, .probs = {}}, fresh), 4);
  EXPECT_EQ(fresh, first);
  EXPECT_EQ(std::vector<float>(b.logits(3).begin(), b.logits(3).end()), before);
}

// A draft vocabulary (DraftVocabSize) keeps the first ids of the head and
// of the Markov bias: the first proposal's logits are the full drafter's
// first ids, bit for bit, and it proposes the best of them.
TEST(DSparkDrafter, ADraftVocabularyScoresTheFirstIdsWithTheSameBits) {
  const std::unique_ptr<Model> target = Model::Load(kTarget);
  const int n = target->hparams().n_vocab / 2 / 16 * 16;
  const Tokens text = target->tokenizer().Encode("The quick brown fox jumps over the lazy dog, again and again.", true,
                                                 true);
  Context ctx(*target, ContextOptions{.n_ctx = 256, .max_batch = 64, .n_threads = 2});
  DSparkDrafter full(*target, kDrafter, 256, ctx.pool()), first(*target, kDrafter, 256, ctx.pool(), n);
  ctx.SetHiddenTaps(full.target_taps());
  full.Begin(text);
  first.Begin(text);
  auto commit = [&](int from, int n_rows) {
    ctx.Forward(std::span<const TokenId>(text.data() + from, n_rows), false);
    ctx.Commit();
    full.Observe(ctx, n_rows);
    first.Observe(ctx, n_rows);
  };
  commit(0, 3);
  int inside = 0, outside = 0;
  for (size_t end = 4; end <= text.size(); ++end) {  // the bonus text[end - 1] is not in the cache yet
    SCOPED_TRACE("history of " + std::to_string(end));
    const std::span<const TokenId> history(text.data(), end);
    Tokens a(1), b(1);
    ASSERT_EQ(full.Draft({.history = history, .max_tokens = 1, .probs = {}}, a), 1);
    ASSERT_EQ(first.Draft({.history = history, .max_tokens = 1, .probs = {}}, b), 1);
    const std::span<const float> whole = full.logits(0), small = first.logits(0);
    ASSERT_EQ(small.size(), size_t(n));
    ASSERT_TRUE(std::equal(small.begin(), small.end(), whole.begin())) << "logits differ";
    EXPECT_EQ(b[0], Argmax(whole.first(n)));
    (a[0] < n ? inside : outside) += 1;
    commit(static_cast<int>(end) - 1, 1);
  }
  EXPECT_GT(inside, 0);
  EXPECT_GT(outside, 0);
}

// Rows that skip positions cannot be injected: no proposals until Begin().
TEST(DSparkDrafter, AGapStopsDraftingUntilBegin) {
  const std::unique_ptr<Model> target = Model::Load(kTarget);
  const Tokens prompt = target->tokenizer().Encode("The quick brown fox", true, true);
  Context ctx(*target, ContextOptions{.n_ctx = 256, .max_batch = 64, .n_threads = 2});
  DSparkDrafter drafter(*target, kDrafter, 256, ctx.pool());
  ctx.SetHiddenTaps(drafter.target_taps());
  const std::span<const TokenId> cached(prompt.data(), prompt.size() - 1);
  drafter.Begin(prompt);
  ctx.Forward(cached, false);
  ctx.Commit();
  drafter.Observe(ctx, 2);  // the first rows never came
  Tokens out(4);
  EXPECT_EQ(drafter.Draft({.history = prompt, .max_tokens = 4, .probs = {}}, out), 0);
  drafter.Begin(prompt);
  drafter.Observe(ctx, static_cast<int>(cached.size()));
  EXPECT_EQ(drafter.Draft({.history = prompt, .max_tokens = 4, .probs = {}}, out), 4);
}

// ---------------------------------------------------------------- bad input

void ExpectDrafterError(const Model& target, const std::string& path, const std::string& needle) {
  ThreadPool pool(1);
  try {
    DSparkDrafter drafter(target, path, 64, pool);
    ADD_FAILURE() << "loading " << path << " succeeded; expected an error about " << needle;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos)
        << "message: " << e.what() << "\nexpected to mention: " << needle;
  }
}

TEST(DSparkDrafter, RefusesFilesThatDoNotFit) {
  const std::unique_ptr<Model> target = Model::Load(kTarget);
  TempDir dir("dspark");
  auto variant = [&](const std::string& name, const MetadataEdit& keys, const TensorEdit& tensors = {}) {
    const std::string path = dir.File(name + ".gguf");
    WriteEditedCopy(kDrafter, path, keys, tensors);
    return path;
  };
  ExpectDrafterError(*target, variant("taps", SetI32Array("dflash.target_layers", {1, 3, 9})),
                     "names target layer 9 but the target");
  ExpectDrafterError(*target, variant("ratios", SetI32Array("dflash.attention.compress_ratios", {0, 4})),
                     "dflash.attention.compress_ratios[1] = 4: a DSpark drafter's stages attend to the raw window only");
  ExpectDrafterError(*target, variant("streams", SetU32("dflash.hyper_connection.count", 2)),
                     "dflash.hyper_connection.count = 2");
  ExpectDrafterError(*target, variant("mask", SetU32("tokenizer.ggml.mask_token_id", 8000)),
                     "mask_token_id is missing or out of range");
  ExpectDrafterError(*target, variant("block", SetU32("dflash.block_size", 1)), "dflash.block_size = 1 is out of range");
  // A reduced vocabulary (d2t) is a part this drafter does not implement.
  ExpectDrafterError(*target,
                     variant("d2t", [](GgufWriter&, const GgufKv&) { return false; },
                             [](GgufWriter& w, const GgufTensor& t) {
                               if (t.name == "conf_proj.bias") w.AddTensor("d2t", DType::kF32, {1}, t.data, t.nbytes);
                               return false;
                             }),
                     "'d2t'");
  // A deepseek4 drafter for a target of one stream.
  const std::unique_ptr<Model> llama = Model::Load(fixture::ModelPath("tiny-llama-f32"));
  ExpectDrafterError(*llama, kDrafter, "drafts for a deepseek4 target");
}

TEST(DSparkDrafter, TheRegistryTellsItFromDFlash) {
  EXPECT_EQ(DrafterKindOfFile(kDrafter).name, "dspark");
  EXPECT_EQ(DrafterKindOfFile(fixture::ModelPath("g4moe-dflash-f32", "models2")).name, "dflash");
  const std::unique_ptr<Model> target = Model::Load(kTarget);
  Context ctx(*target, ContextOptions{.n_ctx = 256, .max_batch = 16, .n_threads = 1});
  const DrafterSetup setup{*target, ctx, "", {}, 4};
  EXPECT_EQ(MakeDrafter("dspark", {.draft = kDrafter}, setup)->name(), "dspark");
  // --spec dflash with a DSpark file says which kind the file holds.
  try {
    MakeDrafter("dflash", {.draft = kDrafter}, setup);
    ADD_FAILURE() << "--spec dflash with a DSpark file was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("holds a 'dspark' drafter"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace kakeya
