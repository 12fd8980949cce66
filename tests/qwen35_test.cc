// qwen35 and qwen35moe (docs/formats/qwen35.md, ADR 0017) beyond
// model_parity_test's agreement with llama.cpp: the promises of the
// recurrent state, and bad input.
//  * Lossless: speculative output is byte-identical to plain decoding with
//    every drafter that serves these targets (a replay of the output with
//    spoiled proposals, prompt lookup, the file's MTP block, a draft model,
//    auto), greedy and
//    seeded, at blocks up to 16, on 1 and 2 threads, over 1,500 tokens, with
//    rejections at every kind of position.
//  * After any mix of forwards and rollbacks, each row's logits and the
//    state every layer holds are bit-identical to one plain forward's.
//  * A trim past what the state can roll back fails loudly.
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

std::string Fixture(const char* name) { return fixture::ModelPath(name, "models4"); }

// Prompt lookup, the file's MTP block, the fixtures' draft model, and auto.
std::vector<DrafterUnderTest> Drafters() {
  const DrafterSources with_draft{.draft = fixture::ModelPath("tiny-draft-f32")};
  return {{"ngram", {}}, {"mtp", {}, true}, {"draft", with_draft, true}, {"auto", with_draft}};
}

TEST(Qwen35, SpeculativeEqualsPlain) {
  CheckSpeculativeEqualsPlain(Fixture("qwen35-f32"), 300, {{0.0f, 2, 8}}, Drafters());
  CheckSpeculativeEqualsPlain(Fixture("qwen35moe-q8_0"), 200, {{0.8f, 1, 4}}, Drafters());
}

TEST(Qwen35Slow, SpeculativeEqualsPlainGreedyAndSeeded) {
  CheckSpeculativeEqualsPlain(Fixture("qwen35-f32"), 1500, {{0.0f, 2, 2}, {0.0f, 1, 16}, {0.8f, 2, 4}, {0.8f, 1, 8}},
                              Drafters());
  CheckSpeculativeEqualsPlain(Fixture("qwen35moe-f32"), 1500, {{0.0f, 2, 16}, {0.8f, 2, 3}}, Drafters());
  CheckSpeculativeEqualsPlain(Fixture("qwen35-q8_0"), 1500, {{0.0f, 2, 4}}, Drafters());
}

// The state every recurrent layer holds at the end of the last forward.
std::vector<std::vector<float>> HeadStates(const Context& ctx) {
  const RecurrentState& rs = *ctx.cache().recurrent();
  std::vector<std::vector<float>> states;
  for (int il = 0; il < ctx.model().hparams().n_layer; ++il) {
    const int n = rs.shape(il).state_floats();
    if (n == 0) continue;
    states.emplace_back(rs.head_state(il), rs.head_state(il) + n);
  }
  return states;
}

// The same 300 rows in one forward, and in random pieces with rollbacks:
// every row's logits and, at the end, every layer's state are the same bits.
TEST(Qwen35, RowsAndStateAreBitIdenticalHoweverCutAndRolledBack) {
  for (const char* name : {"qwen35-f32", "qwen35moe-q8_0"}) {
    SCOPED_TRACE(name);
    const std::unique_ptr<Model> model = Model::Load(Fixture(name));
    Context whole(*model, ContextOptions{.n_ctx = 300, .max_batch = 300, .n_threads = 2});
    const std::unique_ptr<Context> pieces = CheckRowsAreBitIdenticalHoweverCut(*model, 300, 3, whole);
    EXPECT_EQ(HeadStates(*pieces), HeadStates(whole));
  }
}

// A verify block whose tail is rejected leaves the state plain decoding
// leaves, compared directly after the next token.
TEST(Qwen35, StateAfterAVerifyAndRollbackIsPlainDecodingsState) {
  const std::unique_ptr<Model> model = Model::Load(Fixture("qwen35-f32"));
  const std::vector<TokenId> tokens = model->tokenizer().Encode("Once upon a time, in a small village", true, true);
  const int n = static_cast<int>(tokens.size());
  Context plain(*model, ContextOptions{.n_ctx = 64, .max_batch = 16, .n_threads = 2});
  for (int i = 0; i < n; ++i) {
    plain.Forward({tokens.data() + i, 1}, false);
    plain.Commit();
  }
  for (int keep = 1; keep <= 5; ++keep) {
    SCOPED_TRACE("kept " + std::to_string(keep) + " of a block of 6");
    Context spec(*model, ContextOptions{.n_ctx = 64, .max_batch = 16, .n_threads = 2, .max_logit_rows = 8});
    const int prefix = n - 1 - keep;
    spec.Forward({tokens.data(), size_t(prefix)}, false);
    spec.Commit();
    std::vector<TokenId> block(tokens.begin() + prefix, tokens.begin() + prefix + keep);
    block.resize(6, 17);  // rejected proposals
    spec.Forward(block, true);
    spec.Trim(6 - keep);
    spec.Commit();
    spec.Forward({tokens.data() + n - 1, 1}, false);
    EXPECT_EQ(HeadStates(spec), HeadStates(plain));
    EXPECT_EQ(std::memcmp(spec.logits(0).data(), plain.logits(0).data(), spec.logits(0).size_bytes()), 0);
  }
}

