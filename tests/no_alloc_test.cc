// docs/design.md, invariant 4: the decode hot loop does not allocate. Counts calls
// of operator new (which std::vector and friends use) between consecutive
// tokens of plain and speculative generation, after the set-up is done.
#include <atomic>
#include <cstdlib>
#include <new>

#include <gtest/gtest.h>

#include "engine/generate.h"
#include "model/context.h"
#include "speculative/draft_model_drafter.h"
#include "speculative/drafter_registry.h"
#include "speculative/ngram_drafter.h"
#include "speculative/speculative.h"

namespace {
std::atomic<long> g_allocations{0};
}
#if !defined(__SANITIZE_ADDRESS__)
// None of the three inlined: where GCC 12 sees a std::malloc or std::free
// inside a caller, it pairs it with the other operator and warns of
// mismatched allocators (-Wmismatched-new-delete).
__attribute__((noinline)) void* operator new(std::size_t size) {
  ++g_allocations;
  if (void* p = std::malloc(size == 0 ? 1 : size)) return p;
  throw std::bad_alloc();
}
__attribute__((noinline)) void operator delete(void* p) noexcept { std::free(p); }
__attribute__((noinline)) void operator delete(void* p, std::size_t) noexcept { std::free(p); }
#endif

namespace kakeya {
namespace {

const std::string kModels = std::string(KAKEYA_FIXTURES) + "/models/";

// Generates 200 tokens and returns the allocations made between the 10th
// token and the last: steady-state decoding.
long AllocationsWhileDecoding(const std::function<GenerateResult(const TokenCallback&)>& generate) {
  long at_10 = -1, at_last = -1;
  int n = 0;
  generate([&](TokenId) {
    ++n;
    if (n == 10) at_10 = g_allocations.load();
    at_last = g_allocations.load();
    return true;
  });
  EXPECT_EQ(n, 200);
  return at_last - at_10;
}

class NoAllocation : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
#if defined(__SANITIZE_ADDRESS__)
    GTEST_SKIP() << "operator new cannot be counted under AddressSanitizer";
#endif
  }
};

TEST_P(NoAllocation, DecodeStepsDoNotAllocate) {
  const std::unique_ptr<Model> model = Model::Load(kModels + GetParam() + ".gguf");
  const std::vector<TokenId> prompt = model->tokenizer().Encode("Once upon a time, there was a fox", true, true);
  Context ctx(*model, ContextOptions{.n_ctx = 512, .max_batch = 64, .n_threads = 2, .max_logit_rows = 16});
  GenerateOptions o;
  o.n_predict = 200;
  o.ignore_eos = true;
  o.sampling.temperature = 0.8f;
  o.sampling.seed = 1;

  EXPECT_EQ(AllocationsWhileDecoding([&](const TokenCallback& cb) { return Generate(ctx, nullptr, prompt, o, SpecOptions{}, cb, nullptr); }), 0)
      << "plain decoding";

  DraftModelOptions d;
  d.n_ctx = 512;
  d.shared_pool = &ctx.pool();
  d.sampling = o.sampling;
  DraftModelDrafter draft(*model, kModels + "tiny-draft-f32.gguf", d);
  EXPECT_EQ(AllocationsWhileDecoding([&](const TokenCallback& cb) {
              return Generate(ctx, &draft, prompt, o, SpecOptions{.block = 4}, cb, nullptr);
            }),
            0)
      << "draft-model speculation";

  NgramDrafter ngram(NgramOptions{.n_ctx = 512});
  o.sampling.temperature = 0;
  EXPECT_EQ(AllocationsWhileDecoding([&](const TokenCallback& cb) {
              return Generate(ctx, &ngram, prompt, o, SpecOptions{}, cb, nullptr);
            }),
            0)
      << "n-gram speculation";
}

// Every cache type, the codec coding a block every 16 steps: a 320-token
// prompt puts the decode steps past the codec's first coded positions.
TEST(NoAllocationCacheTypes, DecodeStepsDoNotAllocateWithAnyCacheType) {
#if defined(__SANITIZE_ADDRESS__)
  GTEST_SKIP() << "operator new cannot be counted under AddressSanitizer";
#endif
  const std::unique_ptr<Model> model = Model::Load(kModels + "tiny-qwen3-f32.gguf");
  std::vector<TokenId> prompt = model->tokenizer().Encode("Once upon a time, there was a fox", true, true);
  while (prompt.size() < 320) prompt.push_back(prompt[prompt.size() % 9 + 1]);
  for (const auto& [k, v] : {std::pair{KvType::kKakeya4, KvType::kKakeya3}, std::pair{KvType::kQ4_0, KvType::kQ8_0},
                             std::pair{KvType::kF16, KvType::kBF16}}) {
    SCOPED_TRACE(std::string(KvTypeName(k)) + "/" + std::string(KvTypeName(v)));
    Context ctx(*model, ContextOptions{.n_ctx = 600, .max_batch = 64, .n_threads = 2, .max_logit_rows = 16,
                                       .cache_type_k = k, .cache_type_v = v});
    GenerateOptions o;
    o.n_predict = 200;
    o.ignore_eos = true;
    o.sampling.temperature = 0;
    EXPECT_EQ(AllocationsWhileDecoding([&](const TokenCallback& cb) {
                return Generate(ctx, nullptr, prompt, o, SpecOptions{}, cb, nullptr);
              }),
              0)
        << "plain decoding";
    NgramDrafter ngram(NgramOptions{.n_ctx = 600});
    EXPECT_EQ(AllocationsWhileDecoding([&](const TokenCallback& cb) {
                return Generate(ctx, &ngram, prompt, o, SpecOptions{.block = 4}, cb, nullptr);
              }),
              0)
        << "n-gram speculation";
  }
}

