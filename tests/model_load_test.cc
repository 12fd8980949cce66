// Bad input to the loaders of the mixture and Gemma 4 architectures: each
// inconsistent or missing piece is refused with an Error naming the key or
// tensor, never a crash (docs/design.md, invariant 5). The files are the
// fixtures/models2 models with one thing changed.

#include <gtest/gtest.h>
#include <memory>
#include <string>

#include "base/error.h"
#include "fixture_util.h"
#include "gguf_copy.h"
#include "model/context.h"
#include "model/model.h"
#include "test_files.h"

namespace kakeya {
namespace {

class ModelLoadTest : public ::testing::Test {
 protected:
  // The fixture `model` with the given edits, as a file in the temp folder.
  std::string Edited(const std::string& model, const MetadataEdit& metadata, const TensorEdit& tensors = nullptr) {
    const std::string path = dir_.File(model + "-edited.gguf");
    WriteEditedCopy(fixture::ModelPath(model, "models2"), path, metadata, tensors);
    return path;
  }

  TempDir dir_{"model_load_test"};
};

TensorEdit Drop(const std::string& name) {
  return [=](GgufWriter&, const GgufTensor& t) { return t.name == name; };
}

TEST_F(ModelLoadTest, TheFixturesLoadAndRun) {
  for (const char* model : {"g4moe-f32", "g4moe-q8_0", "g4dense-f32", "q3moe-f16", "q3moe-q8_0", "glm4moe-mtp-f32"}) {
    SCOPED_TRACE(model);
    const std::unique_ptr<Model> m = Model::Load(fixture::ModelPath(model, "models2"));
    Context ctx(*m, ContextOptions{.n_ctx = 16, .max_batch = 4, .n_threads = 1});
    const TokenId tokens[] = {1, 300, 301};
    ctx.Forward(tokens, true);
    EXPECT_EQ(ctx.n_logit_rows(), 3);
  }
}

TEST_F(ModelLoadTest, ExpertsUsedOfZeroOrAboveTheCountAreRefused) {
  ExpectLoadError(Edited("q3moe-q8_0", SetU32("qwen3moe.expert_used_count", 0)),
                  "qwen3moe.expert_used_count = 0 must be in 1 .. expert_count (8)");
  ExpectLoadError(Edited("q3moe-q8_0", SetU32("qwen3moe.expert_used_count", 9)),
                  "qwen3moe.expert_used_count = 9 must be in 1 .. expert_count (8)");
  ExpectLoadError(Edited("g4moe-f32", SetU32("gemma4.expert_used_count", 0)),
                  "gemma4.expert_used_count = 0");
}

TEST_F(ModelLoadTest, ExpertCountsThatDisagreeWithTheTensorsAreRefused) {
  ExpectLoadError(Edited("q3moe-q8_0", SetU32("qwen3moe.expert_count", 4)),
                  "'blk.0.ffn_gate_inp.weight' has shape [64, 8, 1, 1], expected [64, 4]");
  // The router agrees, the experts do not.
  const TensorEdit narrow_router = [](GgufWriter& w, const GgufTensor& t) {
    if (t.name.find("ffn_gate_inp.weight") == std::string::npos) return false;
    w.AddTensor(t.name, t.type, {t.ne[0], 4}, t.data, t.nbytes / 2);
    return true;
  };
  ExpectLoadError(Edited("q3moe-q8_0", SetU32("qwen3moe.expert_count", 4), narrow_router),
                  "'blk.0.ffn_gate_exps.weight' has shape [64, 32, 8, 1], expected [64, 32, 4] (expert_count 4)");
  ExpectLoadError(Edited("glm4moe-mtp-f32", SetU32("glm4moe.expert_count", 16)), "expected [64, 16]");
}

TEST_F(ModelLoadTest, AMissingRouterOrExpertTensorIsNamed) {
  ExpectLoadError(Edited("q3moe-q8_0", nullptr, Drop("blk.1.ffn_gate_inp.weight")),
                  "missing tensor 'blk.1.ffn_gate_inp.weight'");
  ExpectLoadError(Edited("q3moe-q8_0", nullptr, Drop("blk.2.ffn_down_exps.weight")),
                  "missing tensor 'blk.2.ffn_down_exps.weight'");
  ExpectLoadError(Edited("g4moe-q8_0", nullptr, Drop("blk.3.ffn_gate_up_exps.weight")),
                  "missing tensor 'blk.3.ffn_gate_exps.weight'");
  ExpectLoadError(Edited("glm4moe-mtp-f32", nullptr, Drop("blk.2.exp_probs_b.bias")),
                  "missing tensor 'blk.2.exp_probs_b.bias'");
  ExpectLoadError(Edited("glm4moe-mtp-f32", nullptr, Drop("blk.3.nextn.eh_proj.weight")),
                  "missing tensor 'blk.3.nextn.eh_proj.weight'");
}

// Tensors the architecture does not use would be left out of the model
// silently: a file that has them is refused, naming them. Every fixture
// (made by the reference engine) loads, so each of its tensors is used.
TEST_F(ModelLoadTest, TensorsTheArchitectureDoesNotUseAreRefused) {
  const TensorEdit extra = [](GgufWriter& w, const GgufTensor& t) {
    if (t.name != "output_norm.weight") return false;
    w.AddTensor(t.name, t.type, std::vector<int64_t>(t.ne, t.ne + t.n_dims), t.data, t.nbytes);
    w.AddTensor("blk.0.ffn_gate_inp_shexp.weight", t.type, std::vector<int64_t>(t.ne, t.ne + t.n_dims), t.data,
                t.nbytes);
    return true;
  };
  ExpectLoadError(Edited("q3moe-q8_0", nullptr, extra),
                  "1 tensor ('blk.0.ffn_gate_inp_shexp.weight') that the qwen3moe architecture does not use");
  // Fewer layers in the metadata than in the file: the last layer's tensors are left over.
  ExpectLoadError(Edited("glm4moe-mtp-f32", SetU32("glm4moe.nextn_predict_layers", 0)),
                  "that the glm4moe architecture does not use");
}

TEST_F(ModelLoadTest, ASlidingWindowPatternOfTheWrongLengthIsRefused) {
  const MetadataEdit five_entries = [](GgufWriter& w, const GgufKv& kv) {
    if (kv.key != "gemma4.attention.sliding_window_pattern") return false;
    const uint8_t pattern[] = {1, 1, 1, 1, 1};
    w.SetArray(kv.key, GgufType::kBool, pattern, 5);
    return true;
  };
  ExpectLoadError(Edited("g4moe-f32", five_entries),
                  "gemma4.attention.sliding_window_pattern has 5 entries; block_count is 6");
  const MetadataEdit dropped = [](GgufWriter&, const GgufKv& kv) {
    return kv.key == "gemma4.attention.sliding_window_pattern";
  };
  ExpectLoadError(Edited("g4dense-f32", dropped), "missing key gemma4.attention.sliding_window_pattern");
}

TEST_F(ModelLoadTest, ASharedKvLayerPointingAtNoLayerIsRefused) {
  // 6 layers [S,S,S,S,S,G]: with 5 shared, layer 1 (sliding) would read layer -1.
  ExpectLoadError(Edited("g4moe-f32", SetU32("gemma4.attention.shared_kv_layers", 5)),
                  "layer 1 shares keys and values (attention.shared_kv_layers = 5) but layer -1 is no sliding layer");
  ExpectLoadError(Edited("g4moe-f32", SetU32("gemma4.attention.shared_kv_layers", 6)),
                  "gemma4.attention.shared_kv_layers = 6 leaves no layer with its own cache");
  // g4dense [S,S,G,S,G] with 2 shared: layer 3 (sliding) would read layer 1
  // and layer 4 (global) layer 2, which is fine; the shared layers need no
  // K/V tensors, so the file loads as it is.
  const std::unique_ptr<Model> m =
      Model::Load(Edited("g4dense-f32", SetU32("gemma4.attention.shared_kv_layers", 2)));
  EXPECT_EQ(m->layers[3].attn.kv_layer, 1);
  EXPECT_EQ(m->layers[4].attn.kv_layer, 2);
}

TEST_F(ModelLoadTest, TooManyNextnLayersAreRefused) {
  ExpectLoadError(Edited("glm4moe-mtp-f32", SetU32("glm4moe.nextn_predict_layers", 4)),
                  "glm4moe.nextn_predict_layers = 4 leaves no trunk layer (block_count 4)");
}

TEST_F(ModelLoadTest, TheNextnLayerIsLoadedBesideTheTrunk) {
  const std::unique_ptr<Model> m = Model::Load(fixture::ModelPath("glm4moe-mtp-f32", "models2"));
  EXPECT_EQ(m->hparams().n_layer, 3);
  ASSERT_EQ(m->nextn.size(), 1u);
  EXPECT_TRUE(m->nextn[0].layer.moe.present());
  EXPECT_TRUE(m->nextn[0].layer.shared_expert.present());
  EXPECT_EQ(m->nextn[0].eh_proj.n_in, 2 * m->hparams().n_embd);
  EXPECT_NE(m->nextn[0].shared_head_norm, nullptr);
  EXPECT_EQ(m->nextn[0].head.data, nullptr);  // absent: the trunk's output head
}

}  // namespace
}  // namespace kakeya
