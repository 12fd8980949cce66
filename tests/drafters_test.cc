// The n-gram and draft-model drafters against naive recomputations, over
// simulated speculative loops (history grows by the accepted drafts plus a
// bonus token each step), and the draft/target vocabulary check.
#include <algorithm>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "gguf_copy.h"
#include "base/error.h"
#include "gguf/gguf.h"
#include "model/context.h"
#include "model/model.h"
#include "sampling/sampler.h"
#include "speculative/draft_model_drafter.h"
#include "speculative/drafter.h"
#include "speculative/ngram_drafter.h"

namespace kakeya {
namespace {

const std::string kFixtures = KAKEYA_FIXTURES;
const std::string kTarget = kFixtures + "/models/tiny-llama-f32.gguf";
const std::string kDraft = kFixtures + "/models/tiny-draft-f32.gguf";
const std::string kVocab8000 = kFixtures + "/tokenizer/ggml-vocab-llama-spm-8000.gguf";
const std::string kVocab32000 = kFixtures + "/tokenizer/ggml-vocab-llama-spm.gguf";

using Tokens = std::vector<TokenId>;

// ---------------------------------------------------------------- n-gram

// The definition, by brute force: for n = n_max .. n_min, the latest end
// e <= h - 1 with history[e - n, e) == history[h - n, h); propose what follows.
Tokens NaiveNgram(const Tokens& history, int n_min, int n_max, int max_tokens) {
  const int h = static_cast<int>(history.size());
  for (int n = n_max; n >= n_min; --n) {
    for (int e = h - 1; e >= n; --e) {
      if (std::equal(history.begin() + (e - n), history.begin() + e, history.end() - n)) {
        const int count = std::min(max_tokens, h - e);
        return Tokens(history.begin() + e, history.begin() + e + count);
      }
    }
  }
  return {};
}

Tokens DraftNgram(NgramDrafter& drafter, const Tokens& history, int max_tokens) {
  Tokens out(max_tokens);
  const int n = drafter.Draft({.history = history, .max_tokens = max_tokens, .probs = {}}, out);
  out.resize(n);
  return out;
}

Tokens Propose(const Tokens& history, int n_min, int n_max, int max_tokens = 16) {
  NgramDrafter drafter({.n_min = n_min, .n_max = n_max});
  drafter.Begin(history);
  return DraftNgram(drafter, history, max_tokens);
}

TEST(NgramDrafter, ContinuesARepeatingPattern) {
  EXPECT_EQ(Propose({1, 2, 3, 4, 1, 2, 3}, 1, 3), (Tokens{4, 1, 2, 3}));
}

TEST(NgramDrafter, PrefersTheLongestMatch) {
  // "1 2 3" last occurred before 9; the 1-gram "3" more recently before 8.
  EXPECT_EQ(Propose({5, 1, 2, 3, 9, 7, 3, 8, 1, 2, 3}, 1, 3), (Tokens{9, 7, 3, 8, 1, 2, 3}));
}

TEST(NgramDrafter, TakesTheMostRecentOccurrence) {
  EXPECT_EQ(Propose({1, 2, 7, 1, 2, 8, 1, 2}, 2, 2), (Tokens{8, 1, 2}));
}

TEST(NgramDrafter, NeverMatchesTheSuffixItself) {
  EXPECT_EQ(Propose({1, 2, 3}, 1, 3), Tokens{});
  EXPECT_EQ(Propose({7}, 1, 3), Tokens{});
  EXPECT_EQ(Propose({}, 1, 3), Tokens{});
  // An overlapping earlier occurrence is a real one.
  EXPECT_EQ(Propose({4, 4, 4}, 1, 3), (Tokens{4}));
}

TEST(NgramDrafter, RespectsMaxTokens) {
  EXPECT_EQ(Propose({1, 2, 3, 4, 5, 6, 1, 2}, 1, 3, 3), (Tokens{3, 4, 5}));
  EXPECT_EQ(Propose({1, 2, 3, 4, 5, 6, 1, 2}, 1, 3, 1), (Tokens{3}));
}

TEST(NgramDrafter, ProposesNothingBelowNMin) {
  EXPECT_EQ(Propose({1, 2, 3, 9, 3}, 2, 3), Tokens{});
  EXPECT_EQ(Propose({1, 2, 3, 9, 3}, 1, 3), (Tokens{9, 3}));
}

TEST(NgramDrafter, RejectsBadOptions) {
  EXPECT_THROW(NgramDrafter({.n_min = 0, .n_max = 3}), Error);
  EXPECT_THROW(NgramDrafter({.n_min = 3, .n_max = 2}), Error);
  EXPECT_THROW(NgramDrafter({.n_min = 1, .n_max = 65}), Error);
  EXPECT_NO_THROW(NgramDrafter({.n_min = 64, .n_max = 64}));
}

// Random small-alphabet histories grown as the loop grows them: a prompt, then
// per step some accepted drafts and a bonus. Small index reservations make the
// table grow; some steps skip Accept() (Draft() must index on its own).
TEST(NgramDrafter, MatchesTheNaiveScanOnRandomLoops) {
  std::mt19937 rng(7);
  auto uniform = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  for (int trial = 0; trial < 3000; ++trial) {
    const int n_min = uniform(1, 4);
    const int n_max = uniform(n_min, 5);
    const int alphabet = uniform(2, 6);
    NgramDrafter drafter({.n_min = n_min, .n_max = n_max, .n_ctx = uniform(1, 64)});
    Tokens history(uniform(0, 12));
    for (TokenId& t : history) t = uniform(0, alphabet - 1);
    drafter.Begin(history);
    for (int step = 0; step < 40; ++step) {
      const int max_tokens = uniform(1, 8);
      const Tokens drafted = DraftNgram(drafter, history, max_tokens);
      ASSERT_EQ(drafted, NaiveNgram(history, n_min, n_max, max_tokens))
          << "trial " << trial << " step " << step << " n " << n_min << ".." << n_max;
      const int accepted = uniform(0, static_cast<int>(drafted.size()));
      history.insert(history.end(), drafted.begin(), drafted.begin() + accepted);
      history.push_back(uniform(0, alphabet - 1));
      if (uniform(0, 4) != 0) drafter.Accept(history, static_cast<int>(drafted.size()), accepted);
    }
  }
}

// ---------------------------------------------------------------- draft model

class DraftModelTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    target_ = Model::Load(kTarget);
    draft_ = Model::Load(kDraft);
  }
  static void TearDownTestSuite() {
    target_.reset();
    draft_.reset();
  }

