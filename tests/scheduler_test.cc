// The server's scheduler (server/scheduler.h): requests decoded together in
// one forward per step give, token for token, what each gives alone with
// plain decoding (the independent oracle: Generate, one row per forward, its
// own context), with every drafter of the shipped model, whatever else runs
// beside them; cancelling one request leaves the others untouched; a full
// queue refuses; shutdown ends every request.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <future>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "base/error.h"
#include "engine/generate.h"
#include "model/context.h"
#include "model/model.h"
#include "plain_decoding.h"
#include "server/scheduler.h"
#include "speculative/drafter_registry.h"

namespace kakeya {
namespace {

const std::string kModels = std::string(KAKEYA_FIXTURES) + "/../../models/";
const std::string kTarget = kModels + "kakeya-pystdlib.gguf";

const char* const kPrompts[] = {
    "def parse_args(argv=None):\n",
    "import os\nimport sys\n\n\ndef main():\n",
    "class Config:\n    def __init__(self, path):\n",
    "    for key, value in sorted(items.items()):\n",
    "# Copyright\n\"\"\"Utilities for reading files.\"\"\"\n",
    "def _check(x):\n    if x is None:\n        raise ValueError(",
    "    return self._cache[name]\n\n    def ",
    "try:\n    import json\nexcept ImportError:\n",
};

GenerateOptions Options(int n_predict, float temperature, uint64_t seed) {
  GenerateOptions o;
  o.n_predict = n_predict;
  o.ignore_eos = true;
  o.sampling.temperature = temperature;
  o.sampling.seed = seed;
  return o;
}

// What a request gives alone, plain decoding on a context of its own.
std::vector<TokenId> Alone(const Model& model, const std::vector<TokenId>& prompt, const GenerateOptions& o) {
  Context ctx(model, ContextOptions{.n_ctx = 1024, .max_batch = 64, .n_threads = 2});
  return DecodePlainly(ctx, prompt, o, nullptr).tokens;
}

struct Collected {
  std::vector<TokenId> tokens;
  std::promise<GenerationOutcome> done;
};

GenerationCallbacks Collect(Collected& c, int stop_after = -1) {
  return {[&c, stop_after](const TokenEvent& e) {
            EXPECT_FALSE(e.logits.empty());
            c.tokens.push_back(e.token);
            return stop_after < 0 || static_cast<int>(c.tokens.size()) < stop_after;
          },
          [&c](const GenerationOutcome& o) { c.done.set_value(o); }};
}

DrafterFactory Drafters(const Model& model, const std::string& kind) {
  if (kind == "none") return nullptr;
  return [&model, kind](Context& slot) {
    return MakeDrafter(kind, DrafterSources{.shipped_target = kTarget},
                       DrafterSetup{model, slot, "", SamplingParams{}, kAdaptiveMaxBlock});
  };
}

class SchedulerTest : public ::testing::TestWithParam<const char*> {};

// Eight greedy requests of different lengths on four slots: requests join
// as others leave, prompt chunks share forwards with verify blocks.
TEST_P(SchedulerTest, RequestsTogetherEqualEachAlone) {
  const std::unique_ptr<Model> model = Model::Load(kTarget);
  const std::string kind = GetParam();
  Scheduler scheduler(*model, SchedulerOptions{.slots = 4, .n_ctx = 512, .n_threads = 2, .max_step_rows = 64},
                      Drafters(*model, kind));
  constexpr int kRequests = 8;
  std::vector<std::vector<TokenId>> prompts;
  std::vector<GenerateOptions> options;
  std::vector<Collected> got(kRequests);
  for (int i = 0; i < kRequests; ++i) {
    prompts.push_back(model->tokenizer().Encode(kPrompts[i], true, true));
    // Odd requests sample with a seed: the seeded choice is as exact as greedy.
    options.push_back(Options(40 + 17 * i, i % 2 == 1 ? 0.8f : 0.0f, 200 + i));
    scheduler.Submit({prompts[i], options[i]}, Collect(got[i]));
  }
  for (int i = 0; i < kRequests; ++i) {
    const GenerationOutcome o = got[i].done.get_future().get();
    EXPECT_TRUE(o.error.empty()) << o.error;
    EXPECT_FALSE(o.cancelled);
    EXPECT_EQ(o.completion_tokens, options[i].n_predict);
    EXPECT_EQ(got[i].tokens, Alone(*model, prompts[i], options[i])) << "request " << i << ", --spec " << kind;
  }
  const SchedulerMetrics m = scheduler.Metrics();
  EXPECT_EQ(m.requests_done, uint64_t(kRequests));
  EXPECT_GT(m.rows, m.steps) << "no step ran more than one row";
}

INSTANTIATE_TEST_SUITE_P(Drafters, SchedulerTest, ::testing::Values("none", "ngram", "draft", "dflash", "mtp", "auto"));

// Plain decoding with a seed is a function of the request alone: the same
// tokens beside other requests as alone.
TEST(Scheduler, SeededSamplingWithoutDraftsEqualsAlone) {
  const std::unique_ptr<Model> model = Model::Load(kTarget);
  Scheduler scheduler(*model, SchedulerOptions{.slots = 3, .n_ctx = 512, .n_threads = 2}, nullptr);
  std::vector<Collected> got(3);
  std::vector<std::vector<TokenId>> prompts;
  for (int i = 0; i < 3; ++i) {
    prompts.push_back(model->tokenizer().Encode(kPrompts[i], true, true));
    scheduler.Submit({prompts[i], Options(60, 0.9f, 100 + i)}, Collect(got[i]));
  }
  for (int i = 0; i < 3; ++i) {
    got[i].done.get_future().get();
    EXPECT_EQ(got[i].tokens, Alone(*model, prompts[i], Options(60, 0.9f, 100 + i))) << "request " << i;
  }
}

TEST(Scheduler, StoppingOneRequestLeavesTheOthersUntouched) {
  const std::unique_ptr<Model> model = Model::Load(kTarget);
  Scheduler scheduler(*model, SchedulerOptions{.slots = 2, .n_ctx = 512, .n_threads = 2}, Drafters(*model, "ngram"));
  const std::vector<TokenId> p0 = model->tokenizer().Encode(kPrompts[0], true, true);
  const std::vector<TokenId> p1 = model->tokenizer().Encode(kPrompts[1], true, true);
  Collected stopped, cancelled, kept;
  scheduler.Submit({p0, Options(200, 0, 0)}, Collect(stopped, 7));  // the client says stop at its 7th token
  const uint64_t id = scheduler.Submit({p1, Options(480, 0, 0)}, Collect(cancelled));
  scheduler.Submit({p1, Options(90, 0, 0)}, Collect(kept));
  while (cancelled.tokens.empty()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  scheduler.Cancel(id);
  const GenerationOutcome a = stopped.done.get_future().get();
  const GenerationOutcome b = cancelled.done.get_future().get();
  const GenerationOutcome c = kept.done.get_future().get();
  EXPECT_TRUE(a.stopped_by_consumer);
  EXPECT_FALSE(a.cancelled) << "a stop string is how a request ends, not a cancellation";
  EXPECT_EQ(stopped.tokens.size(), 7u);
  EXPECT_TRUE(b.cancelled);
  EXPECT_LT(cancelled.tokens.size(), 480u);
  EXPECT_FALSE(c.cancelled);
  EXPECT_EQ(kept.tokens, Alone(*model, p1, Options(90, 0, 0)));
  const SchedulerMetrics m = scheduler.Metrics();
  EXPECT_EQ(m.requests_done, 2u);
  EXPECT_EQ(m.requests_cancelled, 1u);
}

TEST(Scheduler, RefusesWhatCannotRunAndAFullQueue) {
  const std::unique_ptr<Model> model = Model::Load(kTarget);
  Scheduler scheduler(*model, SchedulerOptions{.slots = 1, .n_ctx = 64, .n_threads = 1, .max_queue = 1}, nullptr);
  EXPECT_THROW(scheduler.Submit({{}, Options(4, 0, 0)}, {}), Error);
  EXPECT_THROW(scheduler.Submit({std::vector<TokenId>(64, 5), Options(4, 0, 0)}, {}), Error);
  EXPECT_THROW(scheduler.Submit({{1, model->hparams().n_vocab}, Options(4, 0, 0)}, {}), Error);
  GenerateOptions bad = Options(4, 0.5f, 0);
  bad.sampling.top_p = 2;
  EXPECT_THROW(scheduler.Submit({{1, 2}, bad}, {}), Error);

  // One runs (it fills the context), one waits, the next is refused.
  Collected running, waiting;
  scheduler.Submit({{1, 2}, Options(1000, 0, 0)}, Collect(running));
  while (running.tokens.empty()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  scheduler.Submit({{1, 3}, Options(5, 0, 0)}, Collect(waiting));
  EXPECT_THROW(scheduler.Submit({{1, 4}, Options(5, 0, 0)}, {}), QueueFull);
  EXPECT_EQ(running.done.get_future().get().stop, StopReason::kContextFull);
  EXPECT_EQ(waiting.done.get_future().get().completion_tokens, 5);
}

TEST(Scheduler, ShutdownEndsEveryRequest) {
  const std::unique_ptr<Model> model = Model::Load(kTarget);
  Collected running, queued;
  {
    Scheduler scheduler(*model, SchedulerOptions{.slots = 1, .n_ctx = 512, .n_threads = 1}, nullptr);
    scheduler.Submit({{1, 2}, Options(400, 0, 0)}, Collect(running));
    scheduler.Submit({{1, 3}, Options(400, 0, 0)}, Collect(queued));
    while (running.tokens.empty()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    scheduler.Shutdown(/*cancel_running=*/true);
    EXPECT_THROW(scheduler.Submit({{1, 4}, Options(5, 0, 0)}, {}), Error);
  }
  EXPECT_TRUE(running.done.get_future().get().cancelled);
  EXPECT_TRUE(queued.done.get_future().get().cancelled);
  EXPECT_TRUE(queued.tokens.empty());
}

}  // namespace
}  // namespace kakeya
