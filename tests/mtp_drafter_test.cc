// The MTP drafter (speculative/mtp_drafter.h): its proposals against
// llama.cpp's draft-mtp on the glm4moe NextN fixture
// (fixtures/models2/glm4moe-mtp-f32/<prompt>.drafts.json), its incremental
// cache against a drafter built afresh for every step, lossless speculative
// decoding with it, MTP sidecar files (one made of the fixture's own block
// must propose exactly what the block proposes in the target's file; gemma3
// and llama sidecars load with their architecture's layer) and the files it
// refuses.
#include "speculative/mtp_drafter.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "base/error.h"
#include "drafts_fixture.h"
#include "engine/generate.h"
#include "fixture_util.h"
#include "gguf/gguf.h"
#include "gguf_copy.h"
#include "kernels/cpu/dequant.h"
#include "model/context.h"
#include "model/model.h"
#include "plain_decoding.h"
#include "speculative/drafter_registry.h"
#include "speculative/speculative.h"
#include "test_files.h"

namespace kakeya {
namespace {

using Tokens = std::vector<TokenId>;

const std::string kGlm = fixture::ModelPath("glm4moe-mtp-f32", "models2");

// ------------------------------------------------------------ the reference

// A speculative loop driven by hand, as Generate drives it:
// Begin, the prefill with Observe after it, then per step Draft, the verify
// forward of [bonus, drafts], trim and commit, Observe, Accept. The committed
// tokens are the caller's, so the drafter can be held to another engine's
// trajectory.
class HandLoop {
 public:
  HandLoop(const Model& target, Drafter& drafter, const Tokens& prompt, int max_batch = 512)
      : ctx_(target, ContextOptions{.n_ctx = 2048, .max_batch = max_batch, .n_threads = 2, .max_logit_rows = 8}),
        drafter_(drafter),
        history_(prompt) {
    ctx_.SetHiddenTaps(drafter.target_taps());
    drafter.Begin(prompt);
    Prefill(ctx_, prompt, [&](int rows) { drafter.Observe(ctx_, rows); });
  }

  Tokens Draft(int max_tokens) {
    Tokens out(max_tokens);
    out.resize(drafter_.Draft({.history = history_, .max_tokens = max_tokens, .probs = {}}, out));
    return out;
  }
  // The target verifies [bonus, block...]; `accepted` of the block and then
  // `next` are committed, whatever the target would have chosen.
  void Verify(const Tokens& block, int accepted, TokenId next) {
    Tokens rows = {history_.back()};
    rows.insert(rows.end(), block.begin(), block.end());
    ctx_.Forward(rows, /*all_logits=*/true);
    ctx_.Trim(static_cast<int>(block.size()) - accepted);
    ctx_.Commit();
    drafter_.Observe(ctx_, accepted + 1);
    history_.insert(history_.end(), block.begin(), block.begin() + accepted);
    history_.push_back(next);
    drafter_.Accept(history_, static_cast<int>(block.size()), accepted);
  }
  // The first token after the prompt.
  void Commit(TokenId t) { history_.push_back(t); }
  const Tokens& history() const { return history_; }