  // Greedy continuation of `history` by a fresh pass of the draft model.
  Tokens NaiveGreedy(const Tokens& history, int count) {
    Context& ctx = Reference();
    ctx.Clear();
    ctx.Forward(history, /*all_logits=*/false);
    Tokens out;
    for (int i = 0; i < count; ++i) {
      out.push_back(Argmax(ctx.logits(0)));
      if (i + 1 < count) ctx.Forward(std::span(&out.back(), 1), false);
    }
    return out;
  }

  Context& Reference() {
    if (!reference_) reference_ = std::make_unique<Context>(*draft_, ContextOptions{.n_ctx = 512, .max_batch = 512});
    return *reference_;
  }

  static Tokens RandomPrompt(std::mt19937& rng, int n) {
    std::uniform_int_distribution<TokenId> token(3, 7999);
    Tokens prompt = {1};
    while (static_cast<int>(prompt.size()) < n) prompt.push_back(token(rng));
    return prompt;
  }

  static inline std::unique_ptr<Model> target_;
  static inline std::unique_ptr<Model> draft_;
  std::unique_ptr<Context> reference_;
};

// The loop simulated with random accepted counts: the bonus is random, or
// sometimes the rejected proposal itself (its cached row matches the history
// but must not be kept: the next Draft() needs the bonus's logits). On plain
// steps (no Draft) the history grows by the bonus alone. The drafter's context
// must commit exactly the matching history it has fed, short of the bonus.
TEST_F(DraftModelTest, GreedyProposalsEqualPlainGreedyDecoding) {
  for (int n_ctx : {512, 70}) {
    SCOPED_TRACE("n_ctx " + std::to_string(n_ctx));
    std::mt19937 rng(11 + n_ctx);
    auto uniform = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
    DraftModelDrafter drafter(*target_, *draft_, {.n_ctx = n_ctx, .max_batch = 7, .max_block = 6});
    EXPECT_FALSE(drafter.samples());
    Tokens history = RandomPrompt(rng, 23);
    drafter.Begin(history);
    EXPECT_EQ(drafter.context().n_committed(), 22);
    int committed = 22;
    for (int step = 0; step < 60; ++step) {
      SCOPED_TRACE("step " + std::to_string(step));
      const int n = static_cast<int>(history.size());
      int drafted = 0;
      int accepted = 0;
      if (uniform(0, 5) != 0) {
        const int max_tokens = uniform(1, 8);
        Tokens out(max_tokens);
        drafted = drafter.Draft({.history = history, .max_tokens = max_tokens, .probs = {}}, out);
        out.resize(drafted);
        const int expected_count = std::clamp(std::min(max_tokens, 6), 0, std::max(0, n_ctx - n + 1));
        ASSERT_EQ(drafted, expected_count);
        if (drafted > 0) {
          ASSERT_EQ(out, NaiveGreedy(history, drafted));
          committed = n;
        }
        accepted = uniform(0, drafted);
        history.insert(history.end(), out.begin(), out.begin() + accepted);
        if (accepted < drafted && uniform(0, 2) == 0) {
          history.push_back(out[accepted]);
        } else {
          history.push_back(uniform(3, 7999));
        }
        if (drafted > 0) committed += std::min(accepted, drafted - 1);
      } else {
        history.push_back(uniform(3, 7999));
      }
      drafter.Accept(history, drafted, accepted);
      ASSERT_EQ(drafter.context().n_committed(), committed);
      ASSERT_EQ(drafter.context().n_past(), committed);
      ASSERT_LT(committed, static_cast<int>(history.size()));
    }
    if (n_ctx == 70) {
      EXPECT_GT(static_cast<int>(history.size()), n_ctx);  // the limit was reached
    }
  }
}

