// The promises hold with every cache type (-ctk / -ctv, ADR 0013):
// speculative output is byte-identical to plain decoding with the same cache
// types, greedy and seeded, at every block size, through ring wraps and far
// past where the codec starts coding, at 1 and 2 threads; and a row's logits
// are bit-identical however its sequence was cut into forwards (rows of one
// forward that read different codec splits included), also after a rollback.
// Models: tiny-qwen3 (full attention only: every layer coded), tiny-gemma3
// (rings of 32 and one global layer) and g4moe (Gemma 4: shared-KV layers read
// a coded layer's cache).
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "fixture_util.h"
#include "model/context.h"
#include "plain_decoding.h"
#include "replay_drafter.h"
#include "speculative/draft_model_drafter.h"
#include "speculative/ngram_drafter.h"
#include "speculative/speculative.h"

namespace kakeya {
namespace {

struct CacheTypes {
  KvType k, v;
};
std::string Name(const CacheTypes& t) { return std::string(KvTypeName(t.k)) + "/" + std::string(KvTypeName(t.v)); }

const std::vector<CacheTypes> kTypes = {{KvType::kF16, KvType::kF16},         {KvType::kBF16, KvType::kBF16},
                                        {KvType::kQ8_0, KvType::kQ8_0},       {KvType::kQ4_0, KvType::kQ4_0},
                                        {KvType::kKakeya4, KvType::kKakeya3}, {KvType::kQ8_0, KvType::kF16}};

ContextOptions Options(const CacheTypes& t, int n_ctx, int threads) {
  return ContextOptions{.n_ctx = n_ctx, .max_batch = 64, .n_threads = threads, .max_logit_rows = 16,
                        .cache_type_k = t.k, .cache_type_v = t.v};
}

// 420 greedy (or seeded) tokens after a 40-token prompt: positions past 450,
// coded from 288 on; rings of 32 wrap a dozen times.
void CheckSpeculativeEqualsPlain(const std::string& model_path, const CacheTypes& t, float temperature,
                                 const std::vector<int>& threads) {
  SCOPED_TRACE(model_path + " " + Name(t) + " temperature " + std::to_string(temperature));
  const std::unique_ptr<Model> model = Model::Load(model_path);
  const std::unique_ptr<Model> draft = Model::Load(fixture::ModelPath("tiny-draft-f32"));  // the same vocabulary
  std::vector<TokenId> prompt = model->tokenizer().Encode("The quick brown fox jumps over the lazy dog.", true, true);
  while (prompt.size() < 40) prompt.push_back(prompt[prompt.size() % 8 + 1]);
  GenerateOptions o;
  o.n_predict = 420;
  o.ignore_eos = true;
  o.sampling.temperature = temperature;
  o.sampling.seed = 7;
  const int n_ctx = static_cast<int>(prompt.size()) + o.n_predict + 16;
  std::vector<TokenId> plain;
  {
    Context ctx(*model, Options(t, n_ctx, 2));
    plain = DecodePlainly(ctx, prompt, o, nullptr).tokens;
  }
  std::vector<TokenId> full = prompt;
  full.insert(full.end(), plain.begin(), plain.end());
  for (int n_threads : threads) {
    for (int block : {0, 3, 8, 16}) {
      SCOPED_TRACE("threads " + std::to_string(n_threads) + " block " + std::to_string(block));
      Context ctx(*model, Options(t, n_ctx, n_threads));
      ReplayDrafter replay(full);
      SpecStats stats;
      EXPECT_EQ(Generate(ctx, &replay, prompt, o, SpecOptions{.block = block}, nullptr, &stats).tokens, plain);
      EXPECT_GT(stats.accepted, 100) << "long accepted blocks";
      if (block == 8) {
        NgramDrafter ngram(NgramOptions{.n_ctx = n_ctx});
        EXPECT_EQ(Generate(ctx, &ngram, prompt, o, SpecOptions{.block = block}, nullptr, nullptr).tokens, plain);
        DraftModelDrafter drafter(*model, *draft, {.n_ctx = n_ctx, .max_block = 8, .sampling = o.sampling});
        EXPECT_EQ(Generate(ctx, &drafter, prompt, o, SpecOptions{.block = block}, nullptr, nullptr).tokens, plain);
      }
    }
  }
}

TEST(CacheTypesSlow, SpeculativeEqualsPlainOnEveryTypeGreedy) {
  for (const CacheTypes& t : kTypes) {
    CheckSpeculativeEqualsPlain(fixture::ModelPath("tiny-qwen3-f32"), t, 0.0f, {2});
    CheckSpeculativeEqualsPlain(fixture::ModelPath("tiny-gemma3-f32"), t, 0.0f, {2});
  }
}

TEST(CacheTypesSlow, SpeculativeEqualsPlainSeededAndOneThread) {
  for (const CacheTypes& t : {kTypes[3], kTypes[4]}) {
    CheckSpeculativeEqualsPlain(fixture::ModelPath("tiny-qwen3-f32"), t, 0.8f, {1, 2});
  }
}

TEST(CacheTypesSlow, GemmaFourSharedKvLayersReadACodedCache) {
  CheckSpeculativeEqualsPlain(fixture::ModelPath("g4moe-f32", "models2"), kTypes[4], 0.0f, {2});
  CheckSpeculativeEqualsPlain(fixture::ModelPath("g4moe-f32", "models2"), kTypes[2], 0.0f, {2});
}

using Rows = std::vector<std::vector<float>>;

// The last row's logits of every forward of `tokens` cut in `sizes` (every
// row's when all_logits).
Rows RunChunks(Context& ctx, const std::vector<TokenId>& tokens, const std::vector<int>& sizes, bool all_logits) {
  Rows rows(tokens.size());
  size_t begin = static_cast<size_t>(ctx.n_past());
  for (int size : sizes) {
    ctx.Forward({tokens.data() + begin, static_cast<size_t>(size)}, all_logits);
    ctx.Commit();
    for (int r = 0; r < ctx.n_logit_rows(); ++r) {
      const std::span<const float> row = ctx.logits(r);
      rows[begin + size - ctx.n_logit_rows() + r].assign(row.begin(), row.end());
    }
    begin += size;
  }
  return rows;
}

void ExpectSameRows(const Rows& want, const Rows& got) {
  int compared = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    if (got[i].empty()) continue;
    ++compared;
    ASSERT_EQ(0, std::memcmp(got[i].data(), want[i].data(), want[i].size() * sizeof(float))) << "row " << i;
  }
  EXPECT_GT(compared, 0);
}

TEST(CacheTypes, RowsAreBitIdenticalHoweverTheSequenceIsCut) {
  const std::unique_ptr<Model> model = Model::Load(fixture::ModelPath("tiny-qwen3-f32"));
  std::mt19937 rng(4);
  std::uniform_int_distribution<TokenId> any_token(3, model->hparams().n_vocab - 1);
  std::vector<TokenId> tokens = {1};
  while (tokens.size() < 360) tokens.push_back(any_token(rng));
  for (const CacheTypes& t : kTypes) {
    SCOPED_TRACE(Name(t));
    const int n = static_cast<int>(tokens.size());
    Context one_by_one(*model, Options(t, n, 1));
    const Rows want = RunChunks(one_by_one, tokens, std::vector<int>(n, 1), false);
    std::vector<int> sizes;
    for (int left = n; left > 0; left -= sizes.back()) sizes.push_back(std::min(left, 1 + static_cast<int>(rng() % 16)));
    Context chunked(*model, Options(t, n, 2));
    ExpectSameRows(want, RunChunks(chunked, tokens, sizes, true));
    // A rejected block past the codec's first coded positions: the rows after
    // the rollback do not remember it.
    Context rolled(*model, Options(t, n, 2));
    RunChunks(rolled, std::vector<TokenId>(tokens.begin(), tokens.begin() + 300), {64, 64, 64, 64, 44}, false);
    std::vector<TokenId> rejected(16);
    for (TokenId& x : rejected) x = any_token(rng);
    rolled.Forward(rejected, true);
    rolled.Trim(16);
    Rows rest = RunChunks(rolled, tokens, {16, 16, 16, 12}, true);
    ExpectSameRows(want, rest);
  }
}

TEST(CacheTypes, UnfitTypesAreRefusedNamingTheFlag) {
  const std::unique_ptr<Model> llama = Model::Load(fixture::ModelPath("tiny-llama-f32"));  // heads of 16
  for (KvType t : {KvType::kQ8_0, KvType::kQ4_0, KvType::kKakeya4}) {
    try {
      Context ctx(*llama, ContextOptions{.n_ctx = 64, .max_batch = 16, .cache_type_k = t,
                                         .cache_type_v = IsCodec(t) ? KvType::kKakeya3 : t});
      ADD_FAILURE() << KvTypeName(t) << " was accepted for heads of 16";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("-ctk"), std::string::npos) << e.what();
    }
  }
  EXPECT_THROW(Context(*llama, ContextOptions{.n_ctx = 64, .cache_type_k = KvType::kKakeya4}), Error);
}

}  // namespace
}  // namespace kakeya
