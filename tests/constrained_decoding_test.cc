// Constrained decoding under speculation (ADR 0018), on the shipped model and
// its drafters:
//  * the verifier rejects a draft the grammar forbids, even one the
//    unconstrained target would have picked;
//  * the output is a sentence of the grammar: a JSON Schema's output parses
//    as JSON (nlohmann's parser) and has the shape the schema describes;
//  * the text the grammar forces is drafted without the drafter;
//  * with a grammar, speculative output equals plain decoding under the same
//    grammar (plain_decoding.h, apart from the product's loop) token for
//    token, greedy and seeded, with every shipped drafter and with a replay
//    of the unconstrained output, whose drafts the grammar mostly forbids.
#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/generate.h"
#include "grammar/grammar.h"
#include "grammar/json_schema.h"
#include "model/context.h"
#include "model/model.h"
#include "plain_decoding.h"
#include "replay_drafter.h"
#include "speculative/drafter_registry.h"
#include "speculative/speculative.h"
#include "speculative/verifier.h"

namespace kakeya {
namespace {

const std::string kModels = std::string(KAKEYA_FIXTURES) + "/../../models/";
const std::string kTarget = kModels + "kakeya-pystdlib.gguf";

// The output ends by itself: enums, a boolean and a short array.
const char* kSchema = R"({
  "type": "object",
  "properties": {
    "lang": {"enum": ["python", "c", "rust"]},
    "ok": {"type": "boolean"},
    "tags": {"type": "array", "items": {"enum": ["io", "net", "cli"]}, "maxItems": 3}
  },
  "required": ["lang", "ok", "tags"],
  "additionalProperties": false
})";

class ConstrainedDecoding : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    model_ = Model::Load(kTarget).release();
    tokens_ = std::make_shared<TokenTrie>(model_->tokenizer());
  }
  static void TearDownTestSuite() {
    tokens_.reset();
    delete model_;
  }

  static std::shared_ptr<const GrammarMatcher> Matcher(const std::string& gbnf) {
    return std::make_shared<GrammarMatcher>(ParseGbnf(gbnf, "test"), tokens_);
  }
  static std::vector<TokenId> Prompt() {
    return model_->tokenizer().Encode("import json\n\nCONFIG = json.loads('", true, true);
  }
  static ContextOptions Options(int n_predict, int threads) {
    return ContextOptions{.n_ctx = static_cast<int>(Prompt().size()) + n_predict + kAdaptiveMaxBlock,
                          .max_batch = 64,
                          .n_threads = threads,
                          .max_logit_rows = kAdaptiveMaxBlock};
  }
  static std::string Text(const std::vector<TokenId>& tokens) {
    std::vector<TokenId> body = tokens;
    if (!body.empty() && model_->tokenizer().IsEndOfGeneration(body.back())) body.pop_back();
    return model_->tokenizer().Decode(body, false);
  }

  static Model* model_;
  static std::shared_ptr<const TokenTrie> tokens_;
};

Model* ConstrainedDecoding::model_ = nullptr;
std::shared_ptr<const TokenTrie> ConstrainedDecoding::tokens_;

TEST_F(ConstrainedDecoding, VerifierRejectsADraftTheGrammarForbids) {
  const Tokenizer& tok = model_->tokenizer();
  const std::vector<TokenId> brace = tok.Encode("{", false, false);
  const std::vector<TokenId> letter = tok.Encode("x", false, false);
  ASSERT_EQ(brace.size(), 1u);
  ASSERT_EQ(letter.size(), 1u);
  const int n_vocab = tok.n_vocab();
  // Two rows: the target's favourite is "x" at both, "{" second.
  std::vector<float> rows(2 * size_t(n_vocab), 0.0f);
  for (int r = 0; r < 2; ++r) {
    rows[size_t(r) * n_vocab + letter[0]] = 10;
    rows[size_t(r) * n_vocab + brace[0]] = 5;
  }
  const BlockLogits logits{rows, n_vocab};
  const std::vector<TokenId> drafts = {letter[0]};
  std::vector<TokenId> history = Prompt();
  history.push_back(letter[0]);
  SamplingParams greedy;
  greedy.temperature = 0;
  Sampler sampler(greedy, n_vocab);

  const Verdict free = VerifyMatch(logits, drafts, sampler, history);
  EXPECT_EQ(free.accepted, 1);
  EXPECT_EQ(free.next, letter[0]);

  GrammarMatcher grammar(*Matcher(R"(root ::= "{" [a-z]* "}")"));
  const Verdict constrained = VerifyMatch(logits, drafts, sampler, history, &grammar);
  EXPECT_EQ(constrained.accepted, 0);
  EXPECT_EQ(constrained.next, brace[0]);
}

