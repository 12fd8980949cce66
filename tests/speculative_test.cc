// Lossless speculative decoding (DESIGN.md invariants 1-3): with greedy
// sampling the speculative loop must produce exactly the token ids of plain
// decoding, whatever the drafter proposes, the block size, the thread count,
// and however often sliding-window rings wrap; with temperature > 0 its tokens
// must follow the target's distribution (verifier_test.cc checks that part).
#include "spec/speculative.h"

#include <algorithm>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "base/error.h"
#include "model/context.h"

namespace kakeya {
namespace {

std::string ModelPath(const std::string& name) { return std::string(KAKEYA_FIXTURES) + "/models/" + name + ".gguf"; }

// Proposes random tokens: almost every draft is rejected.
class RandomDrafter : public Drafter {
 public:
  RandomDrafter(int n_vocab, uint64_t seed) : rng_(seed), any_(0, n_vocab - 1) {}
  std::string name() const override { return "random"; }
  void Begin(std::span<const TokenId>) override {}
  int Draft(const DraftRequest& r, std::span<TokenId> out) override {
    for (int i = 0; i < r.max_tokens; ++i) out[i] = any_(rng_);
    return r.max_tokens;
  }
  void Accept(std::span<const TokenId>, int, int) override {}

 private:
  std::mt19937 rng_;
  std::uniform_int_distribution<TokenId> any_;
};

// Replays the target's own plain output, so every draft is accepted — except
// that every `spoil_every`-th proposal is replaced by a wrong token, to mix
// full and partial acceptance.
class ReplayDrafter : public Drafter {
 public:
  ReplayDrafter(std::vector<TokenId> full, int spoil_every) : full_(std::move(full)), spoil_every_(spoil_every) {}
  std::string name() const override { return "replay"; }
  void Begin(std::span<const TokenId>) override {}
  int Draft(const DraftRequest& r, std::span<TokenId> out) override {
    int n = 0;
    for (size_t pos = r.history.size(); n < r.max_tokens && pos < full_.size(); ++n, ++pos) {
      out[n] = full_[pos];
      if (spoil_every_ > 0 && ++proposals_ % spoil_every_ == 0) out[n] = (out[n] + 1) % 7 + 3;
    }
    return n;
  }
  void Accept(std::span<const TokenId> history, int, int) override {
    for (size_t i = 0; i < history.size() && i < full_.size(); ++i) EXPECT_EQ(history[i], full_[i]);
  }