TEST(Qwen35, ATrimPastTheStatesReachFails) {
  const std::unique_ptr<Model> model = Model::Load(Fixture("qwen35-f32"));
  Context ctx(*model, ContextOptions{.n_ctx = 64, .max_batch = 32, .n_threads = 1, .max_logit_rows = 4});
  const std::vector<TokenId> tokens(12, 100);
  ctx.Forward(tokens, false);  // 12 pending rows; the state keeps what rolling back 4 needs
  ctx.Trim(4);
  try {
    ctx.Trim(1);
    ADD_FAILURE() << "a trim past the recurrent state's reach was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("the recurrent state rolls back to position 8 at most"), std::string::npos)
        << e.what();
  }
}

class Qwen35BadInput : public ::testing::Test {
 protected:
  std::string Edited(const MetadataEdit& metadata, const TensorEdit& tensors = nullptr) {
    const std::string path = dir_.File("qwen35-edited.gguf");
    WriteEditedCopy(Fixture("qwen35-f32"), path, metadata, tensors);
    return path;
  }
  TempDir dir_{"qwen35_test"};
};

TEST_F(Qwen35BadInput, KeyAndValueHeadsOfDifferentSizesAreRefused) {
  ExpectLoadError(Edited(SetU32("qwen35.attention.value_length", 16)),
                  "qwen35.attention.key_length = 32 and qwen35.attention.value_length = 16 must be equal");
}

TEST_F(Qwen35BadInput, DeltaNetHeadsThatAreNotSquareAreRefused) {
  ExpectLoadError(Edited(SetU32("qwen35.ssm.state_size", 8)),
                  "qwen35.ssm.inner_size = 64 over qwen35.ssm.time_step_rank = 4 value heads must give heads of "
                  "qwen35.ssm.state_size = 8");
}

TEST_F(Qwen35BadInput, AConvolutionKernelOfZeroIsRefused) {
  ExpectLoadError(Edited(SetU32("qwen35.ssm.conv_kernel", 0)), "qwen35.ssm.conv_kernel");
}

TEST_F(Qwen35BadInput, ALayerPatternOfTheWrongLengthIsRefused) {
  ExpectLoadError(Edited([](GgufWriter& w, const GgufKv& kv) {
                    if (kv.key != "qwen35.full_attention_interval") return false;
                    const uint8_t pattern[] = {1, 1, 0};
                    w.SetArray("qwen35.attention.recurrent_layers", GgufType::kBool, pattern, 3);
                    return true;
                  }),
                  "qwen35.attention.recurrent_layers has 3 entries; block_count is 7");
}

TEST_F(Qwen35BadInput, APositiveDecayIsRefused) {
  auto values = std::make_shared<std::vector<float>>();
  ExpectLoadError(Edited(nullptr,
                         [values](GgufWriter& w, const GgufTensor& t) {
                           if (t.name != "blk.1.ssm_a") return false;
                           values->assign(reinterpret_cast<const float*>(t.data),
                                          reinterpret_cast<const float*>(t.data) + t.elements());
                           (*values)[2] = 0.5f;
                           w.AddTensor(t.name, t.type, {t.ne[0]}, values->data(), t.nbytes);
                           return true;
                         }),
                  "tensor 'blk.1.ssm_a' entry 2 = 0.5 must be negative");
}

TEST_F(Qwen35BadInput, AnMtpBlockOfAnotherWidthIsRefused) {
  auto values = std::make_shared<std::vector<float>>();
  ExpectLoadError(Edited(nullptr,
                         [values](GgufWriter& w, const GgufTensor& t) {
                           if (t.name != "blk.6.nextn.eh_proj.weight") return false;
                           values->assign(static_cast<size_t>(t.elements()) / 2, 0.0f);
                           w.AddTensor(t.name, t.type, {t.ne[0] / 2, t.ne[1]}, values->data(), t.nbytes / 2);
                           return true;
                         }),
                  "blk.6.nextn.eh_proj.weight");
}

TEST_F(Qwen35BadInput, RopeSectionsThatLeavePairsUnrotatedAreRefused) {
  ExpectLoadError(Edited([](GgufWriter& w, const GgufKv& kv) {
                    if (kv.key != "qwen35.rope.dimension_sections") return false;
                    w.SetI32Array(kv.key, {2, 2, 2, 2});
                    return true;
                  }),
                  "qwen35.rope.dimension_sections leaves rotated pair");
}

}  // namespace
}  // namespace kakeya