TEST_F(ConstrainedDecoding, OutputFollowsTheSchema) {
  GenerateOptions o;
  o.n_predict = 400;
  o.sampling.temperature = 0;
  o.grammar = Matcher(JsonSchemaToGbnf(nlohmann::ordered_json::parse(kSchema), "schema"));
  Context ctx(*model_, Options(o.n_predict, 2));
  const GenerateResult r = Generate(ctx, nullptr, Prompt(), o, SpecOptions{}, nullptr, nullptr);
  ASSERT_EQ(r.stop, StopReason::kEndOfGeneration) << Text(r.tokens);
  const std::string text = Text(r.tokens);
  SCOPED_TRACE(text);
  const nlohmann::json value = nlohmann::json::parse(text);  // throws, failing the test, if not JSON
  ASSERT_TRUE(value.is_object());
  EXPECT_EQ(value.size(), 3u);
  EXPECT_TRUE(std::set<std::string>({"python", "c", "rust"}).contains(value.at("lang").get<std::string>()));
  EXPECT_TRUE(value.at("ok").is_boolean());
  ASSERT_TRUE(value.at("tags").is_array());
  EXPECT_LE(value.at("tags").size(), 3u);
  for (const auto& tag : value.at("tags")) {
    EXPECT_TRUE(std::set<std::string>({"io", "net", "cli"}).contains(tag.get<std::string>()));
  }
}

// The text a schema forces (its key names, the punctuation between them) is
// drafted without the drafter: the grammar's drafts show up in the
// statistics, some are kept, and the output is plain decoding's.
TEST_F(ConstrainedDecoding, TheGrammarDraftsWhatItForces) {
  GenerateOptions o;
  o.n_predict = 400;
  o.sampling.temperature = 0;
  o.grammar = Matcher(JsonSchemaToGbnf(nlohmann::ordered_json::parse(kSchema), "schema"));
  std::vector<TokenId> plain;
  {
    Context ctx(*model_, Options(o.n_predict, 2));
    plain = DecodePlainly(ctx, Prompt(), o, nullptr).tokens;
  }
  Context ctx(*model_, Options(o.n_predict, 2));
  const std::unique_ptr<Drafter> ngram =
      MakeDrafter("ngram", DrafterSources{}, DrafterSetup{*model_, ctx, "", o.sampling, kAdaptiveMaxBlock});
  SpecStats stats;
  EXPECT_EQ(Generate(ctx, ngram.get(), Prompt(), o, SpecOptions{}, nullptr, &stats).tokens, plain);
  const auto grammar = std::find_if(stats.by_drafter.begin(), stats.by_drafter.end(),
                                    [](const DrafterStats& d) { return d.name == "grammar"; });
  ASSERT_NE(grammar, stats.by_drafter.end());
  EXPECT_GT(grammar->drafted, 5);
  EXPECT_GT(grammar->accepted, 0);
}

struct Setting {
  float temperature;
  int block;  // 0: adaptive
  int threads;
};

TEST_F(ConstrainedDecoding, SpeculativeEqualsPlainUnderTheSameGrammar) {
  constexpr int kTokens = 160;
  const std::vector<TokenId> prompt = Prompt();
  const DrafterSources shipped{.shipped_target = kTarget};
  const std::vector<Setting> settings = {{0, 0, 2}, {0, 4, 1}, {0, 16, 2}, {0.8f, 0, 2}, {0.8f, 8, 1}};
  for (const Setting& run : settings) {
    SCOPED_TRACE("temperature " + std::to_string(run.temperature) + " block " + std::to_string(run.block) +
                 " threads " + std::to_string(run.threads));
    GenerateOptions o;
    o.n_predict = kTokens;
    o.sampling.temperature = run.temperature;
    o.sampling.seed = 5;
    // The unconstrained output: as drafts, the grammar forbids most of it.
    std::vector<TokenId> unconstrained = prompt;
    {
      Context ctx(*model_, Options(kTokens, 2));
      const GenerateResult free = DecodePlainly(ctx, prompt, o, nullptr);
      unconstrained.insert(unconstrained.end(), free.tokens.begin(), free.tokens.end());
    }
    // JSON mode forces little; the schema forces its key names, which the
    // grammar then drafts in place of the drafter (the odd runs).
    const bool schema = (&run - settings.data()) % 2 == 1;
    o.grammar = Matcher(schema ? JsonSchemaToGbnf(nlohmann::ordered_json::parse(kSchema), "schema") : JsonObjectGbnf());
    std::vector<TokenId> plain;
    {
      Context ctx(*model_, Options(kTokens, 2));
      plain = DecodePlainly(ctx, prompt, o, nullptr).tokens;
    }
    ASSERT_FALSE(plain.empty());
    EXPECT_EQ(Text(plain).front(), '{');
    SCOPED_TRACE(schema ? "schema" : "JSON mode");
    std::vector<TokenId> full = prompt;
    full.insert(full.end(), plain.begin(), plain.end());

    Context ctx(*model_, Options(kTokens, run.threads));
    const SpecOptions spec{.block = run.block};
    for (const std::vector<TokenId>* replayed : {&full, &unconstrained}) {
      ReplayDrafter replay(*replayed);
      SpecStats stats;
      EXPECT_EQ(Generate(ctx, &replay, prompt, o, spec, nullptr, &stats).tokens, plain);
      if (replayed == &full) {
        EXPECT_GT(stats.accepted, 0);
      }
    }
    for (const char* kind : {"ngram", "draft", "dflash", "mtp", "auto"}) {
      SCOPED_TRACE(kind);
      const std::unique_ptr<Drafter> drafter =
          MakeDrafter(kind, shipped, DrafterSetup{*model_, ctx, "", o.sampling, kAdaptiveMaxBlock});
      EXPECT_EQ(Generate(ctx, drafter.get(), prompt, o, spec, nullptr, nullptr).tokens, plain);
    }
  }
}

}  // namespace
}  // namespace kakeya