 private:
  std::vector<TokenId> full_;  // prompt + plain greedy continuation
  int spoil_every_;
  int proposals_ = 0;
};

struct Case {
  std::string model;
  int n_tokens;
};

std::vector<TokenId> PlainGreedy(const Model& model, const std::vector<TokenId>& prompt, int n, int threads) {
  Context ctx(model, ContextOptions{.n_ctx = static_cast<int>(prompt.size()) + n + 1, .max_batch = 16, .n_threads = threads});
  GenerateOptions o;
  o.n_predict = n;
  o.ignore_eos = true;
  o.sampling.temperature = 0;
  return Generate(ctx, prompt, o, nullptr).tokens;
}

std::vector<TokenId> SpeculativeGreedy(const Model& model, const std::vector<TokenId>& prompt, int n, int threads,
                                       Drafter& drafter, int block, SpecStats* stats) {
  Context ctx(model, ContextOptions{.n_ctx = static_cast<int>(prompt.size()) + n + 1, .max_batch = 16, .n_threads = threads});
  GenerateOptions o;
  o.n_predict = n;
  o.ignore_eos = true;
  o.sampling.temperature = 0;
  SpecOptions s;
  s.block = block;
  return GenerateSpeculative(ctx, drafter, prompt, o, s, nullptr, stats).tokens;
}

void CheckModel(const std::string& name, int n_tokens, const std::vector<int>& blocks, int threads) {
  const std::unique_ptr<Model> model = Model::Load(ModelPath(name));
  const std::vector<TokenId> prompt = model->tokenizer().Encode("Once upon a time, in a land far away,", true, true);
  const std::vector<TokenId> plain = PlainGreedy(*model, prompt, n_tokens, 1);
  ASSERT_EQ(static_cast<int>(plain.size()), n_tokens);
  std::vector<TokenId> full = prompt;
  full.insert(full.end(), plain.begin(), plain.end());

  const int t = threads;
  {
    for (int block : blocks) {
      SCOPED_TRACE(name + " threads " + std::to_string(t) + " block " + (block == 0 ? "adaptive" : std::to_string(block)));
      RandomDrafter random(model->hparams().n_vocab, 1000 + block);
      SpecStats rs;
      EXPECT_EQ(SpeculativeGreedy(*model, prompt, n_tokens, t, random, block, &rs), plain) << "random drafter";

      ReplayDrafter perfect(full, 0);
      SpecStats ps;
      EXPECT_EQ(SpeculativeGreedy(*model, prompt, n_tokens, t, perfect, block, &ps), plain) << "perfect drafter";
      if (block > 1) {
        // Every draft of the perfect drafter is accepted: block - 1 per step
        // (the last steps may be shorter near the end of the budget).
        EXPECT_EQ(ps.accepted, ps.drafted);
        EXPECT_GE(ps.mean_accept_len(), std::min<double>(block, 1.5));
      }

      ReplayDrafter spoiled(full, 5);
      EXPECT_EQ(SpeculativeGreedy(*model, prompt, n_tokens, t, spoiled, block, nullptr), plain) << "spoiled drafter";
    }
  }
}

// Every fixture model, a spread of block sizes, short generations.
class SpeculativeLossless : public ::testing::TestWithParam<std::string> {};

TEST_P(SpeculativeLossless, GreedyTokensEqualPlainDecoding) {
  CheckModel(GetParam(), 120, {1, 2, 3, 5, 8, 16, 0}, 1);
}

INSTANTIATE_TEST_SUITE_P(Fixtures, SpeculativeLossless,
                         ::testing::Values("tiny-llama-f32", "tiny-llama-f16", "tiny-llama-bf16", "tiny-llama-q8_0",
                                           "tiny-llama-q6_k", "tiny-llama-q4_k_m", "tiny-llama-q4_0", "tiny-qwen3-f32",
                                           "tiny-draft-f32", "tiny-gemma2-f32", "tiny-gemma3-f32"),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           std::string n = info.param;
                           for (char& c : n) c = std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
                           return n;
                         });

// Long generations across many sliding-window wraps, every block size 1..16
// and adaptive, 1 and 2 threads.
TEST(SpeculativeLosslessSlow, LongGenerationsAcrossRingWrapsAllBlockSizes) {
  std::vector<int> blocks;
  for (int b = 1; b <= 16; ++b) blocks.push_back(b);
  blocks.push_back(0);
  CheckModel("tiny-gemma3-f32", 2000, blocks, 1);
  CheckModel("tiny-gemma3-f32", 2000, {3, 16, 0}, 2);
}

TEST(Speculative, RejectsBadBlockSizes) {
  const std::unique_ptr<Model> model = Model::Load(ModelPath("tiny-draft-f32"));
  Context ctx(*model, ContextOptions{.n_ctx = 64, .max_batch = 16, .n_threads = 1});
  RandomDrafter d(model->hparams().n_vocab, 1);
  const std::vector<TokenId> prompt = {1, 450};
  GenerateOptions o;
  o.n_predict = 4;
  for (int block : {-1, 17, 1000}) {
    SpecOptions s;
    s.block = block;
    EXPECT_THROW(GenerateSpeculative(ctx, d, prompt, o, s, nullptr, nullptr), Error) << block;
  }
}

}  // namespace
}  // namespace kakeya
