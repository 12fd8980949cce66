// deepseek4 (docs/formats/deepseek4.md, ADR 0015) beyond model_parity_test's
// agreement with llama.cpp (and mtp_drafter_test's for its MTP block): the
// promises of its compressed cache, and its bad input.
//  * Lossless: speculative output is byte-identical to plain decoding with
//    every drafter (a replay of the output with spoiled proposals, prompt
//    lookup, the MTP block, a draft model, DSpark, auto), greedy and seeded, at
//    blocks up to 16, on 1 and 2 threads, over 1,500 tokens
//    (11 blocks of 128 and 378 of 4, of which the indexer picks 8; the raw
//    window of 32 wraps 47 times), with rejections at every kind of position.
//  * A row's logits are bit-identical however the sequence is cut into
//    forwards and rolled back, across block boundaries.
//  * Inconsistent files are refused naming the key or tensor.
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "fixture_util.h"
#include "gguf_copy.h"
#include "model/context.h"
#include "model/model.h"
#include "plain_decoding.h"
#include "replay_drafter.h"
#include "speculative/drafter_registry.h"
#include "speculative/speculative.h"
#include "test_files.h"

namespace kakeya {
namespace {

std::string Fixture(const char* name) { return fixture::ModelPath(name, "models3"); }

struct Run {
  float temperature;
  int threads, block;
};

void CheckSpeculativeEqualsPlain(const char* model_name, int n_predict, const std::vector<Run>& runs) {
  SCOPED_TRACE(model_name);
  const std::unique_ptr<Model> model = Model::Load(Fixture(model_name));
  const std::vector<TokenId> prompt = model->tokenizer().Encode("The quick brown fox jumps over the lazy dog.", true, true);
  const int n_ctx = static_cast<int>(prompt.size()) + n_predict + 16;
  for (const Run& run : runs) {
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
    Context ctx(*model, ContextOptions{.n_ctx = n_ctx, .max_batch = 64, .n_threads = run.threads});
    const SpecOptions spec_options{.block = run.block};
    ReplayDrafter replay(full);
    SpecStats stats;
    EXPECT_EQ(Generate(ctx, &replay, prompt, o, spec_options, nullptr, &stats).tokens, plain);
    EXPECT_GT(stats.accepted, n_predict / 4);
    // The drafters a user picks: prompt lookup, the file's MTP block, the
    // fixtures' draft model and DSpark drafter, and auto.
    const DrafterSetup setup{*model, ctx, "", o.sampling, std::max(run.block, 2)};
    const DrafterSources with_draft{.draft = fixture::ModelPath("tiny-draft-f32")};
    const DrafterSources with_dspark{.draft = Fixture("ds4-dspark-f32")};
    for (const auto& [spec, sources] : {std::pair{"ngram", DrafterSources{}}, std::pair{"mtp", DrafterSources{}},
                                        std::pair{"draft", with_draft}, std::pair{"dspark", with_dspark},
                                        std::pair{"auto", with_draft}, std::pair{"auto", with_dspark}}) {
      SCOPED_TRACE(spec);
      const std::unique_ptr<Drafter> drafter = MakeDrafter(spec, sources, setup);
      SpecStats drafter_stats;
      EXPECT_EQ(Generate(ctx, drafter.get(), prompt, o, spec_options, nullptr, &drafter_stats).tokens, plain);
      // The drafters that read the target draft at every step (and are rejected).
      if (spec == std::string("mtp") || spec == std::string("dspark")) {
        EXPECT_GT(drafter_stats.drafted, n_predict / 2);
      }
    }
  }
}

TEST(Deepseek4, SpeculativeEqualsPlain) { CheckSpeculativeEqualsPlain("ds4-f32", 300, {{0.0f, 2, 8}}); }

TEST(Deepseek4Slow, SpeculativeEqualsPlainGreedyAndSeeded) {
  CheckSpeculativeEqualsPlain("ds4-f32", 1500, {{0.0f, 2, 2}, {0.0f, 1, 16}, {0.8f, 2, 4}, {0.8f, 1, 8}});
  CheckSpeculativeEqualsPlain("ds4-q8_0", 1500, {{0.0f, 2, 4}});
}

// The same 400 rows in one forward, and in random pieces of which random
// tails are rolled back and run again: the same bits.
TEST(Deepseek4, RowsAreBitIdenticalHoweverCutAndRolledBack) {
  const std::unique_ptr<Model> model = Model::Load(Fixture("ds4-f32"));
  constexpr int kRows = 400;
  std::mt19937 rng(3);
  std::vector<TokenId> tokens(kRows);
  for (TokenId& t : tokens) t = std::uniform_int_distribution<TokenId>(3, model->hparams().n_vocab - 1)(rng);
  const ContextOptions options{.n_ctx = kRows, .max_batch = kRows, .n_threads = 2};
  Context whole(*model, options);
  whole.Forward(tokens, /*all_logits=*/true);
  Context pieces(*model, options);
  while (pieces.n_past() < kRows) {
    const int begin = pieces.n_past();
    const int n = std::min(kRows - begin, std::uniform_int_distribution<int>(1, 40)(rng));
    pieces.Forward({tokens.data() + begin, size_t(n)}, true);
    const int dropped = std::uniform_int_distribution<int>(0, n - 1)(rng);
    if (dropped > 0) {  // roll back and run the dropped rows again
      pieces.Trim(dropped);
      pieces.Forward({tokens.data() + begin + n - dropped, size_t(dropped)}, true);
    }
    for (int r = 0; r < pieces.n_logit_rows(); ++r) {
      const int pos = pieces.n_past() - pieces.n_logit_rows() + r;
      ASSERT_EQ(std::memcmp(pieces.logits(r).data(), whole.logits(pos).data(), pieces.logits(r).size_bytes()), 0)
          << "position " << pos;
    }
    pieces.Commit();
  }
}

class Deepseek4BadInput : public ::testing::Test {
 protected:
  std::string Edited(const MetadataEdit& metadata, const TensorEdit& tensors = nullptr) {
    const std::string path = dir_.File("ds4-edited.gguf");
    WriteEditedCopy(Fixture("ds4-f32"), path, metadata, tensors);
    return path;
  }
  TempDir dir_{"deepseek4_test"};
};

TEST_F(Deepseek4BadInput, HyperConnectionsOtherThanFourAreRefused) {
  ExpectLoadError(Edited(SetU32("deepseek4.hyper_connection.count", 3)),
                  "deepseek4.hyper_connection.count = 3: deepseek4 files have 4 streams");
}

TEST_F(Deepseek4BadInput, CompressionRatiosOutsideTheThreeAreRefused) {
  ExpectLoadError(Edited([](GgufWriter& w, const GgufKv& kv) {
                    if (kv.key != "deepseek4.attention.compress_ratios") return false;
                    w.SetI32Array(kv.key, {0, 4, 128, 8, 128, 0, 0});
                    return true;
                  }),
                  "deepseek4.attention.compress_ratios[3] = 8 is not a compression ratio (0, 4 or 128)");
  ExpectLoadError(Edited([](GgufWriter& w, const GgufKv& kv) {
                    if (kv.key != "deepseek4.attention.compress_ratios") return false;
                    w.SetI32Array(kv.key, {0, 4, 128});
                    return true;
                  }),
                  "deepseek4.attention.compress_ratios has 3 entries; block_count is 7");
}

TEST_F(Deepseek4BadInput, AnIndexerTopKOfZeroIsRefused) {
  ExpectLoadError(Edited(SetU32("deepseek4.attention.indexer.top_k", 0)),
                  "deepseek4.attention.indexer.top_k = 0 must be at least 1");
}

TEST_F(Deepseek4BadInput, HashRoutesToMissingExpertsAreRefused) {
  auto table = std::make_shared<std::vector<int32_t>>();
  ExpectLoadError(Edited(nullptr,
                         [table](GgufWriter& w, const GgufTensor& t) {
                           if (t.name != "blk.1.ffn_gate_tid2eid.weight") return false;
                           table->assign(reinterpret_cast<const int32_t*>(t.data),
                                         reinterpret_cast<const int32_t*>(t.data) + t.elements());
                           (*table)[2 * 500 + 1] = 8;  // token 500's second expert, of 8
                           w.AddTensor(t.name, t.type, {t.ne[0], t.ne[1]}, table->data(), t.nbytes);
                           return true;
                         }),
                  "tensor 'blk.1.ffn_gate_tid2eid.weight': token 500 routes to expert 8, out of range (expert_count 8)");
}

TEST_F(Deepseek4BadInput, QuantizedCacheTypesAreRefusedNamingTheFlags) {
  const std::unique_ptr<Model> model = Model::Load(Fixture("ds4-f32"));
  try {
    Context ctx(*model, ContextOptions{.n_ctx = 64, .cache_type_k = KvType::kQ8_0, .cache_type_v = KvType::kQ8_0});
    ADD_FAILURE() << "a q8_0 cache was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("-ctk q8_0 -ctv q8_0: deepseek4's compressed attention keeps F32 keys"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace kakeya
