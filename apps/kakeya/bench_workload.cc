#include "bench_workload.h"

#include <algorithm>
#include <filesystem>
#include <sstream>

#include <nlohmann/json.hpp>

#include "base/error.h"
#include "commands.h"

namespace kakeya::cli {
namespace {

bool EndsWith(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// One prompt per line: {"prompt": "...", ...}; blank lines are skipped.
std::vector<BenchPrompt> ReadJsonl(const std::string& path) {
  std::istringstream in(ReadTextFile(path));
  std::vector<BenchPrompt> out;
  int line_no = 0;
  for (std::string line; std::getline(in, line);) {
    ++line_no;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    const nlohmann::json j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (!j.is_object() || !j.contains("prompt") || !j["prompt"].is_string()) {
      Fail(path, " line ", line_no, ": expected a JSON object with a \"prompt\" string");
    }
    // "ast.py (code.jsonl:1)": the source when the line names one, and always where the prompt is.
    std::string name = std::filesystem::path(path).filename().string() + ":" + std::to_string(line_no);
    if (j.contains("source") && j["source"].is_string()) name = j["source"].get<std::string>() + " (" + name + ")";
    out.push_back({name, j["prompt"].get<std::string>()});
  }
  return out;
}

std::vector<BenchPrompt> ReadPromptFile(const std::string& path) {
  if (!std::filesystem::is_regular_file(path)) Fail("workload file ", path, " does not exist");
  std::vector<BenchPrompt> prompts;
  if (EndsWith(path, ".jsonl")) {
    prompts = ReadJsonl(path);
  } else {
    prompts.push_back({std::filesystem::path(path).filename().string(), ReadTextFile(path)});
  }
  for (const BenchPrompt& p : prompts) {
    if (p.text.empty()) Fail("workload file ", path, ": prompt ", p.name, " is empty");
  }
  if (prompts.empty()) Fail("workload file ", path, " holds no prompt");
  return prompts;
}

std::string ShippedPrompts(const std::string& name) {
  const std::string path = std::filesystem::path(ShippedTargetPath()).parent_path() / "prompts" / (name + ".jsonl");
  if (!std::filesystem::exists(path)) {
    Fail("workload ", name, ": ", path, " is missing (it ships in models/prompts/; KAKEYA_MODELS_DIR points elsewhere)");
  }
  return path;
}

}  // namespace

Workload LoadWorkload(const std::string& spec, int n_predict) {
  if (spec == "code" || spec == "code-edit" || spec == "prose") return {spec, ReadPromptFile(ShippedPrompts(spec)), n_predict};
  if (spec == "long") {
    return {spec, {ReadPromptFile(ShippedPrompts("code")).front()}, std::max(n_predict, kLongWorkloadTokens)};
  }
  if (spec.rfind("file:", 0) == 0) return {spec, ReadPromptFile(spec.substr(5)), n_predict};
  Fail("--workload ", spec, " is unknown: give code, code-edit, prose, long or file:PATH");
}

}  // namespace kakeya::cli
