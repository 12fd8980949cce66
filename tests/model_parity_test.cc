// End-to-end parity with llama.cpp on the tiny random models of
// tests/fixtures/models: tokenization, logits at every prompt position, and a
// teacher-forced greedy generation, following the fixture README's "How to
// compare" procedure and "Suggested tolerances".
//
// Each model's measured errors are printed as one "[parity]" summary line
// (visible in `ctest -V`) and recorded as a test property.

#include <gtest/gtest.h>

#include <cctype>
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
};

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
};

// gtest prints a failing parameter with this (instead of its bytes).
void PrintTo(const ModelCase& c, std::ostream* out) { *out << c.model; }

std::vector<std::string> PromptsOf(std::string_view model) {
  if (model.find("gemma") != std::string_view::npos) return {"fox", "fib", "long", "wrap"};
  return {"fox", "fib", "long"};
}

// Measured figures of one prompt.
struct PromptResult {
  ErrorSeries prompt;  // prompt_steps, one per prompt position
  ErrorSeries steps;   // generation steps, teacher-forced
  int greedy_compared = 0;
  int greedy_agreed = 0;
};

std::string Sci(double v) {
  std::ostringstream out;
  out << std::scientific << std::setprecision(1) << v;
  return out.str();
}

PromptResult RunPrompt(const Model& model, const ModelCase& c, const std::string& prompt) {
  const RefLogits ref = fixture::LoadRefLogits(c.model, prompt, c.ref_suffix);
  PromptResult r;

  EXPECT_EQ(model.tokenizer().Encode(ref.prompt, true, true), ref.prompt_ids)
      << "tokenization of '" << ref.prompt << "'";

  // The reference ids drive the forward pass, so a tokenizer mismatch does not
  // hide the logits comparison.
  const int n_prompt = static_cast<int>(ref.prompt_ids.size());
  Context ctx(model, ContextOptions{.n_ctx = 2048, .max_batch = 512, .n_threads = 2});
  ctx.Forward(ref.prompt_ids, /*all_logits=*/true);
  EXPECT_EQ(ctx.n_logit_rows(), n_prompt);
  for (int i = 0; i < n_prompt; ++i) {
    r.prompt.Add(fixture::CompareStep(ctx.logits(i), ref.prompt_steps[i]));
  }

  // steps[0] is the prediction after the whole prompt (the last prompt row);
  // steps[i] follows generated_ids[i - 1], fed one token at a time.
  const int n_steps = static_cast<int>(ref.steps.size());
  std::vector<float> last(ctx.logits(n_prompt - 1).begin(), ctx.logits(n_prompt - 1).end());
  for (int i = 0; i < n_steps; ++i) {
    if (i > 0) {
      const TokenId tok = ref.generated_ids[i - 1];
      ctx.Forward({&tok, 1}, /*all_logits=*/false);
      last.assign(ctx.logits(0).begin(), ctx.logits(0).end());
    }
    const fixture::RefStep& step = ref.steps[i];
    r.steps.Add(fixture::CompareStep(last, step));
    // A greedy pick is only meaningful where our error cannot flip the order.
    if (step.top[0].second - step.top[1].second > 2 * c.tol) {
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

  auto check = [&](const ErrorSeries& s, const char* what, double median_tol) {
    EXPECT_LE(s.max_logit, c.tol) << what << ": worst at index " << s.worst_pos << ", token "
                                  << s.worst_id;
    EXPECT_LE(s.max_logsumexp, c.tol) << what << " logsumexp";
    // The median check applies to the short prompts only: on `long`, one
    // rounding flip spreads through attention to many later positions.
    if (c.check_median && prompt != "long") {
      EXPECT_LT(s.median(), median_tol) << what << " median";
    }
  };
  check(r.prompt, "prompt positions", kMedianTol);
  check(r.steps, "generation steps", kStepsMedianTol);
  return r;
}

class ModelParityTest : public ::testing::TestWithParam<ModelCase> {};

TEST_P(ModelParityTest, MatchesLlamaCpp) {
  const ModelCase& c = GetParam();
  std::unique_ptr<Model> model;
  try {
    model = Model::Load(fixture::ModelPath(c.model));
  } catch (const Error& e) {
    // Architectures of a later issue start running as soon as they load.
    const std::string_view msg = e.what();
    if (msg.find("architecture") != msg.npos && msg.find("not supported") != msg.npos) {
      GTEST_SKIP() << msg;
    }
    throw;
  }

  std::ostringstream summary;
  summary << c.model << " (tol " << c.tol << "): max |dlogit| vs llama.cpp";
  for (const std::string& prompt : PromptsOf(c.model)) {
    SCOPED_TRACE(std::string(c.model) + " / " + prompt);
    const PromptResult r = RunPrompt(*model, c, prompt);
    summary << " | " << prompt << ": prompt " << Sci(r.prompt.max_logit) << " (median "
            << Sci(r.prompt.median()) << ", lse " << Sci(r.prompt.max_logsumexp) << "), steps "
            << Sci(r.steps.max_logit) << " (median " << Sci(r.steps.median()) << ", lse "
            << Sci(r.steps.max_logsumexp) << "), greedy " << r.greedy_agreed << "/"
            << r.greedy_compared << " of " << r.steps.logit.size();
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