TEST_F(DraftModelTest, LoadsTheDraftFromAPath) {
  DraftModelDrafter drafter(*target_, kDraft, {.n_ctx = 64, .max_block = 4});
  std::mt19937 rng(3);
  const Tokens history = RandomPrompt(rng, 10);
  drafter.Begin(history);
  Tokens out(4);
  ASSERT_EQ(drafter.Draft({.history = history, .max_tokens = 4, .probs = {}}, out), 4);
  EXPECT_EQ(out, NaiveGreedy(history, 4));
}

TEST_F(DraftModelTest, RejectsBadOptions) {
  EXPECT_THROW(DraftModelDrafter(*target_, *draft_, {.max_block = 0}), Error);
  EXPECT_THROW(DraftModelDrafter(*target_, *draft_, {.p_min = 1.5f}), Error);
  EXPECT_THROW(DraftModelDrafter(*target_, *draft_, {.n_ctx = 0}), Error);
}

// p_min = 1 stops every block before its first token (no softmax of 8000
// random logits puts all mass on one token).
TEST_F(DraftModelTest, PMinStopsDrafting) {
  DraftModelDrafter drafter(*target_, *draft_, {.n_ctx = 64, .max_block = 4, .p_min = 1.0f});
  std::mt19937 rng(5);
  Tokens history = RandomPrompt(rng, 10);
  drafter.Begin(history);
  Tokens out(4);
  EXPECT_EQ(drafter.Draft({.history = history, .max_tokens = 4, .probs = {}}, out), 0);
  history.push_back(42);
  drafter.Accept(history, 0, 0);
  EXPECT_EQ(drafter.context().n_committed(), 10);
}

