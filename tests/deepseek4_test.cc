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
#include "lossless_runs.h"
#include "model/context.h"
#include "model/model.h"
#include "test_files.h"

namespace kakeya {
namespace {

std::string Fixture(const char* name) { return fixture::ModelPath(name, "models3"); }

// The drafters a user picks: prompt lookup, the file's MTP block, the
// fixtures' draft model and DSpark drafter, and auto.
std::vector<DrafterUnderTest> Drafters() {
  const DrafterSources with_draft{.draft = fixture::ModelPath("tiny-draft-f32")};
  const DrafterSources with_dspark{.draft = Fixture("ds4-dspark-f32")};
  return {{"ngram", {}}, {"mtp", {}, true}, {"draft", with_draft}, {"dspark", with_dspark, true},
          {"auto", with_draft}, {"auto", with_dspark}};
}

TEST(Deepseek4, SpeculativeEqualsPlain) {
  CheckSpeculativeEqualsPlain(Fixture("ds4-f32"), 300, {{0.0f, 2, 8}}, Drafters());
}

TEST(Deepseek4Slow, SpeculativeEqualsPlainGreedyAndSeeded) {
  CheckSpeculativeEqualsPlain(Fixture("ds4-f32"), 1500, {{0.0f, 2, 2}, {0.0f, 1, 16}, {0.8f, 2, 4}, {0.8f, 1, 8}},
                              Drafters());
  CheckSpeculativeEqualsPlain(Fixture("ds4-q8_0"), 1500, {{0.0f, 2, 4}}, Drafters());
}

// The same 400 rows in one forward, and in random pieces of which random
// tails are rolled back and run again: the same bits.
TEST(Deepseek4, RowsAreBitIdenticalHoweverCutAndRolledBack) {
  const std::unique_ptr<Model> model = Model::Load(Fixture("ds4-f32"));
  Context whole(*model, ContextOptions{.n_ctx = 400, .max_batch = 400, .n_threads = 2});
  CheckRowsAreBitIdenticalHoweverCut(*model, 400, 3, whole);
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
