// Lossless speculative decoding (docs/design.md, invariants 1-3): with greedy
// sampling the speculative loop must produce exactly the token ids of plain
// decoding, whatever the drafter proposes, the block size, the thread count,
// and however often sliding-window rings wrap; with temperature > 0 its tokens
// must follow the target's distribution (verifier_test.cc checks that part).
#include "speculative/speculative.h"

#include <algorithm>
#include <chrono>
#include <functional>
#include <iostream>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "base/error.h"
#include "model/context.h"
#include "plain_decoding.h"
#include "speculative/draft_model_drafter.h"
#include "speculative/ngram_drafter.h"
#include "stats_util.h"

namespace kakeya {
namespace {

// A fixture model: "name" in tests/fixtures/models, or "folder/name".
std::string ModelPath(const std::string& name) {
  const std::string relative = name.find('/') == std::string::npos ? "models/" + name : name;
  return std::string(KAKEYA_FIXTURES) + "/" + relative + ".gguf";
}

// Proposes random tokens: almost every draft is rejected.
class RandomDrafter : public Drafter {
 public:
  RandomDrafter(int n_vocab, uint64_t seed) : rng_(seed), any_(0, n_vocab - 1) {}
  std::string name() const override { return "random"; }
  void Begin(std::span<const TokenId>) override {}
  int Draft(const DraftRequest& r, std::span<TokenId> out) override {
    for (int i = 0; i < r.max_tokens; ++i) out[i] = any_(rng_);
    return r.max_tokens;
  }
  void Accept(std::span<const TokenId>, int, int) override {}

 private:
  std::mt19937 rng_;
  std::uniform_int_distribution<TokenId> any_;
};

// Replays the target's own plain output, so every draft is accepted — except
// that every `spoil_every`-th proposal is replaced by a wrong token, to mix
// full and partial acceptance.
class ReplayDrafter : public Drafter {
 public:
  ReplayDrafter(std::vector<TokenId> full, int spoil_every) : full_(std::move(full)), spoil_every_(spoil_every) {}
  std::string name() const override { return "replay"; }
  void Begin(std::span<const TokenId>) override {}
  int Draft(const DraftRequest& r, std::span<TokenId> out) override {
    int n = 0;
    for (size_t pos = r.history.size(); n < r.max_tokens && pos < full_.size(); ++n, ++pos) {
      out[n] = full_[pos];
      if (spoil_every_ > 0 && ++proposals_ % spoil_every_ == 0) out[n] = (out[n] + 1) % 7 + 3;
    }
    return n;
  }
  void Accept(std::span<const TokenId> history, int, int) override {
    for (size_t i = 0; i < history.size() && i < full_.size(); ++i) EXPECT_EQ(history[i], full_[i]);
  }