// Sampled mode: each probs row is the sampler's distribution of the draft
// model's logits at that point (so a valid distribution), and the proposal
// was drawn from it.
TEST_F(DraftModelTest, SampledProposalsComeWithTheirDistributions) {
  const SamplingParams params{.temperature = 0.8f, .top_k = 40, .top_p = 0.95f, .min_p = 0.05f, .seed = 9};
  constexpr int kBlock = 5;
  const int n_vocab = draft_->hparams().n_vocab;
  DraftModelDrafter drafter(*target_, *draft_, {.n_ctx = 256, .max_block = kBlock, .sampling = params});
  EXPECT_TRUE(drafter.samples());
  Sampler reference_sampler(params, n_vocab);
  std::vector<float> expected(n_vocab);

  std::mt19937 rng(17);
  Tokens history = RandomPrompt(rng, 12);
  drafter.Begin(history);
  std::vector<float> probs(size_t(kBlock) * n_vocab);  // [kBlock, n_vocab]
  for (int step = 0; step < 12; ++step) {
    Tokens out(kBlock);
    const int drafted = drafter.Draft({.history = history, .max_tokens = kBlock, .probs = probs}, out);
    ASSERT_EQ(drafted, kBlock);
    Context& ctx = Reference();
    ctx.Clear();
    ctx.Forward(history, false);
    for (int i = 0; i < drafted; ++i) {
      const std::span<const float> row(probs.data() + size_t(i) * n_vocab, n_vocab);
      double sum = 0;
      for (float p : row) {
        ASSERT_GE(p, 0.0f);
        sum += p;
      }
      EXPECT_NEAR(sum, 1.0, 1e-5);
      EXPECT_GT(row[out[i]], 0.0f) << "row " << i;
      reference_sampler.Distribution(ctx.logits(0), {}, expected);
      EXPECT_TRUE(std::equal(row.begin(), row.end(), expected.begin())) << "row " << i;
      ctx.Forward(std::span(&out[i], 1), false);
    }
    const int accepted = std::uniform_int_distribution<int>(0, drafted)(rng);
    history.insert(history.end(), out.begin(), out.begin() + accepted);
    history.push_back(std::uniform_int_distribution<TokenId>(3, 7999)(rng));
    drafter.Accept(history, drafted, accepted);
  }

  // Greedy verification gives no probs rows: the drafter then drafts greedily.
  Tokens out(kBlock);
  ASSERT_EQ(drafter.Draft({.history = history, .max_tokens = kBlock, .probs = {}}, out), kBlock);
  EXPECT_EQ(out, NaiveGreedy(history, kBlock));
}

// ---------------------------------------------------------------- vocabularies

// A copy of a GGUF file's metadata in which `edit` may replace a key's value.
std::vector<uint8_t> CopyMetadata(const std::string& path, const MetadataEdit& edit) {
  const std::unique_ptr<GgufFile> src = GgufFile::Open(path);
  GgufWriter w;
  CopyMetadata(*src, w, edit);
  return w.Serialize();
}