 private:
  Context ctx_;
  Drafter& drafter_;
  Tokens history_;
};

MtpOptions Options(int n_max = 3, int max_batch = 512) {
  return MtpOptions{.n_max = n_max, .n_ctx = 2048, .max_batch = max_batch, .n_threads = 2};
}

// One draft slot's logits against llama.cpp's top 5: each listed id within
// 1e-3 relative, and our pick the reference's unless its top two are closer
// than that (a near-tie either engine may break).
// Returns the largest |difference|.
double ExpectSlotMatches(std::span<const float> logits, TokenId ours, TokenId ref_id,
                         const std::vector<std::pair<TokenId, double>>& top, const std::string& where) {
  double worst = 0;
  for (const auto& [id, logit] : top) {
    const double tol = 1e-3 * std::max(1.0, std::abs(logit));
    const double d = std::abs(double(logits[id]) - logit);
    worst = std::max(worst, d);
    EXPECT_LE(d, tol) << where << ": logit of token " << id << " is " << logits[id] << ", llama.cpp " << logit;
  }
  const double margin = top[0].second - top[1].second;
  if (ours != ref_id) {
    EXPECT_LT(margin, 2e-3 * std::max(1.0, std::abs(top[0].second)))
        << where << ": proposes " << ours << ", llama.cpp " << ref_id << " (margin " << margin << ")";
  }
  return worst;
}

// ------------------------------------------------------------ parity

// A NextN fixture ("folder/model") and one of its prompts.
struct ParityCase {
  const char* model;
  const char* prompt;
};
void PrintTo(const ParityCase& c, std::ostream* out) { *out << c.model << " " << c.prompt; }

class MtpParity : public ::testing::TestWithParam<ParityCase> {};

// llama.cpp's loop prefills all but the last prompt token and drafts its
// step 0 at pos n_prompt - 1. The hand loop does the same: it prefills all
// but the last prompt token, which comes as step 0's bonus, so every step
// lines up: commit the reference's tokens, compare the proposals.
TEST_P(MtpParity, ProposalsMatchLlamaCpp) {
  const std::string param = GetParam().model;
  const std::string folder = param.substr(0, param.find('/')), model = param.substr(param.find('/') + 1);
  const fixture::RefDrafts ref = fixture::LoadRefDrafts(model, GetParam().prompt, folder);
  const std::unique_ptr<Model> target = Model::Load(fixture::ModelPath(model, folder));
  MtpDrafter drafter(*target, "", Options(ref.n_max));
  HandLoop loop(*target, drafter, Tokens(ref.prompt_ids.begin(), ref.prompt_ids.end() - 1));
  loop.Commit(ref.prompt_ids.back());
  ASSERT_EQ(ref.steps[0].pos, static_cast<int>(ref.prompt_ids.size()) - 1);

  double worst = 0;
  int compared = 0, equal = 0;
  float min_margin = INFINITY;  // of the block's router, over every draft row
  for (size_t s = 0; s < ref.steps.size(); ++s) {
    const fixture::RefDraftStep& step = ref.steps[s];
    ASSERT_EQ(step.pos, static_cast<int>(loop.history().size()) - 1) << "step " << s;
    ASSERT_EQ(step.id_last, loop.history().back()) << "step " << s;
    const int k = static_cast<int>(step.draft.size());
    // Drafting k tokens leaves slot k's logits in the drafter's context; a
    // Draft() redoes the previous one's rows, so each slot is drafted in turn.
    for (int slot = 1; slot <= k; ++slot) {
      const Tokens ours = loop.Draft(slot);
      ASSERT_EQ(static_cast<int>(ours.size()), slot) << "step " << s;
      const std::string where = "step " + std::to_string(s) + " (pos " + std::to_string(step.pos) + ") slot " +
                                std::to_string(slot - 1);
      worst = std::max(worst, ExpectSlotMatches(drafter.context().logits(0), ours.back(), step.draft[slot - 1],
                                                step.top[slot - 1], where));
      ++compared;
      equal += ours.back() == step.draft[slot - 1];
      min_margin = std::min(min_margin, drafter.context().routing_margin(0, 0));
    }
    // The reference's block, so the committed tokens are the reference's.
    loop.Verify(step.draft, step.accepted, step.target_ids.back());
    EXPECT_EQ(std::vector<TokenId>(step.target_ids.begin(), step.target_ids.end() - 1),
              Tokens(step.draft.begin(), step.draft.begin() + step.accepted));
  }
  std::cout << "[mtp parity] " << param << " " << GetParam().prompt << ": " << equal << " of " << compared
            << " proposals equal to llama.cpp's, max |dlogit| " << worst << ", smallest router margin of the block "
            << min_margin << std::endl;
}

// deepseek4's block reads the target's four hyper-connection streams.
INSTANTIATE_TEST_SUITE_P(Prompts, MtpParity,
                         ::testing::Values(ParityCase{"models2/glm4moe-mtp-f32", "fox"},
                                           ParityCase{"models2/glm4moe-mtp-f32", "fib"},
                                           ParityCase{"models2/glm4moe-mtp-f32", "long"},
                                           ParityCase{"models2/glm4moe-mtp-f32", "wrap"},
                                           ParityCase{"models3/ds4-f32", "fox"}, ParityCase{"models3/ds4-f32", "wrap"},
                                           // qwen35's block: gated attention, fed the target's normed
                                           // hidden state; the target's own rows run DeltaNet layers.
                                           ParityCase{"models4/qwen35-f32", "fox"},
                                           ParityCase{"models4/qwen35-f32", "wrap"},
                                           ParityCase{"models4/qwen35moe-f32", "fox"},
                                           ParityCase{"models4/qwen35moe-f32", "wrap"}),
                         [](const ::testing::TestParamInfo<ParityCase>& info) {
                           return fixture::ModelParamName(info.param.model) + "_" + info.param.prompt;
                         });

// ------------------------------------------------------------ the cache

// Whatever the steps did (drafts accepted in part or in full, steps that
// drafted nothing), the incremental cache must equal one built afresh from
// the committed history: a new drafter on the same history proposes the same
// tokens from bit-identical logits. The committed tokens are forced (random
// weights never agree with their own drafts), so every path is taken; the
// prompt comes in chunks of 8 rows.
TEST(MtpDrafter, IncrementalCacheEqualsAFreshOne) {
  const std::unique_ptr<Model> target = Model::Load(kGlm);
  const int n_vocab = target->hparams().n_vocab;
  const Tokens prompt =
      target->tokenizer().Encode("The quick brown fox jumps over the lazy dog, and then it runs away.", true, true);
  ASSERT_GT(prompt.size(), 16u);
  constexpr int kBatch = 8;
  MtpDrafter drafter(*target, "", Options(3, kBatch));
  HandLoop loop(*target, drafter, prompt, kBatch);
  std::mt19937 rng(7);
  std::uniform_int_distribution<TokenId> any(3, n_vocab - 1);
  loop.Commit(any(rng));
  for (int step = 0; step < 40; ++step) {
    SCOPED_TRACE("step " + std::to_string(step));
    // Steps 0, 7, 14, ... draft nothing (the bonus of step 0 reaches the
    // drafter only with Accept's history).
    if (step % 7 == 0) {
      loop.Verify({}, 0, any(rng));
      continue;
    }
    MtpDrafter fresh(*target, "", Options(3, kBatch));
    HandLoop again(*target, fresh, Tokens(loop.history().begin(), loop.history().end() - 1), kBatch);
    again.Commit(loop.history().back());
    for (int slot = 1; slot <= 3; ++slot) {
      const Tokens ours = loop.Draft(slot);
      const Tokens theirs = again.Draft(slot);
      ASSERT_EQ(ours, theirs) << "slot " << slot;
      const std::span<const float> a = drafter.context().logits(0), b = fresh.context().logits(0);
      ASSERT_TRUE(std::equal(a.begin(), a.end(), b.begin())) << "slot " << slot << ": logits differ";
    }
    const Tokens block = loop.Draft(3);
    loop.Verify(block, step % 4, any(rng));
  }
}

// A draft vocabulary (DraftVocabSize) keeps the head's first rows: the
// drafter's logits are the full head's first ids, bit for bit, for an F32
// head (rows) and a Q8_0 head (packed 16 rows a group), so it proposes what
// the full head proposes when that is among them, else the best of them.
// The committed tokens are random and the same for both drafters.
TEST(MtpDrafter, ADraftVocabularyScoresTheFirstIdsWithTheSameBits) {
  for (const std::string& path : {kGlm, fixture::ModelPath("qwen35moe-q8_0", "models4")}) {
    SCOPED_TRACE(path);
    const std::unique_ptr<Model> target = Model::Load(path);
    const int n_vocab = target->hparams().n_vocab;
    const int n = n_vocab / 2 / 16 * 16;
    const Tokens prompt = target->tokenizer().Encode("The quick brown fox jumps over the lazy dog.", true, true);
    MtpDrafter full(*target, "", Options());
    MtpOptions o = Options();
    o.draft_vocab = n;
    MtpDrafter first(*target, "", o);
    HandLoop a(*target, full, prompt), b(*target, first, prompt);
    std::mt19937 rng(11);
    std::uniform_int_distribution<TokenId> any(3, n_vocab - 1);
    const TokenId bonus = any(rng);
    a.Commit(bonus);
    b.Commit(bonus);
    int inside = 0, outside = 0;
    for (int step = 0; step < 24; ++step) {
      SCOPED_TRACE("step " + std::to_string(step));
      const Tokens ours = b.Draft(1), theirs = a.Draft(1);
      ASSERT_EQ(ours.size(), 1u);
      const std::span<const float> small = first.context().logits(0), whole = full.context().logits(0);
      ASSERT_EQ(small.size(), size_t(n));
      ASSERT_TRUE(std::equal(small.begin(), small.end(), whole.begin())) << "logits differ";
      EXPECT_EQ(ours[0], Argmax(whole.first(n)));
      (theirs[0] < n ? inside : outside) += 1;
      if (theirs[0] < n) {
        EXPECT_EQ(ours[0], theirs[0]);
      }
      const TokenId next = any(rng);
      a.Verify({}, 0, next);
      b.Verify({}, 0, next);
    }
    EXPECT_GT(inside, 0);
    EXPECT_GT(outside, 0);
  }
}

// ------------------------------------------------------------ lossless

Tokens PlainGreedy(const Model& model, const Tokens& prompt, int n, int threads) {
  Context ctx(model,
              ContextOptions{.n_ctx = static_cast<int>(prompt.size()) + n + 16, .max_batch = 16, .n_threads = threads});
  GenerateOptions o;
  o.n_predict = n;
  o.ignore_eos = true;
  o.sampling.temperature = 0;
  return DecodePlainly(ctx, prompt, o, nullptr).tokens;
}

// Greedy speculative tokens with the MTP drafter of `sidecar` (empty: the
// target's own block); `stats` gets the loop's statistics and trace.
Tokens MtpGreedy(const Model& model, const std::string& sidecar, const Tokens& prompt, int n, int threads,
                 int block, SpecStats* stats, int draft_vocab = 0) {
  Context ctx(model, ContextOptions{.n_ctx = static_cast<int>(prompt.size()) + n + 16, .max_batch = 16,
                                    .n_threads = threads, .max_logit_rows = 16});
  MtpDrafter drafter(model, sidecar,
                     MtpOptions{.n_ctx = ctx.options().n_ctx, .max_batch = 16, .shared_pool = &ctx.pool(),
                                .draft_vocab = draft_vocab});
  GenerateOptions o;
  o.n_predict = n;
  o.ignore_eos = true;
  o.sampling.temperature = 0;
  return Generate(ctx, &drafter, prompt, o, SpecOptions{.block = block, .trace = true}, nullptr, stats)
      .tokens;
}

TEST(MtpDrafter, GreedyTokensEqualPlainDecoding) {
  const std::unique_ptr<Model> target = Model::Load(kGlm);
  for (const char* text : {"The quick brown fox", "def fib(n):"}) {
    const Tokens prompt = target->tokenizer().Encode(text, true, true);
    for (int threads : {1, 2}) {
      const Tokens plain = PlainGreedy(*target, prompt, 240, threads);
      ASSERT_EQ(plain.size(), 240u);
      for (int block : {2, 3, 4, 0}) {
        SCOPED_TRACE(std::string(text) + ", threads " + std::to_string(threads) + ", block " + std::to_string(block));
        SpecStats stats;
        EXPECT_EQ(MtpGreedy(*target, "", prompt, 240, threads, block, &stats), plain);
        EXPECT_GT(stats.drafted, 0);
        if (block > 0) {
          EXPECT_LE(stats.drafted, stats.steps * std::min(block - 1, 3));
        }
        // A head over half the vocabulary drafts other tokens, never other output.
        const int half = target->hparams().n_vocab / 2 / 16 * 16;
        EXPECT_EQ(MtpGreedy(*target, "", prompt, 240, threads, block, nullptr, half), plain);
      }
    }
  }
}

// ------------------------------------------------------------ sidecars

// A sidecar of the fixture's own NextN block: its metadata, and only the
// tensors of blk.3 (the layer and its nextn.*), as a trained sidecar has
// them. `edit_keys` and `edit_tensors` make bad variants.
void WriteGlmSidecar(const std::string& path, const MetadataEdit& edit_keys = {},
                     const TensorEdit& edit_tensors = {}) {
  WriteEditedCopy(kGlm, path, edit_keys, [&](GgufWriter& w, const GgufTensor& t) {
    if (t.name.rfind("blk.3.", 0) != 0) return true;  // dropped
    return edit_tensors && edit_tensors(w, t);
  });
}

TEST(MtpSidecar, ProposesExactlyWhatTheBlockInTheTargetFileProposes) {
  TempDir dir("mtp_sidecar");
  const std::string sidecar = dir.File("glm-mtp.gguf");
  WriteGlmSidecar(sidecar);
  EXPECT_EQ(DrafterKindOfFile(sidecar).name, "mtp");
  const std::unique_ptr<Model> target = Model::Load(kGlm);
  const Tokens prompt = target->tokenizer().Encode("The quick brown fox", true, true);
  SpecStats in_file, from_sidecar;
  EXPECT_EQ(MtpGreedy(*target, sidecar, prompt, 80, 2, 4, &from_sidecar),
            MtpGreedy(*target, "", prompt, 80, 2, 4, &in_file));
  ASSERT_EQ(in_file.trace.size(), from_sidecar.trace.size());
  for (size_t i = 0; i < in_file.trace.size(); ++i) {
    EXPECT_EQ(in_file.trace[i].pos, from_sidecar.trace[i].pos);
    EXPECT_EQ(in_file.trace[i].draft, from_sidecar.trace[i].draft) << "step " << i;
  }
  EXPECT_GT(in_file.drafted, 0);
}

// A sidecar for one of the tiny fixtures of another architecture: layer
// n_layer a copy of the last trunk layer's tensors, nextn.* made up.
void WriteSidecarFor(const std::string& model_path, const std::string& path) {
  const std::unique_ptr<GgufFile> src = GgufFile::Open(model_path);
  const std::string arch(src->GetString("general.architecture"));
  const int n_layer = static_cast<int>(src->GetU32(arch + ".block_count"));
  const int n_embd = static_cast<int>(src->GetU32(arch + ".embedding_length"));
  GgufWriter w;
  CopyMetadata(*src, w, SetU32(arch + ".block_count", n_layer + 1));
  w.SetU32(arch + ".nextn_predict_layers", 1);
  const std::string last = "blk." + std::to_string(n_layer - 1) + ".";
  const std::string block = "blk." + std::to_string(n_layer) + ".";
  CopyTensors(*src, w, [&](GgufWriter& out, const GgufTensor& t) {
    if (t.name.rfind(last, 0) == 0) {
      out.AddTensor(block + t.name.substr(last.size()), t.type, std::vector<int64_t>(t.ne, t.ne + t.n_dims), t.data,
                    t.nbytes);
    }
    return true;
  });
  // eh_proj of the type of the model's matrices (Q8_0 for the shipped one).
  const DType type = src->FindTensor(last + "attn_q.weight")->type;
  std::mt19937 rng(11);
  std::normal_distribution<float> normal(0.0f, 1.0f / std::sqrt(2.0f * n_embd));
  std::vector<float> row(2 * n_embd);
  std::vector<uint8_t> eh_proj(RowBytes(type, 2 * n_embd) * n_embd);
  for (int o = 0; o < n_embd; ++o) {
    for (float& x : row) x = normal(rng);
    QuantizeRow(type, row.data(), eh_proj.data() + o * RowBytes(type, 2 * n_embd), 2 * n_embd);
  }
  w.AddTensor(block + "nextn.eh_proj.weight", type, {2 * n_embd, n_embd}, eh_proj.data(), eh_proj.size());
  const std::vector<float> ones(n_embd, 1.0f);
  for (const char* norm : {"nextn.enorm.weight", "nextn.hnorm.weight", "nextn.shared_head_norm.weight"}) {
    w.AddTensor(block + norm, DType::kF32, {n_embd}, ones.data(), ones.size() * sizeof(float));
  }
  w.Write(path);
}

const std::string kShipped = std::string(KAKEYA_FIXTURES) + "/../../models/kakeya-pystdlib.gguf";

// The sidecar's block is bound by its architecture's own code, at its own
// layer index (gemma3: layer 6 or 12 of the period-6 pattern slides), and
// drafts for the target it was made for without changing a token.
TEST(MtpSidecar, LoadsForLlamaQwenAndGemma3Targets) {
  TempDir dir("mtp_sidecars");
  struct Case {
    std::string model;
    int window;  // of the NextN layer
  };
  for (const Case& c : {Case{fixture::ModelPath("tiny-llama-f32"), 0}, Case{fixture::ModelPath("tiny-qwen3-f32"), 0},
                        Case{fixture::ModelPath("tiny-gemma3-f32"), 32}, Case{kShipped, 128}}) {
    SCOPED_TRACE(c.model);
    const std::string sidecar = dir.File("mtp.gguf");
    WriteSidecarFor(c.model, sidecar);
    EXPECT_EQ(DrafterKindOfFile(sidecar).name, "mtp");
    const std::unique_ptr<Model> target = Model::Load(c.model);
    MtpDrafter drafter(*target, sidecar, Options());
    const Layer& layer = drafter.context().model().layers[0];
    EXPECT_EQ(layer.attn.window, c.window);
    EXPECT_EQ(layer.attn.kv_layer, 0);
    const Tokens prompt = target->tokenizer().Encode("Once upon a time", true, true);
    SpecStats stats;
    EXPECT_EQ(MtpGreedy(*target, sidecar, prompt, 48, 2, 4, &stats), PlainGreedy(*target, prompt, 48, 2));
    EXPECT_GT(stats.drafted, 0);
  }
}

// Construction must throw Error whose message contains `needle`.
void ExpectMtpError(const Model& target, const std::string& sidecar, const std::string& needle) {
  try {
    MtpDrafter drafter(target, sidecar, Options());
    ADD_FAILURE() << "the MTP drafter accepted " << sidecar << "; expected an error about " << needle;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos)
        << "message: " << e.what() << "\nexpected to mention: " << needle;
  }
}

TEST(MtpSidecar, RefusesFilesThatDoNotFitTheTarget) {
  TempDir dir("mtp_bad");
  const std::unique_ptr<Model> glm = Model::Load(kGlm);
  const std::unique_ptr<Model> llama = Model::Load(fixture::ModelPath("tiny-llama-f32"));

  ExpectMtpError(*llama, "", "this model has no NextN layers; pass an MTP sidecar with --draft");

  const std::string good = dir.File("good.gguf");
  WriteGlmSidecar(good);
  ExpectLoadError(good, "an MTP sidecar (NextN layers only)");
  ExpectMtpError(*glm, kGlm, "not an MTP sidecar");
  ExpectMtpError(*llama, good, "an MTP sidecar of architecture glm4moe for a llama target");

  const std::string gemma_sidecar = dir.File("gemma.gguf");
  WriteSidecarFor(fixture::ModelPath("tiny-gemma3-f32"), gemma_sidecar);
  const std::unique_ptr<Model> pystdlib = Model::Load(kShipped);
  ExpectMtpError(*pystdlib, gemma_sidecar, "hidden size (embedding_length) 128; the target's is 384");

  const std::string vocab = dir.File("vocab.gguf");
  WriteGlmSidecar(vocab, [](GgufWriter& w, const GgufKv& kv) {
    if (kv.key != "tokenizer.ggml.tokens") return false;
    std::vector<std::string> tokens(kv.value.strings.begin(), kv.value.strings.end());
    tokens[300] = "changed";
    w.SetStringArray(kv.key, tokens);
    return true;
  });
  ExpectMtpError(*glm, vocab, "token 300 is \"changed\"");

  const std::string shifted = dir.File("shifted.gguf");
  WriteGlmSidecar(shifted, SetU32("glm4moe.block_count", 5), [](GgufWriter& w, const GgufTensor& t) {
    w.AddTensor("blk.4." + t.name.substr(6), t.type, std::vector<int64_t>(t.ne, t.ne + t.n_dims), t.data, t.nbytes);
    return true;
  });
  ExpectMtpError(*glm, shifted, "its NextN block is blk.4, the layer after a trunk of 4 layers; the target has 3");

  // 8 heads of 16 and 4 KV heads of 16: the same matrix shapes, other heads.
  const std::string heads = dir.File("heads.gguf");
  WriteGlmSidecar(heads, [](GgufWriter& w, const GgufKv& kv) {
    const std::pair<const char*, uint32_t> keys[] = {{"glm4moe.attention.head_count", 8},
                                                     {"glm4moe.attention.head_count_kv", 4},
                                                     {"glm4moe.attention.key_length", 16},
                                                     {"glm4moe.attention.value_length", 16}};
    for (const auto& [key, value] : keys) {
      if (kv.key == key) {
        w.SetU32(key, value);
        return true;
      }
    }
    return false;
  });
  ExpectMtpError(*glm, heads, "MTP sidecar attention of 8 heads, 4 KV heads of 16");

  const std::string no_hnorm = dir.File("no_hnorm.gguf");
  WriteGlmSidecar(no_hnorm, {}, [](GgufWriter&, const GgufTensor& t) { return t.name == "blk.3.nextn.hnorm.weight"; });
  ExpectMtpError(*glm, no_hnorm, "missing tensor 'blk.3.nextn.hnorm.weight'");

  const std::string not_gguf = dir.File("not.gguf");
  std::ofstream(not_gguf) << "not a gguf file";
  EXPECT_THROW(MtpDrafter(*glm, not_gguf, Options()), Error);
}

// The registry's "mtp" kind builds the drafter from --draft, or from the
// target's own block without one.
TEST(MtpSidecar, RegistryBuildsTheDrafter) {
  const DrafterKind* kind = FindDrafterKind("mtp");
  ASSERT_NE(kind, nullptr);
  const std::unique_ptr<Model> glm = Model::Load(kGlm);
  Context ctx(*glm, ContextOptions{.n_ctx = 256, .max_batch = 16});
  EXPECT_EQ(kind->make(DrafterSetup{*glm, ctx, "", {}, 4})->name(), "mtp");
  TempDir dir("mtp_registry");
  WriteGlmSidecar(dir.File("s.gguf"));
  EXPECT_EQ(kind->make(DrafterSetup{*glm, ctx, dir.File("s.gguf"), {}, 4})->name(), "mtp");
}

}  // namespace
}  // namespace kakeya
