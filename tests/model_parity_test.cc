// End-to-end parity with llama.cpp on the tiny random models of
// tests/fixtures/models: tokenization, logits at every prompt position, and a
// teacher-forced greedy generation, following the fixture README's "How to
// compare" procedure and "Suggested tolerances".
//
// Each model's measured errors are printed as one "[parity]" summary line
// (visible in `ctest -V`) and recorded as a test property.

#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <iomanip>
#include <iostream>
#include <memory>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "base/error.h"
#include "fixture_util.h"
#include "model/context.h"
#include "model/model.h"

namespace kakeya {
namespace {

using fixture::ErrorSeries;
using fixture::RefLogits;

struct ModelCase {
  const char* model;
  // Max |logit - reference| for an engine computing in F32 with an F32 KV cache
  // (README "Suggested tolerances"). Quantized weights: the engine quantizes
  // activations as llama.cpp does (Q8_0 / Q8_K blocks), so the "with emulation"
  // figures apply; F16/BF16 weights keep F32 activations. Emulation must be
  // exact down to the F16 rounding of the Q8_0 block scale: a float64 forward
  // pass that keeps that scale in F32 is off by ~0.2 at the median position.
  double tol;
  // Quantized models with emulated activation rounding also agree to ~2e-6 at
  // most positions of the short prompts; only a rare int8 rounding flip makes
  // the max large. The median per-position error catches a wrong kernel that a
  // 0.6 max would let through.
  bool check_median;
  // The reference file. F16: llama.cpp's AVX512-FP16 build accumulates the
  // single-row F16 dot product in F16, so its generation steps carry 0.036 of
  // extra error; the "nofp16" file (F32 accumulation, like ours) has identical
  // prompt ids, prompt_steps and generated ids, so it serves for everything.
  const char* ref_suffix = ".logits.json";
  const char* folder = "models";  // fixture folder (fixture_util.h)
  // Mixtures of experts: a router margin below which the two engines'
  // rounding may choose different experts (RunPrompt replays the
  // reference's choice there). In the router's probability units.
  double routing_tie = 0;
  // Positions from kSettled on, where the model amplifies rounding noise
  // (below): this tolerance instead of tol; 0 means tol.
  double late_tol = 0;
};

// Gemma 4's fixtures amplify rounding noise: ggml's F16 GELU table turns a
// 1e-7 input change into a whole F16 step, and the sharp attention (scale 1,
// normed q and k) carries it on. Measured by gemma4_reference_test: a float64
// forward with the same GELU table is within 1e-2 of llama.cpp on the first 16
// positions and up to 9e-2 later (g4moe wrap), and rounding that reference's
// activations to float32 alone moves its logits by up to 0.15. So from
// position 16 on, gemma4 F32 gets 0.15. The Q8_0 mixture amplifies far more:
// one int8 rounding flip of an activation (the engines' float sums differ in
// the last bit) moves the logits by ~0.5 at once (g4moe-q8_0 fox, position 11;
// every earlier position within 3e-6 of llama.cpp), and from there the two
// trajectories part; its later positions are not comparable, and are not
// compared. q3moe-f16: llama.cpp rounds F16 weights' activations to F16 and,
// on single-row steps, sums in F16 (no nofp16 file here; the tiny llama
// measured 2.6e-2 of that), and routing amplifies it: 0.1 from position 16.
constexpr int kSettled = 16;

constexpr double kMedianTol = 1e-3;  // README: < 1e-3 with emulation, short prompts
// Generation steps of the short prompts: 64 teacher-forced steps after the
// prompt give an int8 rounding flip (a 1e-7 difference in an activation that
// sits on a rounding boundary) many chances to happen, and once it does it
// spreads to every later step through attention, as the README describes for
// the long prompt. So the steps get the README's bound for an engine whose
// activations differ from ggml's at all (< 0.3); the prompt positions keep 1e-3.
constexpr double kStepsMedianTol = 0.3;

const ModelCase kCases[] = {
    {"tiny-llama-f32", 1e-3, false},
    {"tiny-llama-f16", 5e-2, false, ".logits-nofp16.json"},
    {"tiny-llama-bf16", 0.4, false},
    {"tiny-llama-q8_0", 0.6, true},
    {"tiny-llama-q6_k", 0.6, true},
    {"tiny-llama-q4_k_m", 0.6, true},
    {"tiny-llama-q4_0", 0.6, true},
    {"tiny-qwen3-f32", 1e-3, false},
    {"tiny-draft-f32", 1e-3, false},
    // Gemma: 1e-2, as ggml's F16 GELU table differs from the exact tanh GELU by
    // up to 6e-3 (README). Skipped while Model::Load refuses the architecture.
    {"tiny-gemma2-f32", 1e-2, false},
    {"tiny-gemma3-f32", 1e-2, false},
    // The architectures of fixtures/models2: gemma4 shaped like
    // Gemma-4-26B-A4B (mixture) and 31B (dense), qwen3moe, glm4moe.
    {"g4moe-f32", 1e-2, false, ".logits.json", "models2", 1e-3, 0.15},
    {"g4moe-q8_0", 0.6, false, ".logits.json", "models2", 2e-2, INFINITY},
    {"g4dense-f32", 1e-2, false, ".logits.json", "models2", 0, 0.15},
    {"q3moe-f16", 5e-2, false, ".logits.json", "models2", 2e-2, 0.1},
    {"q3moe-q8_0", 0.6, true, ".logits.json", "models2", 2e-2},
    {"glm4moe-mtp-f32", 1e-3, false, ".logits.json", "models2", 1e-3},
    // fixtures/models3: deepseek4 with every compression ratio, hash-routed layers
    // and an MTP block; `long` (395 tokens and 64 steps) fills 3 blocks of 128 and
    // 114 of 4 (the indexer picks 8) and wraps the 32-position raw window 14 times.
    {"ds4-f32", 1e-3, false, ".logits.json", "models3", 1e-3},
    // Its Q8_0 twin is compared on its first 16 positions, as g4moe-q8_0: besides
    // the int8 rounding flips, the lightning indexer's top-k has near-ties
    // (1.4e-4 apart at long's position 285, 1.8e-4 at fox's 45) that such noise
    // decides either way, and a different block set moves the logits by units.
    {"ds4-q8_0", 0.6, false, ".logits.json", "models3", 2e-2, INFINITY},
    // fixtures/models4: qwen35 and qwen35moe, Gated DeltaNet layers around gated
    // attention; `wrap` runs 1,098 positions through the recurrent state. The
    // two engines sum the delta rule's products in different orders, and a
    // state that carries every earlier token carries that noise too: the F32
    // files stay within 1e-3 (median 3e-5) except late in wrap's 1,000 steps,
    // where it reached 1.5e-3 (dense) and 3.3e-3 (the mixture's routing adds to it).
    {"qwen35-f32", 1e-3, false, ".logits.json", "models4", 0, 5e-3},
    {"qwen35moe-f32", 1e-3, false, ".logits.json", "models4", 1e-3, 5e-3},
    // Q8_0 agrees to 2e-6 until an int8 rounding flip, which the state then
    // carries to every later position: compared on the first 16, as g4moe-q8_0.
    {"qwen35-q8_0", 0.6, false, ".logits.json", "models4", 0, INFINITY},
    {"qwen35moe-q8_0", 0.6, false, ".logits.json", "models4", 2e-2, INFINITY},
};

// gtest prints a failing parameter with this (instead of its bytes).
void PrintTo(const ModelCase& c, std::ostream* out) { *out << c.model; }

std::vector<std::string> PromptsOf(const ModelCase& c) {
  const std::string_view model = c.model;
  if (model.find("gemma") != std::string_view::npos || std::string_view(c.folder) != "models") {
    return {"fox", "fib", "long", "wrap"};
  }
  return {"fox", "fib", "long"};
}

// Measured figures of one prompt.
struct PromptResult {
  ErrorSeries prompt;  // prompt_steps, one per prompt position
  ErrorSeries steps;   // generation steps, teacher-forced
  int greedy_compared = 0;
  int greedy_agreed = 0;
  int routing_replayed = 0;  // positions that took the reference's choice at a router near-tie
};

std::string Sci(double v) {
  std::ostringstream out;
  out << std::scientific << std::setprecision(1) << v;
  return out.str();
}

// One more token through a mixture model, one row: where a router's margin
// is below c.routing_tie, the two engines' rounding may pick different
// experts, and from then on every later position attends to a different
// state (a near-tie decided differently is what a logit margin is to greedy
// decoding: the fixture README's teacher forcing, for experts). So each
// near-tie's runner-up is tried too, and the variant whose logits are nearest
// the reference's is kept: the reference's own choice. Returns the logits;
// counts the positions that took a runner-up.
std::vector<float> ForwardReplayingRouting(Context& ctx, const ModelCase& c, TokenId token,
                                           const fixture::RefStep& ref, int* replayed) {
  const int n_layer = ctx.model().hparams().n_layer;
  ctx.Forward({&token, 1}, /*all_logits=*/false);
  std::vector<float> best(ctx.logits(0).begin(), ctx.logits(0).end());
  std::vector<int> ties;  // layers whose router nearly tied, closest first, at most 4
  for (int il = 0; il < n_layer; ++il) {
    if (ctx.routing_margin(il, 0) < c.routing_tie) ties.push_back(il);
  }
  std::sort(ties.begin(), ties.end(), [&](int a, int b) { return ctx.routing_margin(a, 0) < ctx.routing_margin(b, 0); });
  ties.resize(std::min<size_t>(ties.size(), 4));
  double best_error = fixture::CompareStep(best, ref).logit;
  unsigned best_variant = 0, last_run = 0;
  for (unsigned variant = 1; variant < (1u << ties.size()); ++variant) {
    ctx.Trim(1);
    for (size_t t = 0; t < ties.size(); ++t) {
      if (variant & (1u << t)) ctx.TakeRunnerUpExpert(ties[t], 0);
    }
    ctx.Forward({&token, 1}, /*all_logits=*/false);
    last_run = variant;
    const double error = fixture::CompareStep(ctx.logits(0), ref).logit;
    if (error < best_error) {
      best_error = error;
      best_variant = variant;
      best.assign(ctx.logits(0).begin(), ctx.logits(0).end());
    }
  }
  if (best_variant != last_run) {  // the cache must hold the kept variant
    ctx.Trim(1);
    for (size_t t = 0; t < ties.size(); ++t) {
      if (best_variant & (1u << t)) ctx.TakeRunnerUpExpert(ties[t], 0);
    }
    ctx.Forward({&token, 1}, /*all_logits=*/false);
  }
  if (best_variant != 0) ++*replayed;
  ctx.Commit();
  return best;
}

double ToleranceAt(const ModelCase& c, int pos) { return pos >= kSettled && c.late_tol > 0 ? c.late_tol : c.tol; }

PromptResult RunPrompt(const Model& model, const ModelCase& c, const std::string& prompt) {
  const RefLogits ref = fixture::LoadRefLogits(c.model, prompt, c.ref_suffix, c.folder);
  PromptResult r;
  // Each position's logits and logsumexp within its tolerance; the first
  // miss of each series is reported.
  auto record = [&](ErrorSeries& series, const char* what, int pos, const fixture::StepError& e) {
    const bool first_miss = series.logit.size() == static_cast<size_t>(series.misses);
    series.Add(e);
    const double tol = ToleranceAt(c, pos);
    if (e.logit <= tol && e.logsumexp <= tol) return;
    if (series.misses++ == 0 || first_miss) {
      ADD_FAILURE() << what << " at position " << pos << ": |dlogit| " << e.logit << " (token " << e.worst_id
                    << "), |dlogsumexp| " << e.logsumexp << ", tolerance " << tol;
    }
  };

  EXPECT_EQ(model.tokenizer().Encode(ref.prompt, true, true), ref.prompt_ids)
      << "tokenization of '" << ref.prompt << "'";

  // The reference ids drive the forward pass, so a tokenizer mismatch does not
  // hide the logits comparison.
  const int n_prompt = static_cast<int>(ref.prompt_ids.size());
  Context ctx(model, ContextOptions{.n_ctx = 2048, .max_batch = 512, .n_threads = 2});
  std::vector<float> last;
  if (c.routing_tie > 0) {
    // One row at a time, to replay routing near-ties (the batched path gives
    // the same bits: batch_invariance_test).
    for (int i = 0; i < n_prompt; ++i) {
      last = ForwardReplayingRouting(ctx, c, ref.prompt_ids[i], ref.prompt_steps[i], &r.routing_replayed);
      record(r.prompt, "prompt", i, fixture::CompareStep(last, ref.prompt_steps[i]));
    }
  } else {
    ctx.Forward(ref.prompt_ids, /*all_logits=*/true);
    EXPECT_EQ(ctx.n_logit_rows(), n_prompt);
    for (int i = 0; i < n_prompt; ++i) {
      record(r.prompt, "prompt", i, fixture::CompareStep(ctx.logits(i), ref.prompt_steps[i]));
    }
    last.assign(ctx.logits(n_prompt - 1).begin(), ctx.logits(n_prompt - 1).end());
  }

  // steps[0] is the prediction after the whole prompt (the last prompt row);
  // steps[i] follows generated_ids[i - 1], fed one token at a time.
  const int n_steps = static_cast<int>(ref.steps.size());
  for (int i = 0; i < n_steps; ++i) {
    if (i > 0) {
      const TokenId tok = ref.generated_ids[i - 1];
      if (c.routing_tie > 0) {
        last = ForwardReplayingRouting(ctx, c, tok, ref.steps[i], &r.routing_replayed);
      } else {
        ctx.Forward({&tok, 1}, /*all_logits=*/false);
        last.assign(ctx.logits(0).begin(), ctx.logits(0).end());
      }
    }
    const fixture::RefStep& step = ref.steps[i];
    const int pos = n_prompt - 1 + i;  // the row whose logits these are
    record(r.steps, "generation step", pos, fixture::CompareStep(last, step));
    // A greedy pick is only meaningful where our error cannot flip the order.
    if (step.top[0].second - step.top[1].second > 2 * ToleranceAt(c, pos)) {
      ++r.greedy_compared;
      const int ours = fixture::Argmax<float>(last);
      if (ours == step.argmax) {
        ++r.greedy_agreed;
      } else {
        ADD_FAILURE() << "greedy step " << i << ": ours " << ours << ", reference " << step.argmax
                      << " (margin " << step.top[0].second - step.top[1].second << ")";
      }
    }
  }

  // The median checks apply to the short prompts only: on `long` (395
  // tokens) one int8 rounding flip spreads through attention to many later
  // positions. `wrap` (98) keeps the steps' bound but not the prompt's 1e-3:
  // where its first flip falls depends on the platform's last bits
  // (q3moe-q8_0: prompt median 1.9e-6 on x86, 8.1e-2 under qemu-aarch64,
  // whose flip comes earlier, while fox and fib are 1.9e-6 on both).
  if (c.check_median && prompt != "long") {
    if (prompt != "wrap") {
      EXPECT_LT(r.prompt.median(), kMedianTol) << "prompt positions median";
    }
    EXPECT_LT(r.steps.median(), kStepsMedianTol) << "generation steps median";
  }
  return r;
}

class ModelParityTest : public ::testing::TestWithParam<ModelCase> {};

TEST_P(ModelParityTest, MatchesLlamaCpp) {
  const ModelCase& c = GetParam();
  const std::unique_ptr<Model> model = Model::Load(fixture::ModelPath(c.model, c.folder));

  std::ostringstream summary;
  summary << c.model << " (tol " << c.tol << "): max |dlogit| vs llama.cpp";
  for (const std::string& prompt : PromptsOf(c)) {
    SCOPED_TRACE(std::string(c.model) + " / " + prompt);
    const PromptResult r = RunPrompt(*model, c, prompt);
    summary << " | " << prompt << ": prompt " << Sci(r.prompt.max_logit) << " (median "
            << Sci(r.prompt.median()) << ", lse " << Sci(r.prompt.max_logsumexp) << "), steps "
            << Sci(r.steps.max_logit) << " (median " << Sci(r.steps.median()) << ", lse "
            << Sci(r.steps.max_logsumexp) << "), greedy " << r.greedy_agreed << "/"
            << r.greedy_compared << " of " << r.steps.logit.size();
    if (c.routing_tie > 0) summary << ", router near-ties replayed at " << r.routing_replayed << " positions";
    if (std::isinf(c.late_tol)) summary << ", positions from " << kSettled << " on not compared";
  }
  std::cout << "[parity] " << summary.str() << std::endl;
  RecordProperty("errors", summary.str());
}

INSTANTIATE_TEST_SUITE_P(Fixtures, ModelParityTest, ::testing::ValuesIn(kCases),
                         [](const ::testing::TestParamInfo<ModelCase>& info) {
                           std::string name = info.param.model;
                           for (char& ch : name) {
                             if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
                           }
                           return name;
                         });

}  // namespace
}  // namespace kakeya