// The drafters that read the target (taps, Observe) and auto: the shipped
// target with its DFlash and MTP files, gemma4 with its assistant, glm4moe
// and deepseek4 with its own NextN layers and a DSpark file.
TEST(NoAllocationDrafters, DraftersThatReadTheTargetDoNotAllocate) {
#if defined(__SANITIZE_ADDRESS__)
  GTEST_SKIP() << "operator new cannot be counted under AddressSanitizer";
#endif
  const std::string shipped = std::string(KAKEYA_FIXTURES) + "/../../models/kakeya-pystdlib";
  const std::string models2 = std::string(KAKEYA_FIXTURES) + "/models2/";
  struct Case {
    std::string target, kind, draft;
  };
  const std::vector<Case> cases = {{shipped + ".gguf", "dflash", ""},
                                   {shipped + ".gguf", "mtp", ""},
                                   {shipped + ".gguf", "auto", ""},
                                   {models2 + "g4moe-q8_0.gguf", "assistant", models2 + "g4moe-assistant-f32.gguf"},
                                   {models2 + "glm4moe-mtp-f32.gguf", "mtp", ""},
                                   {std::string(KAKEYA_FIXTURES) + "/models3/ds4-q8_0.gguf", "mtp", ""},
                                   {std::string(KAKEYA_FIXTURES) + "/models3/ds4-q8_0.gguf", "dspark",
                                    std::string(KAKEYA_FIXTURES) + "/models3/ds4-dspark-f32.gguf"},
                                   // qwen35: verify forwards that roll the recurrent state back.
                                   {std::string(KAKEYA_FIXTURES) + "/models4/qwen35moe-q8_0.gguf", "draft",
                                    std::string(KAKEYA_FIXTURES) + "/models/tiny-draft-f32.gguf"},
                                   {std::string(KAKEYA_FIXTURES) + "/models4/qwen35moe-q8_0.gguf", "mtp", ""}};
  for (const Case& c : cases) {
    SCOPED_TRACE(c.target + " " + c.kind + " " + c.draft);
    const std::unique_ptr<Model> model = Model::Load(c.target);
    const std::vector<TokenId> prompt = model->tokenizer().Encode("def parse_args(argv=None):\n", true, true);
    Context ctx(*model, ContextOptions{.n_ctx = 512, .max_batch = 64, .n_threads = 2, .max_logit_rows = 16});
    GenerateOptions o;
    o.n_predict = 200;
    o.ignore_eos = true;
    o.sampling.temperature = 0;
    // The shipped target's drafters are found beside it, the others' given.
    const DrafterSources sources{.draft = c.draft, .shipped_target = c.target == shipped + ".gguf" ? c.target : ""};
    const std::unique_ptr<Drafter> drafter =
        MakeDrafter(c.kind, sources, DrafterSetup{*model, ctx, "", o.sampling, kAdaptiveMaxBlock});
    for (int block : {0, 4}) {
      EXPECT_EQ(AllocationsWhileDecoding([&](const TokenCallback& cb) {
                  return Generate(ctx, drafter.get(), prompt, o, SpecOptions{.block = block}, cb, nullptr);
                }),
                0)
          << "block " << block;
    }
    // Sampled verification of deterministic proposals (one-hot q).
    GenerateOptions sampled = o;
    sampled.sampling.temperature = 0.8f;
    sampled.sampling.seed = 1;
    EXPECT_EQ(AllocationsWhileDecoding([&](const TokenCallback& cb) {
                return Generate(ctx, drafter.get(), prompt, sampled, SpecOptions{.block = 4}, cb, nullptr);
              }),
              0)
        << "sampled";
  }
}

INSTANTIATE_TEST_SUITE_P(Fixtures, NoAllocation,
                         ::testing::Values("tiny-llama-q8_0", "tiny-llama-q4_k_m", "tiny-gemma3-f32",
                                           // Mixtures: routing and grouping rows by expert.
                                           "../models2/g4moe-q8_0", "../models2/q3moe-q8_0",
                                           // deepseek4: hyper-connections and the compressed cache.
                                           "../models3/ds4-q8_0",
                                           // qwen35: Gated DeltaNet layers and their recurrent state.
                                           "../models4/qwen35moe-q8_0"),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           std::string n = info.param.substr(info.param.rfind('/') + 1);
                           for (char& c : n) c = std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
                           return n;
                         });

}  // namespace
}  // namespace kakeya
