// docs/design.md, invariant 1: a row's logits are bit-identical however its tokens
// were split into Forward() calls and whatever the thread count. Lossless
// speculative decoding rests on it: the verifier's batched rows must equal what
// plain one-token decoding would have computed, to the last bit. Checked on
// every SIMD target this CPU supports (targets may differ from each other, but
// each must be invariant on its own).

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "fixture_util.h"
#include "kernels/cpu/matmul.h"
#include "model/context.h"
#include "model/model.h"
#include "model/workspace.h"

namespace kakeya {
namespace {

constexpr int kSeqLen = 37;

using Rows = std::vector<std::vector<float>>;  // [position][n_vocab]; empty = not computed

// Runs `tokens` on `ctx` in consecutive calls of the given sizes and returns
// the logits of every position that got them (every row when all_logits, else
// the last row of each call).
Rows RunChunks(Context& ctx, const std::vector<TokenId>& tokens, const std::vector<int>& sizes,
               bool all_logits) {
  Rows rows(tokens.size());
  size_t begin = static_cast<size_t>(ctx.n_past());
  for (int size : sizes) {
    ctx.Forward({tokens.data() + begin, static_cast<size_t>(size)}, all_logits);
    for (int r = 0; r < ctx.n_logit_rows(); ++r) {
      const std::span<const float> row = ctx.logits(r);
      rows[begin + size - ctx.n_logit_rows() + r].assign(row.begin(), row.end());
    }
    begin += size;
  }
  EXPECT_EQ(begin, tokens.size());
  return rows;
}

std::vector<int> RandomSizes(std::mt19937& rng, int total) {
  std::vector<int> sizes;
  for (int left = total; left > 0;) {
    sizes.push_back(std::min(left, std::uniform_int_distribution<int>(1, 16)(rng)));
    left -= sizes.back();
  }
  return sizes;
}

::testing::AssertionResult SameRows(const Rows& want, const Rows& got) {
  int compared = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    if (got[i].empty()) continue;
    ++compared;
    if (std::memcmp(got[i].data(), want[i].data(), want[i].size() * sizeof(float)) != 0) {
      double max_diff = 0;
      for (size_t j = 0; j < got[i].size(); ++j) {
        max_diff = std::max(max_diff, std::abs(double(got[i][j]) - want[i][j]));
      }
      return ::testing::AssertionFailure()
             << "row " << i << " differs from the single-batch, 1-thread row (max |diff| "
             << max_diff << ")";
    }
  }
  if (compared == 0) return ::testing::AssertionFailure() << "no row to compare";
  return ::testing::AssertionSuccess();
}

// A fixture model, "folder/name" under tests/fixtures (fixture_util.h).
class BatchInvarianceTest : public ::testing::TestWithParam<const char*> {};

// Checks every way of running one sequence against the single-batch,
// 1-thread rows, on the current SIMD target.
void CheckInvariance(const Model& model, std::mt19937& rng) {
  std::uniform_int_distribution<TokenId> any_token(3, model.hparams().n_vocab - 1);
  std::vector<TokenId> tokens = {1};  // BOS
  while (tokens.size() < kSeqLen) tokens.push_back(any_token(rng));

  auto make_ctx = [&](int n_threads) {
    return std::make_unique<Context>(
        model, ContextOptions{.n_ctx = 256, .max_batch = 64, .n_threads = n_threads});
  };
  const Rows want = RunChunks(*make_ctx(1), tokens, {kSeqLen}, true);

  for (int n_threads : {1, 2, 3}) {
    SCOPED_TRACE("n_threads " + std::to_string(n_threads));
    EXPECT_TRUE(SameRows(want, RunChunks(*make_ctx(n_threads), tokens, {kSeqLen}, true)))
        << "one batch";
    EXPECT_TRUE(SameRows(
        want, RunChunks(*make_ctx(n_threads), tokens, std::vector<int>(kSeqLen, 1), false)))
        << "one token at a time";
    EXPECT_TRUE(
        SameRows(want, RunChunks(*make_ctx(n_threads), tokens, RandomSizes(rng, kSeqLen), true)))
        << "random chunks";
    EXPECT_TRUE(
        SameRows(want, RunChunks(*make_ctx(n_threads), tokens, RandomSizes(rng, kSeqLen), false)))
        << "random chunks, last row only";
    // Rows without logits skip the last layer's feed-forward: the last rows,
    // and every later chunk's (which read the skipped rows' keys and values
    // in the cache), keep their bits.
    Context cache_only(model, ContextOptions{.n_ctx = 256, .max_batch = 64, .n_threads = n_threads,
                                             .unread_rows_fill_cache_only = true});
    EXPECT_TRUE(SameRows(want, RunChunks(cache_only, tokens, RandomSizes(rng, kSeqLen), false)))
        << "random chunks, last row only, the others filling the cache only";

    // A rejected draft: rows computed after a rollback must not remember the
    // rolled-back tokens (their keys and values stay in the cache memory).
    const std::unique_ptr<Context> ctx = make_ctx(n_threads);
    constexpr int kKept = 20;
    RunChunks(*ctx, tokens, {kKept, kSeqLen - kKept}, true);
    ctx->Trim(ctx->n_past() - kKept);
    std::vector<TokenId> draft(kSeqLen - kKept);
    for (TokenId& t : draft) t = any_token(rng);
    ctx->Forward(draft, true);
    ctx->Trim(ctx->n_past() - kKept);
    Rows after = RunChunks(*ctx, tokens, RandomSizes(rng, kSeqLen - kKept), true);
    EXPECT_TRUE(SameRows(want, after)) << "after rollback";
  }
}

// Several sequences in one forward (RunForward, ADR 0009): each sequence's
// rows equal its own single-sequence rows whatever runs beside it, in chunks
// of any size, including beside a sequence that rolls back a rejected draft.
void CheckSequencesShareForwards(const Model& model, std::mt19937& rng) {
  constexpr int kSequences = 4;
  std::uniform_int_distribution<TokenId> any_token(3, model.hparams().n_vocab - 1);
  std::vector<std::vector<TokenId>> tokens(kSequences);
  std::vector<Rows> want;
  for (int s = 0; s < kSequences; ++s) {
    tokens[s] = {1};
    while (static_cast<int>(tokens[s].size()) < kSeqLen - 5 * s) tokens[s].push_back(any_token(rng));
    Context alone(model, ContextOptions{.n_ctx = 256, .max_batch = 64, .n_threads = 1});
    want.push_back(RunChunks(alone, tokens[s], {static_cast<int>(tokens[s].size())}, true));
  }
  for (int n_threads : {1, 3}) {
    SCOPED_TRACE("n_threads " + std::to_string(n_threads));
    Workspace ws(model, WorkspaceOptions{.max_rows = 64, .max_logit_rows = 64, .n_ctx = 256, .n_threads = n_threads});
    std::vector<std::unique_ptr<Context>> seqs;
    for (int s = 0; s < kSequences; ++s) {
      seqs.push_back(std::make_unique<Context>(
          model, ContextOptions{.n_ctx = 256, .max_batch = 16, .max_logit_rows = 16, .workspace = &ws}));
    }
    std::vector<Rows> got(kSequences);
    for (int s = 0; s < kSequences; ++s) got[s].resize(tokens[s].size());
    std::vector<TokenId> draft(5);
    for (int step = 0;; ++step) {
      std::vector<SequenceRows> batch;
      for (int s = 0; s < kSequences; ++s) {
        const int done = seqs[s]->n_past();
        const int left = static_cast<int>(tokens[s].size()) - done;
        if (left == 0 || rng() % 4 == 0) continue;  // finished, or sits this step out
        if (s == 0 && step == 2) {  // a draft that will be rejected
          for (TokenId& t : draft) t = any_token(rng);
          batch.push_back({seqs[s].get(), draft, true});
          continue;
        }
        const int n = std::uniform_int_distribution<int>(1, std::min(left, 16))(rng);
        batch.push_back({seqs[s].get(), {tokens[s].data() + done, size_t(n)}, rng() % 2 == 0});
      }
      const bool finished = std::all_of(seqs.begin(), seqs.end(), [&](const auto& c) {
        return c->n_past() == static_cast<int>(tokens[&c - seqs.data()].size());
      });
      if (finished) break;
      RunForward(ws, batch);
      for (const SequenceRows& b : batch) {
        Context& c = *b.sequence;
        if (b.tokens.data() == draft.data()) {
          c.Trim(static_cast<int>(draft.size()));
          continue;
        }
        const int s = static_cast<int>(std::find_if(seqs.begin(), seqs.end(), [&](const auto& p) { return p.get() == &c; }) -
                                       seqs.begin());
        for (int r = 0; r < c.n_logit_rows(); ++r) {
          const std::span<const float> row = c.logits(r);
          got[s][c.n_past() - c.n_logit_rows() + r].assign(row.begin(), row.end());
        }
        c.Commit();
      }
    }
    for (int s = 0; s < kSequences; ++s) EXPECT_TRUE(SameRows(want[s], got[s])) << "sequence " << s;
  }
}

TEST_P(BatchInvarianceTest, RowsAreBitIdentical) {
  const std::string param = GetParam();
  const size_t slash = param.find('/');
  const std::unique_ptr<Model> model =
      Model::Load(fixture::ModelPath(param.substr(slash + 1), param.substr(0, slash)));
  const std::string initial_target = ActiveCpuTarget();
  std::mt19937 rng(37);
  for (const std::string& target : SupportedCpuTargets()) {
    SCOPED_TRACE("CPU target " + target);
    ForceCpuTarget(target);
    CheckInvariance(*model, rng);
    CheckSequencesShareForwards(*model, rng);
  }
  ForceCpuTarget(initial_target);
}

// The skip is real: rows without logits read no experts in the last layer.
TEST(UnreadRowsFillCacheOnly, TheLastLayerRunsNoExpertsForThem) {
  const std::unique_ptr<Model> model = Model::Load(fixture::ModelPath("q3moe-q8_0", "models2"));
  std::vector<TokenId> tokens = {1};
  for (TokenId t = 3; tokens.size() < 16; t += 7) tokens.push_back(t % model->hparams().n_vocab);
  int touched[2];
  std::vector<float> last[2];
  for (bool cache_only : {false, true}) {
    Context ctx(*model, ContextOptions{.n_ctx = 64, .max_batch = 16, .n_threads = 2,
                                       .unread_rows_fill_cache_only = cache_only});
    ctx.Forward(tokens, false);
    touched[cache_only] = ctx.experts_touched();
    last[cache_only].assign(ctx.logits(0).begin(), ctx.logits(0).end());
  }
  EXPECT_LT(touched[true], touched[false]);
  EXPECT_EQ(last[false], last[true]);
}

INSTANTIATE_TEST_SUITE_P(Fixtures, BatchInvarianceTest,
                         ::testing::Values("models/tiny-llama-f32", "models/tiny-llama-f16",
                                           "models/tiny-llama-bf16", "models/tiny-llama-q8_0",
                                           "models/tiny-llama-q4_k_m", "models/tiny-llama-q4_0",
                                           "models/tiny-llama-q6_k", "models/tiny-qwen3-f32",
                                           // 37 tokens cross the 32-token sliding window.
                                           "models/tiny-gemma2-f32", "models/tiny-gemma3-f32",
                                           // Mixtures: a row's experts and their sums must not
                                           // depend on which other rows share them.
                                           "models2/g4moe-f32", "models2/g4moe-q8_0", "models2/g4dense-f32",
                                           "models2/q3moe-f16", "models2/q3moe-q8_0",
                                           "models2/glm4moe-mtp-f32",
                                           // deepseek4: 37 tokens make 9 blocks of 4, one more
                                           // than the indexer's top-k; the window of 32 wraps.
                                           "models3/ds4-f32", "models3/ds4-q8_0",
                                           // qwen35: each sequence's recurrent state, rows of
                                           // other sequences and forwards beside it.
                                           "models4/qwen35-f32", "models4/qwen35moe-q8_0"),
                         [](const ::testing::TestParamInfo<const char*>& info) {
                           return fixture::ModelParamName(info.param);
                         });

}  // namespace
}  // namespace kakeya
