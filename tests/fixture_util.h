// Shared helpers of the end-to-end model tests: paths of the reference
// fixtures (tests/fixtures/models, see its README.md), the llama.cpp logits
// files parsed into plain structs, and small statistics on logit rows.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <span>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "tokenizer/tokenizer.h"

namespace kakeya::fixture {

// Fixture models live in tests/fixtures/models (llama, qwen3, gemma 2/3),
// tests/fixtures/models2 (gemma4, qwen3moe, glm4moe and their drafters) and
// tests/fixtures/models3 (deepseek4, made by scripts/make-fixtures.sh).
inline std::string ModelPath(const std::string& model, const std::string& folder = "models") {
  return std::string(KAKEYA_FIXTURES) + "/" + folder + "/" + model + ".gguf";
}

// A test's name for a "folder/model" parameter: the model, '-' as '_'.
inline std::string ModelParamName(const std::string& folder_and_model) {
  std::string name = folder_and_model.substr(folder_and_model.find('/') + 1);
  std::replace(name.begin(), name.end(), '-', '_');
  return name;
}

// One prediction of the reference: the highest raw logits (ids in decreasing
// logit order) and log(sum(exp(logit))) over the whole vocabulary.
struct RefStep {
  int argmax = 0;
  double logsumexp = 0;
  std::vector<std::pair<TokenId, double>> top;
};

// A `<prompt>.logits.json` file (README "JSON schemas"): prompt_steps[i] is
// the prediction after prompt tokens 0..i (top 5), steps[i] the prediction
// that chose generated_ids[i] (top 20).
struct RefLogits {
  std::string prompt;
  std::vector<TokenId> prompt_ids;
  std::vector<TokenId> generated_ids;
  std::vector<RefStep> prompt_steps;
  std::vector<RefStep> steps;
};

// Reads <folder>/<model>/<prompt><suffix>; suffix ".logits.json" is the
// "exact" llama.cpp reference. Throws if the file cannot be read or parsed
// (gtest reports the exception as a failure of the running test).
inline RefLogits LoadRefLogits(const std::string& model, const std::string& prompt,
                               const std::string& suffix = ".logits.json", const std::string& folder = "models") {
  const std::string path = std::string(KAKEYA_FIXTURES) + "/" + folder + "/" + model + "/" + prompt + suffix;
  std::ifstream in(path);
  if (!in) throw std::runtime_error("cannot open " + path);
  const nlohmann::json j = nlohmann::json::parse(in);
  auto steps = [](const nlohmann::json& arr) {
    std::vector<RefStep> out;
    for (const auto& s : arr) {
      RefStep step;
      step.argmax = s.at("argmax").get<int>();
      step.logsumexp = s.at("logsumexp").get<double>();
      for (const auto& t : s.at("top")) {
        step.top.emplace_back(t.at(0).get<TokenId>(), t.at(1).get<double>());
      }
      out.push_back(std::move(step));
    }
    return out;
  };
  RefLogits r;
  r.prompt = j.at("prompt").get<std::string>();
  r.prompt_ids = j.at("prompt_ids").get<std::vector<TokenId>>();
  r.generated_ids = j.at("generated_ids").get<std::vector<TokenId>>();
  r.prompt_steps = steps(j.at("prompt_steps"));
  r.steps = steps(j.at("steps"));
  return r;
}

// log(sum(exp(x))) over a whole row, in double (as the reference computes it).
inline double LogSumExp(std::span<const float> row) {
  double mx = -std::numeric_limits<double>::infinity();
  for (float v : row) mx = std::max(mx, double(v));
  double sum = 0;
  for (float v : row) sum += std::exp(double(v) - mx);
  return mx + std::log(sum);
}

// Greedy pick: the first index of the maximum, as llama.cpp's greedy sampler.
template <typename T>
int Argmax(std::span<const T> row) {
  return static_cast<int>(std::max_element(row.begin(), row.end()) - row.begin());
}

// Largest |ours - reference| over the ids the reference lists for one step
// (and which id), and the logsumexp difference.
struct StepError {
  double logit = 0;
  TokenId worst_id = -1;
  double logsumexp = 0;
};
inline StepError CompareStep(std::span<const float> ours, const RefStep& ref) {
  StepError e;
  for (const auto& [id, logit] : ref.top) {
    const double d = std::abs(double(ours[id]) - logit);
    if (d > e.logit || e.worst_id < 0) e = {d, id, 0};
  }
  e.logsumexp = std::abs(LogSumExp(ours) - ref.logsumexp);
  return e;
}

// Per-position errors of one sequence of steps, summarised.
struct ErrorSeries {
  std::vector<double> logit;  // one per position: max over the listed ids
  double max_logit = 0;
  int worst_pos = -1;  // position and token id of max_logit
  TokenId worst_id = -1;
  double max_logsumexp = 0;
  int misses = 0;  // positions over their tolerance (for the caller's bookkeeping)

  void Add(const StepError& e) {
    if (e.logit > max_logit || worst_pos < 0) {
      max_logit = e.logit;
      worst_pos = static_cast<int>(logit.size());
      worst_id = e.worst_id;
    }
    logit.push_back(e.logit);
    max_logsumexp = std::max(max_logsumexp, e.logsumexp);
  }
  double median() const {
    if (logit.empty()) return 0;
    std::vector<double> v = logit;
    std::nth_element(v.begin(), v.begin() + v.size() / 2, v.end());
    return v[v.size() / 2];
  }
};

}  // namespace kakeya::fixture