 private:
  std::vector<TokenId> full_;  // prompt + plain greedy continuation
  int spoil_every_;
  int proposals_ = 0;
};

struct Case {
  std::string model;
  int n_tokens;
};

std::vector<TokenId> PlainGreedy(const Model& model, const std::vector<TokenId>& prompt, int n, int threads) {
  Context ctx(model, ContextOptions{.n_ctx = static_cast<int>(prompt.size()) + n + 1, .max_batch = 16, .n_threads = threads});
  GenerateOptions o;
  o.n_predict = n;
  o.ignore_eos = true;
  o.sampling.temperature = 0;
  return DecodePlainly(ctx, prompt, o, nullptr).tokens;
}

std::vector<TokenId> SpeculativeGreedy(const Model& model, const std::vector<TokenId>& prompt, int n, int threads,
                                       Drafter& drafter, int block, SpecStats* stats) {
  Context ctx(model, ContextOptions{.n_ctx = static_cast<int>(prompt.size()) + n + 1, .max_batch = 16, .n_threads = threads});
  GenerateOptions o;
  o.n_predict = n;
  o.ignore_eos = true;
  o.sampling.temperature = 0;
  SpecOptions s;
  s.block = block;
  return Generate(ctx, &drafter, prompt, o, s, nullptr, stats).tokens;
}

void CheckModel(const std::string& name, int n_tokens, const std::vector<int>& blocks, int threads) {
  const std::unique_ptr<Model> model = Model::Load(ModelPath(name));
  const std::unique_ptr<Model> draft_model = Model::Load(ModelPath("tiny-draft-f32"));  // same vocabulary as all
  const std::vector<TokenId> prompt = model->tokenizer().Encode("Once upon a time, in a land far away,", true, true);
  const std::vector<TokenId> plain = PlainGreedy(*model, prompt, n_tokens, 1);
  ASSERT_EQ(static_cast<int>(plain.size()), n_tokens);
  std::vector<TokenId> full = prompt;
  full.insert(full.end(), plain.begin(), plain.end());

  const int t = threads;
  {
    for (int block : blocks) {
      SCOPED_TRACE(name + " threads " + std::to_string(t) + " block " + (block == 0 ? "adaptive" : std::to_string(block)));
      RandomDrafter random(model->hparams().n_vocab, 1000 + block);
      SpecStats rs;
      EXPECT_EQ(SpeculativeGreedy(*model, prompt, n_tokens, t, random, block, &rs), plain) << "random drafter";

      ReplayDrafter perfect(full, 0);
      SpecStats ps;
      EXPECT_EQ(SpeculativeGreedy(*model, prompt, n_tokens, t, perfect, block, &ps), plain) << "perfect drafter";
      if (block > 1) {
        // Every draft of the perfect drafter is accepted: block - 1 per step
        // (the last steps may be shorter near the end of the budget).
        EXPECT_EQ(ps.accepted, ps.drafted);
        EXPECT_GE(ps.mean_accept_len(), std::min<double>(block, 1.5));
      }

      ReplayDrafter spoiled(full, 5);
      EXPECT_EQ(SpeculativeGreedy(*model, prompt, n_tokens, t, spoiled, block, nullptr), plain) << "spoiled drafter";

      NgramDrafter ngram(NgramOptions{.n_ctx = static_cast<int>(full.size()) + 1});
      EXPECT_EQ(SpeculativeGreedy(*model, prompt, n_tokens, t, ngram, block, nullptr), plain) << "ngram drafter";

      DraftModelOptions d;
      d.n_ctx = static_cast<int>(full.size()) + 1;
      d.n_threads = t;
      DraftModelDrafter draft(*model, *draft_model, d);
      EXPECT_EQ(SpeculativeGreedy(*model, prompt, n_tokens, t, draft, block, nullptr), plain) << "draft model";
    }
  }
}

// Every fixture model, a spread of block sizes, short generations: 120
// tokens, 72 under AddressSanitizer (scripts/test.sh's ASan + UBSan build, where
// this suite is half the run time). There the question is memory errors on the
// same paths, and 72 tokens after the ~12-token prompt still cross the first
// wrap of the 48-row rings (window 32 + 16) by more than the largest block, so
// every block size verifies, rolls back and commits across the wrap with every
// drafter; the Release suite checks the 120 tokens.
#if defined(__SANITIZE_ADDRESS__)
constexpr int kFixtureTokens = 72;
#else
constexpr int kFixtureTokens = 120;
#endif

class SpeculativeLossless : public ::testing::TestWithParam<std::string> {};

TEST_P(SpeculativeLossless, GreedyTokensEqualPlainDecoding) {
  CheckModel(GetParam(), kFixtureTokens, {1, 2, 3, 5, 8, 16, 0}, 1);
}

INSTANTIATE_TEST_SUITE_P(Fixtures, SpeculativeLossless,
                         ::testing::Values("tiny-llama-f32", "tiny-llama-f16", "tiny-llama-bf16", "tiny-llama-q8_0",
                                           "tiny-llama-q6_k", "tiny-llama-q4_k_m", "tiny-llama-q4_0", "tiny-qwen3-f32",
                                           "tiny-draft-f32", "tiny-gemma2-f32", "tiny-gemma3-f32",
                                           // Gemma 4 (sliding window 32, ring of 32 + 16 rows), and
                                           // mixtures: a verify batch shares experts between rows.
                                           "models2/g4moe-f32", "models2/g4moe-q8_0", "models2/g4dense-f32",
                                           "models2/q3moe-f16", "models2/q3moe-q8_0", "models2/glm4moe-mtp-f32"),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           std::string n = info.param.substr(info.param.find('/') + 1);
                           for (char& c : n) c = std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
                           return n;
                         });

// Many sliding-window wraps in CI's time: tiny-gemma3's window of 32 lives in
// a ring of 32 + 16 rows (max_batch), so 600 tokens wrap it 12 times. Where a
// verify batch meets the wrap depends on the block size modulo 48: block 4
// divides 48 (batches meet the wrap at their edges), 7 and 11 are coprime to
// 48, so over lcm(7, 48) = 336 and lcm(11, 48) = 528 tokens their batches
// straddle the wrap at every offset, and the random and spoiled drafters'
// partial acceptances shift the phase further; 16 is the largest block (the
// ring's whole slack) and 0 the adaptive one. The other block sizes take the
// same paths at phases these already meet. 2 threads: {3, 16, adaptive}. The
// sweep of every block size over 2,000 tokens is
// SpeculativeLosslessSweep.LongGenerationsAcrossRingWrapsAllBlockSizes
// (scripts/test.sh --slow).
TEST(SpeculativeLosslessSlow, RingWrapsRepresentativeBlockSizes) {
  CheckModel("tiny-gemma3-f32", 600, {4, 7, 11, 16, 0}, 1);
  CheckModel("tiny-gemma3-f32", 600, {3, 16, 0}, 2);
}

// Long generations across many sliding-window wraps, every block size 1..16
// and adaptive, 1 and 2 threads (about 3.5 min: scripts/test.sh --slow, not CI).
TEST(SpeculativeLosslessSweep, LongGenerationsAcrossRingWrapsAllBlockSizes) {
  std::vector<int> blocks;
  for (int b = 1; b <= 16; ++b) blocks.push_back(b);
  blocks.push_back(0);
  CheckModel("tiny-gemma3-f32", 2000, blocks, 1);
  CheckModel("tiny-gemma3-f32", 2000, {3, 16, 0}, 2);
}

// The cost line's slope: where the rows vary, the measured one; where they
// hardly vary (a server full of plain rows, drafting now and then), timing
// noise cannot tell it, and it stays near the prior (a tenth of a step per
// row) instead of tilting to nearly free rows.
// `--spec none` and the server's plain requests run the decode loop without
// a drafter: the same tokens, top logits and stop reason as the reference
// loop, greedy and seeded, to the end of the budget and to a full context.
TEST(PlainDecoding, TheLoopWithoutADrafterIsTheReferenceLoop) {
  const std::unique_ptr<Model> model = Model::Load(ModelPath("tiny-gemma3-f32"));
  const std::vector<TokenId> prompt = model->tokenizer().Encode("Once upon a time, in a land far away,", true, true);
  for (const float temperature : {0.0f, 0.8f}) {
    for (const int n_ctx : {static_cast<int>(prompt.size()) + 80, static_cast<int>(prompt.size()) + 30}) {
      SCOPED_TRACE("temperature " + std::to_string(temperature) + " n_ctx " + std::to_string(n_ctx));
      Context ctx(*model, ContextOptions{.n_ctx = n_ctx, .max_batch = 16, .n_threads = 2});
      GenerateOptions o;
      o.n_predict = 60;
      o.ignore_eos = true;
      o.n_top = 3;
      o.sampling.temperature = temperature;
      o.sampling.seed = 5;
      const GenerateResult loop = Generate(ctx, nullptr, prompt, o, SpecOptions{}, nullptr, nullptr);
      const GenerateResult reference = DecodePlainly(ctx, prompt, o, nullptr);
      EXPECT_EQ(loop.tokens, reference.tokens);
      EXPECT_EQ(loop.stop, reference.stop);
      ASSERT_EQ(loop.top.size(), reference.top.size());
      for (size_t i = 0; i < loop.top.size(); ++i) {
        for (int j = 0; j < o.n_top; ++j) {
          EXPECT_EQ(loop.top[i][j].id, reference.top[i][j].id) << i;
          EXPECT_EQ(loop.top[i][j].logit, reference.top[i][j].logit) << i;
        }
      }
    }
  }
}

TEST(StepCost, RowCostFollowsVaryingRowsAndKeepsThePriorWhereTheyDoNot) {
  StepCost varying;
  for (int i = 0; i < 200; ++i) varying.Observe(i % 8, 40.0 + 0.5 * (i % 8));  // 0.5 ms per row
  EXPECT_GT(varying.RowMs(), 0.25);
  EXPECT_LT(varying.RowMs(), 0.03 * 40.0) << "rows that vary by +-2.3 must outweigh the prior";
  EXPECT_NEAR(varying.PlainMs(3), 41.5, 1.0);  // the line goes through the data's middle

  StepCost flat;  // 8 rows, one more every tenth step, with +-3 ms of noise that
  for (int i = 0; i < 200; ++i) {  // happens to favour the wider steps
    const int extra = 7 + (i % 10 == 0);
    flat.Observe(extra, 48.0 + (i % 10 == 0 ? -1.0 : (i % 2 ? 3.0 : -3.0)));
  }
  EXPECT_GT(flat.RowMs(), 0.05 * 48.0) << "a handful of wider steps made rows look free";
  EXPECT_LT(flat.RowMs(), 0.2 * 48.0);
}

TEST(Speculative, RejectsBadBlockSizes) {
  const std::unique_ptr<Model> model = Model::Load(ModelPath("tiny-draft-f32"));
  Context ctx(*model, ContextOptions{.n_ctx = 64, .max_batch = 16, .n_threads = 1});
  RandomDrafter d(model->hparams().n_vocab, 1);
  const std::vector<TokenId> prompt = {1, 450};
  GenerateOptions o;
  o.n_predict = 4;
  for (int block : {-1, 17, 1000}) {
    SpecOptions s;
    s.block = block;
    EXPECT_THROW(Generate(ctx, &d, prompt, o, s, nullptr, nullptr), Error) << block;
  }
}

// Proposes random tokens and spends `upkeep_ms` in every Observe, as a
// drafter that reads the target pays on every committed token.
class CostlyRandomDrafter : public RandomDrafter {
 public:
  CostlyRandomDrafter(int n_vocab, double upkeep_ms) : RandomDrafter(n_vocab, 5), upkeep_ms_(upkeep_ms) {}
  void Observe(const Context&, int) override {
    ++observed;
    const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double, std::milli>(upkeep_ms_);
    while (std::chrono::steady_clock::now() < until) {
    }
  }
  int observed = 0;