// The message CheckVocabCompatible throws, or "" if it passes.
std::string VocabMismatch(const Tokenizer& target, const Tokenizer& draft) {
  try {
    CheckVocabCompatible(target, draft, "draft.gguf");
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

class VocabTest : public ::testing::Test {
 protected:
  void SetUp() override { base_ = Load(kVocab8000); }

  static std::unique_ptr<Tokenizer> Load(const std::string& path) {
    return Tokenizer::FromGguf(*GgufFile::Open(path));
  }
  // The 8000-token vocabulary with one edit, parsed from memory.
  std::unique_ptr<Tokenizer> Edited(const MetadataEdit& edit) {
    bytes_ = CopyMetadata(kVocab8000, edit);
    file_ = GgufFile::FromMemory(bytes_.data(), bytes_.size(), "edited");
    return Tokenizer::FromGguf(*file_);
  }

  std::unique_ptr<Tokenizer> base_;
  std::vector<uint8_t> bytes_;
  std::unique_ptr<GgufFile> file_;
};

TEST_F(VocabTest, IdenticalVocabulariesPass) {
  const std::unique_ptr<Model> target = Model::Load(kTarget);
  const std::unique_ptr<Model> draft = Model::Load(kDraft);
  EXPECT_EQ(VocabMismatch(target->tokenizer(), draft->tokenizer()), "");
  EXPECT_EQ(VocabMismatch(*base_, target->tokenizer()), "");
}

TEST_F(VocabTest, DifferentSizesNameBoth) {
  const std::string message = VocabMismatch(*base_, *Load(kVocab32000));
  EXPECT_NE(message.find("32000"), std::string::npos) << message;
  EXPECT_NE(message.find("8000"), std::string::npos) << message;
  EXPECT_NE(message.find("draft.gguf"), std::string::npos) << message;
}

TEST_F(VocabTest, ADifferentTokenTextNamesTheId) {
  const std::unique_ptr<Tokenizer> edited = Edited([](GgufWriter& w, const GgufKv& kv) {
    if (kv.key != "tokenizer.ggml.tokens") return false;
    std::vector<std::string> texts(kv.value.strings.begin(), kv.value.strings.end());
    texts[1234] = "\xE2\x96\x81kakeya";  // "▁kakeya"
    w.SetStringArray(kv.key, texts);
    return true;
  });
  const std::string message = VocabMismatch(*base_, *edited);
  EXPECT_NE(message.find("token 1234 "), std::string::npos) << message;
  EXPECT_NE(message.find("kakeya"), std::string::npos) << message;
  EXPECT_NE(message.find(std::string(base_->TokenText(1234).substr(3))), std::string::npos) << message;
}

TEST_F(VocabTest, DifferentSpecialIdsFail) {
  const std::unique_ptr<Tokenizer> edited = Edited([](GgufWriter& w, const GgufKv& kv) {
    if (kv.key != "tokenizer.ggml.eos_token_id") return false;
    w.SetU32(kv.key, 5);
    return true;
  });
  ASSERT_EQ(edited->eos(), 5);
  const std::string message = VocabMismatch(*base_, *edited);
  EXPECT_NE(message.find("EOS id is 5 but the target's is 2"), std::string::npos) << message;
}

// Which ids a drafter's head scores (DraftVocabSize): by default the first
// 32768 of a byte-level BPE vocabulary over twice that size (ids in merge
// order), all of any other; a request is rounded up to whole groups of 16.
TEST(DraftVocab, DefaultsToAPrefixOnlyWhereIdsComeInMergeOrder) {
  auto vocab = [](const std::string& name) {
    return Tokenizer::FromGguf(*GgufFile::Open(std::string(KAKEYA_FIXTURES) + "/tokenizer/ggml-vocab-" + name + ".gguf"));
  };
  const std::unique_ptr<Tokenizer> qwen2 = vocab("qwen2"), gemma4 = vocab("gemma-4"), gpt2 = vocab("gpt-2"),
                                   spm = vocab("llama-spm");
  EXPECT_EQ(DraftVocabSize(*qwen2, -1), kDefaultDraftVocab);  // 151,936 byte-level BPE ids
  EXPECT_EQ(DraftVocabSize(*gemma4, -1), 0);                  // BPE on UTF-8 text: ids not by frequency
  EXPECT_EQ(DraftVocabSize(*gpt2, -1), 0);                    // 50,257: under twice the prefix
  EXPECT_EQ(DraftVocabSize(*spm, -1), 0);                     // SentencePiece
  EXPECT_EQ(DraftVocabSize(*qwen2, 0), 0);
  EXPECT_EQ(DraftVocabSize(*qwen2, 100), 112);
  EXPECT_EQ(DraftVocabSize(*gemma4, 4096), 4096);
  EXPECT_EQ(DraftVocabSize(*qwen2, qwen2->n_vocab() - 1), 0);  // rounds up to all of it
  EXPECT_EQ(DraftVocabSize(*qwen2, 1 << 30), 0);
}

}  // namespace
}  // namespace kakeya