 private:
  double upkeep_ms_;
};

// A drafter whose upkeep costs more than its drafts save is parked for the
// rest of the request: no more drafts and no more upkeep, and the output
// stays the plain output. One whose drafts pay is never parked.
TEST(Speculative, ParksADrafterWhoseUpkeepDoesNotPay) {
  const std::unique_ptr<Model> model = Model::Load(ModelPath("tiny-llama-f32"));
  const std::vector<TokenId> prompt = {1, 450, 4996, 1735};
  constexpr int kTokens = 120;
  const std::vector<TokenId> plain = PlainGreedy(*model, prompt, kTokens, 1);
  GenerateOptions o;
  o.n_predict = kTokens;
  o.ignore_eos = true;
  o.sampling.temperature = 0;

  Context ctx(*model, ContextOptions{.n_ctx = 256, .max_batch = 16, .n_threads = 1});
  CostlyRandomDrafter costly(model->hparams().n_vocab, 2.0);  // a tiny model's step is ~0.1 ms
  StepCost cost;
  SpeculativeDecoder decoder(ctx, &costly, SpecOptions{}, cost);
  std::vector<TokenId> got;
  decoder.Start(prompt, o, [&](TokenId t, std::span<const float>) {
    got.push_back(t);
    return true;
  });
  while (!decoder.finished()) {
    const SequenceRows rows = decoder.Plan(16, {});
    const auto t0 = std::chrono::steady_clock::now();
    ctx.Forward(rows.tokens, rows.all_logits);
    const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    if (!decoder.prefilling()) cost.Observe(static_cast<int>(rows.tokens.size()) - 1, ms);
    decoder.Apply(ms);
  }
  EXPECT_EQ(got, plain);
  EXPECT_TRUE(decoder.drafter_parked());
  EXPECT_LT(costly.observed, kTokens / 3) << "the upkeep went on after parking";

  std::vector<TokenId> full = prompt;
  full.insert(full.end(), plain.begin(), plain.end());
  ReplayDrafter paying(full, 0);
  SpeculativeDecoder keeps(ctx, &paying, SpecOptions{}, cost);
  keeps.Start(prompt, o, nullptr);
  while (!keeps.finished()) {
    const SequenceRows rows = keeps.Plan(16, {});
    ctx.Forward(rows.tokens, rows.all_logits);
    keeps.Apply(0.1);
  }
  EXPECT_FALSE(keeps.drafter_parked());
  EXPECT_EQ(keeps.result().tokens, plain);
}

// Beside 7 other sequences in a compute-bound forward (each row 6 ms of a
// 48 ms step), a draft costs every sequence of the step its row's time, so
// drafts that are never accepted are not proposed, and the probes that look
// for acceptance again take at most ~2% of the step (3% allowed: the cost
// line is fitted, not told) when all 8 sequences probe alike (a probe every
// 8 plain steps each had made it 12.5%).
TEST(Speculative, ProbesBesideOtherSequencesStayWithinTheirShareOfTheStep) {
  const std::unique_ptr<Model> model = Model::Load(ModelPath("tiny-llama-f32"));
  const std::vector<TokenId> prompt = {1, 450, 4996, 1735};
  constexpr int kTokens = 400;
  GenerateOptions o;
  o.n_predict = kTokens;
  o.ignore_eos = true;
  o.sampling.temperature = 0;
  Context ctx(*model, ContextOptions{.n_ctx = 512, .max_batch = 16, .n_threads = 1});
  constexpr double kRowMs = 6.0;
  StepCost cost;
  for (int i = 0; i < 20; ++i) cost.Observe(7 + i % 2, kRowMs * (8 + i % 2));
  RandomDrafter random(model->hparams().n_vocab, 7);
  SpeculativeDecoder decoder(ctx, &random, SpecOptions{}, cost);
  decoder.Start(prompt, o, nullptr);
  while (!decoder.finished()) {
    const SequenceRows rows = decoder.Plan(16, StepLoad{.rows = 7, .tokens = 7});
    ctx.Forward(rows.tokens, rows.all_logits);
    decoder.Apply(kRowMs * (7 + static_cast<int>(rows.tokens.size())));
  }
  EXPECT_EQ(decoder.result().tokens, PlainGreedy(*model, prompt, kTokens, 1));
  const SpecStats& s = decoder.stats();
  ASSERT_GT(s.steps, kTokens / 2);
  EXPECT_GT(s.drafted, 0) << "no probes: drafting could never resume";
  constexpr int kSequences = 8;  // this one and the 7 others of StepLoad
  const double probe_rows_per_step = kSequences * double(s.drafted) / s.steps;
  const double probe_share = probe_rows_per_step * kRowMs / (kSequences * kRowMs);
  EXPECT_LE(probe_share, 0.03) << s.drafted << " probes in " << s.steps << " steps";
}

// Synthetic acceptance (benchmarking only): whatever the drafter proposes,
// steps commit the requested mean number of tokens, within 10%.
TEST(Speculative, SyntheticAcceptanceHitsTheRequestedMean) {
  const std::unique_ptr<Model> model = Model::Load(ModelPath("tiny-llama-f32"));
  const std::vector<TokenId> prompt = {1, 450, 4996, 1735};
  Context ctx(*model, ContextOptions{.n_ctx = 640, .max_batch = 16, .n_threads = 1});
  GenerateOptions o;
  o.n_predict = 500;
  o.ignore_eos = true;
  for (const auto& [block, tau] : std::vector<std::pair<int, double>>{{4, 3.0}, {8, 5.0}, {8, 1.5}}) {
    RandomDrafter random(model->hparams().n_vocab, 3);
    SpecStats stats;
    Generate(ctx, &random, prompt, o, SpecOptions{.block = block, .synthetic_accept = tau, .synthetic_seed = 9},
                        nullptr, &stats);
    EXPECT_NEAR(stats.mean_accept_len(), tau, 0.1 * tau) << "block " << block;
  }
  RandomDrafter random(model->hparams().n_vocab, 3);
  for (const SpecOptions& bad : {SpecOptions{.block = 4, .synthetic_accept = 4.5}, SpecOptions{.block = 0, .synthetic_accept = 2},
                                 SpecOptions{.block = 4, .synthetic_accept = 0.5}}) {
    EXPECT_THROW(Generate(ctx, &random, prompt, o, bad, nullptr, nullptr), Error);
  }
}

// --- Sampling: the speculative loop's tokens follow the target's distribution --

int g_top_k = 4;  // the filter of the test at hand: small, so paths can be enumerated

SamplingParams TestSampling(uint64_t seed) {
  SamplingParams p;
  p.temperature = 1.3f;
  p.top_k = g_top_k;
  p.top_p = 1.0f;
  p.min_p = 0.0f;
  p.seed = seed;
  return p;
}

// The exact distribution of the generated tokens at index 1 and 2, by
// enumerating every path the filtered target distribution allows.
void ExactMarginals(const Model& model, const std::vector<TokenId>& prompt, std::vector<double>& at1,
                    std::vector<double>& at2) {
  const int n_vocab = model.hparams().n_vocab;
  Context ctx(model, ContextOptions{.n_ctx = 256, .max_batch = 64, .n_threads = 1});
  Sampler sampler(TestSampling(0), n_vocab);
  auto dist_after = [&](const std::vector<TokenId>& tokens) {
    ctx.Clear();
    ctx.Forward(tokens, false);
    std::vector<float> p(n_vocab);
    sampler.Distribution(ctx.logits(0), {}, p);
    return p;
  };
  at1.assign(n_vocab, 0);
  at2.assign(n_vocab, 0);
  const std::vector<float> p0 = dist_after(prompt);
  for (TokenId x = 0; x < n_vocab; ++x) {
    if (p0[x] <= 0) continue;
    std::vector<TokenId> px = prompt;
    px.push_back(x);
    const std::vector<float> p1 = dist_after(px);
    for (TokenId y = 0; y < n_vocab; ++y) {
      if (p1[y] <= 0) continue;
      at1[y] += double(p0[x]) * p1[y];
      std::vector<TokenId> pxy = px;
      pxy.push_back(y);
      const std::vector<float> p2 = dist_after(pxy);
      for (TokenId z = 0; z < n_vocab; ++z) at2[z] += double(p0[x]) * p1[y] * p2[z];
    }
  }
}

// Chi-square p-value with the categories whose expected count is below 5 pooled.
double PooledPValue(const std::vector<int>& counts, const std::vector<double>& probs) {
  std::vector<int> c;
  std::vector<double> p;
  int small_count = 0;
  double small_prob = 0;
  const double n = std::accumulate(counts.begin(), counts.end(), 0.0);
  for (size_t i = 0; i < counts.size(); ++i) {
    if (probs[i] == 0) {
      EXPECT_EQ(counts[i], 0) << "token " << i << " cannot occur but was generated";
      continue;
    }
    if (probs[i] * n < 5) {
      small_count += counts[i];
      small_prob += probs[i];
    } else {
      c.push_back(counts[i]);
      p.push_back(probs[i]);
    }
  }
  if (small_prob > 0) {
    c.push_back(small_count);
    p.push_back(small_prob);
  }
  return GoodnessOfFitPValue(c, p);
}

// Per verifier: 2,000 seeds of speculative sampling against the exact
// marginals. Under match verification each run also equals plain sampling
// with the same seed, token for token.
void CheckSampledDistribution(const Model& target, const std::vector<TokenId>& prompt,
                              const std::function<std::unique_ptr<Drafter>(const SamplingParams&)>& make_drafter,
                              SampledVerify verify) {
  std::vector<double> at1, at2;
  ExactMarginals(target, prompt, at1, at2);
  const int n_vocab = target.hparams().n_vocab;
  std::vector<int> count1(n_vocab), count2(n_vocab);
  Context ctx(target, ContextOptions{.n_ctx = 256, .max_batch = 16, .n_threads = 1});
  constexpr int kRuns = 2000;
  int drafted = 0, accepted = 0;
  for (int seed = 0; seed < kRuns; ++seed) {
    GenerateOptions o;
    o.n_predict = 3;
    o.ignore_eos = true;
    o.sampling = TestSampling(seed);
    std::unique_ptr<Drafter> drafter = make_drafter(o.sampling);
    SpecStats stats;
    const GenerateResult r =
        Generate(ctx, drafter.get(), prompt, o, SpecOptions{.block = 3, .verify = verify}, nullptr, &stats);
    ASSERT_EQ(r.tokens.size(), 3u);
    if (verify == SampledVerify::kMatch) {
      ASSERT_EQ(r.tokens, DecodePlainly(ctx, prompt, o, nullptr).tokens) << seed;
    }
    ++count1[r.tokens[1]];
    ++count2[r.tokens[2]];
    drafted += stats.drafted;
    accepted += stats.accepted;
  }
  EXPECT_GT(drafted, kRuns / 2) << "the drafter must actually propose";
  EXPECT_GT(accepted, 0) << "some proposals must be accepted";
  EXPECT_GT(PooledPValue(count1, at1), 0.001) << "token 1";
  EXPECT_GT(PooledPValue(count2, at2), 0.001) << "token 2";
  std::cout << "[sampled] drafted " << drafted << ", accepted " << accepted << " over " << kRuns << " runs\n";
}

void CheckSampledDistribution(const Model& target, const std::vector<TokenId>& prompt,
                              const std::function<std::unique_ptr<Drafter>(const SamplingParams&)>& make_drafter) {
  for (SampledVerify verify : {SampledVerify::kMatch, SampledVerify::kRejection}) {
    SCOPED_TRACE(verify == SampledVerify::kMatch ? "match" : "rejection");
    CheckSampledDistribution(target, prompt, make_drafter, verify);
  }
}

TEST(SpeculativeSamplingSlow, DraftModelKeepsTheTargetDistribution) {
  // The fixture draft model is unrelated to the target (random weights), so its
  // proposals would all be rejected. Drafting with the target itself at a
  // higher temperature gives a q that overlaps p without equalling it, so both
  // the accept and the residual paths run.
  const std::unique_ptr<Model> target = Model::Load(ModelPath("tiny-llama-f32"));
  const std::vector<TokenId> prompt = target->tokenizer().Encode("The quick brown fox", true, true);
  CheckSampledDistribution(*target, prompt, [&](const SamplingParams& sampling) {
    DraftModelOptions o;
    o.n_ctx = 256;
    o.n_threads = 1;
    o.sampling = sampling;
    o.sampling.temperature = 2.5f;
    return std::make_unique<DraftModelDrafter>(*target, *target, o);
  });
}

TEST(SpeculativeSamplingSlow, NgramDrafterKeepsTheTargetDistribution) {
  const std::unique_ptr<Model> target = Model::Load(ModelPath("tiny-llama-f32"));
  // The fox prompt and the first 12 tokens of the model's greedy continuation
  // (from the llama.cpp fixture), which has started to loop (5362 5082 5362):
  // its next tokens have occurred before and prompt lookup finds them.
  g_top_k = 40;  // prompt lookup proposes tokens outside a top-4, which would all be rejected
  std::vector<TokenId> prompt = {1, 450, 4996, 3347, 113, 1701, 123, 4579, 1828, 6325, 440, 1091, 642, 5362, 2424, 2967,
                                 5362, 5082, 5362};
  CheckSampledDistribution(*target, prompt, [&](const SamplingParams&) {
    return std::make_unique<NgramDrafter>(NgramOptions{.n_ctx = 256});
  });
  g_top_k = 4;
}

}  // namespace
}  // namespace kakeya
