// `kakeya bench spec`: what the speculative loop gains over plain decoding.
//  * self-draft: a drafter that replays the target's own greedy output, so
//    every draft is accepted and each step commits exactly L tokens. Its
//    speedup against L / (verify(L) / verify(1)) shows the loop's own overhead.
//  * ngram: prompt lookup on the prompt (by default a repetitive piece of code),
//    adaptive block, the speedup a user would see.
// Runs alternate (plain, each L, ngram) within every repetition; medians are reported.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <thread>

#include <nlohmann/json.hpp>

#include "base/error.h"
#include "commands.h"
#include "kernels/cpu/matmul.h"
#include "speculative/ngram_drafter.h"
#include "speculative/speculative.h"

namespace kakeya::cli {
namespace {

// Code whose continuation repeats what came before, like edits of a file.
constexpr const char* kDefaultPrompt =
    "def add(a, b):\n    return a + b\n\n\ndef sub(a, b):\n    return a - b\n\n\n"
    "def mul(a, b):\n    return a * b\n\n\ndef div(a, b):\n    return a / b\n\n\n"
    "class Calculator:\n    def add(self, a, b):\n        return add(a, b)\n\n"
    "    def sub(self, a, b):\n        return sub(a, b)\n\n";

struct SpecBenchFlags {
  std::string model;
  std::string prompt;
  std::string prompt_file;
  int n_predict = 128;
  std::vector<int> blocks = {1, 2, 4, 8, 16};
  int threads = 0;
  int reps = 3;
  bool json = false;
};

class ReplayDrafter : public Drafter {
 public:
  explicit ReplayDrafter(const std::vector<TokenId>& full) : full_(full) {}
  std::string name() const override { return "self"; }
  void Begin(std::span<const TokenId>) override {}
  int Draft(const DraftRequest& r, std::span<TokenId> out) override {
    int n = 0;
    for (size_t pos = r.history.size(); n < r.max_tokens && pos < full_.size(); ++pos) out[n++] = full_[pos];
    return n;
  }
  void Accept(std::span<const TokenId>, int, int) override {}

 private:
  const std::vector<TokenId>& full_;
};

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

double MsOf(const std::function<void()>& fn) {
  const auto t0 = std::chrono::steady_clock::now();
  fn();
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

int BenchSpec(const SpecBenchFlags& f) {
  for (int b : f.blocks) {
    if (b < 1 || b > 64) Fail("--blocks value ", b, " is out of range (1 .. 64)");
  }
  if (f.n_predict < 2) Fail("-n must be at least 2");
  if (f.reps < 1) Fail("--reps must be at least 1");
  const std::string text = f.prompt.empty() && f.prompt_file.empty() ? kDefaultPrompt : ReadPrompt(f.prompt, f.prompt_file);
  const std::unique_ptr<Model> model = Model::Load(f.model);
  const std::vector<TokenId> prompt = model->tokenizer().Encode(text, true, true);
  const int max_block = std::max(16, *std::max_element(f.blocks.begin(), f.blocks.end()));
  ContextOptions copts;
  copts.n_threads = f.threads > 0 ? f.threads : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  copts.n_ctx = static_cast<int>(prompt.size()) + f.n_predict + max_block;
  copts.max_batch = std::max(max_block, std::min(512, copts.n_ctx));
  copts.max_logit_rows = max_block;
  Context ctx(*model, copts);

  GenerateOptions g;
  g.n_predict = f.n_predict;
  g.ignore_eos = true;
  g.sampling.temperature = 0;
  const std::vector<TokenId> plain_tokens = Generate(ctx, prompt, g, nullptr).tokens;
  std::vector<TokenId> full = prompt;
  full.insert(full.end(), plain_tokens.begin(), plain_tokens.end());

  // verify(L) / verify(1): one forward of L rows after the prompt.
  std::vector<std::vector<double>> verify_ms(f.blocks.size() + 1);
  std::vector<double> plain_ms;
  std::vector<std::vector<double>> self_ms(f.blocks.size());
  std::vector<SpecStats> self_stats(f.blocks.size());
  std::vector<double> ngram_ms;
  SpecStats ngram_stats;
  for (int rep = 0; rep < f.reps; ++rep) {
    plain_ms.push_back(Generate(ctx, prompt, g, nullptr).decode_ms);
    for (size_t k = 0; k < f.blocks.size(); ++k) {
      ReplayDrafter self(full);
      const GenerateResult r = GenerateSpeculative(ctx, self, prompt, g, SpecOptions{.block = f.blocks[k], .max_block = max_block}, nullptr, &self_stats[k]);
      if (r.tokens != plain_tokens) Fail("self-draft output differs from plain decoding at block ", f.blocks[k]);
      self_ms[k].push_back(r.decode_ms);
    }
    NgramDrafter ngram(NgramOptions{.n_ctx = copts.n_ctx});
    const GenerateResult r = GenerateSpeculative(ctx, ngram, prompt, g, SpecOptions{.block = 0, .max_block = max_block}, nullptr, &ngram_stats);
    if (r.tokens != plain_tokens) Fail("ngram output differs from plain decoding");
    ngram_ms.push_back(r.decode_ms);
    for (size_t k = 0; k <= f.blocks.size(); ++k) {
      const int rows = k == 0 ? 1 : f.blocks[k - 1];
      Prefill(ctx, prompt);
      verify_ms[k].push_back(MsOf([&] { ctx.Forward(std::span<const TokenId>(full).subspan(prompt.size(), rows), true); }));
    }
  }

  // Decode steps after the first token, which comes from the prefill.
  const double plain_tok_s = (f.n_predict - 1) * 1000.0 / Median(plain_ms);
  const double v1 = Median(verify_ms[0]);
  nlohmann::json out;
  out["cpu_target"] = ActiveCpuTarget();
  out["threads"] = copts.n_threads;
  out["prompt_tokens"] = prompt.size();
  out["generated"] = f.n_predict;
  out["plain_tok_s"] = plain_tok_s;
  out["self_draft"] = nlohmann::json::array();
  for (size_t k = 0; k < f.blocks.size(); ++k) {
    const double tok_s = (f.n_predict - 1) * 1000.0 / Median(self_ms[k]);
    const double ratio = Median(verify_ms[k + 1]) / v1;
    const double speedup = tok_s / plain_tok_s;
    const double ideal = self_stats[k].mean_accept_len() / ratio;
    out["self_draft"].push_back({{"block", f.blocks[k]},
                                 {"tokens_per_step", self_stats[k].mean_accept_len()},
                                 {"verify_ratio", ratio},
                                 {"tok_s", tok_s},
                                 {"speedup", speedup},
                                 {"ideal_speedup", ideal},
                                 {"efficiency", speedup / ideal}});
  }
  const double ngram_tok_s = (f.n_predict - 1) * 1000.0 / Median(ngram_ms);
  out["ngram"] = {{"tok_s", ngram_tok_s},
                  {"speedup", ngram_tok_s / plain_tok_s},
                  {"tokens_per_step", ngram_stats.mean_accept_len()},
                  {"drafted", ngram_stats.drafted},
                  {"accepted", ngram_stats.accepted}};
  if (f.json) {
    std::puts(out.dump().c_str());
    return 0;
  }
  std::printf("model: %s | %zu prompt tokens, %d generated | %d threads, %s\n", f.model.c_str(), prompt.size(),
              f.n_predict, copts.n_threads, ActiveCpuTarget());
  std::printf("plain decoding: %.1f tok/s\n", plain_tok_s);
  std::printf("%6s %12s %13s %9s %9s %13s %11s\n", "block", "tokens/step", "verify(L)/(1)", "tok/s", "speedup",
              "ideal L/ratio", "efficiency");
  for (const auto& r : out["self_draft"]) {
    std::printf("%6d %12.2f %13.2f %9.1f %8.2fx %12.2fx %10.0f%%\n", r["block"].get<int>(),
                r["tokens_per_step"].get<double>(), r["verify_ratio"].get<double>(), r["tok_s"].get<double>(),
                r["speedup"].get<double>(), r["ideal_speedup"].get<double>(), 100 * r["efficiency"].get<double>());
  }
  std::printf("ngram (adaptive): %.1f tok/s, %.2fx plain, %.2f tokens/step, %d of %d drafts accepted\n", ngram_tok_s,
              ngram_tok_s / plain_tok_s, ngram_stats.mean_accept_len(), ngram_stats.accepted, ngram_stats.drafted);
  return 0;
}

}  // namespace

CLI::App* AddBenchSpecCommand(CLI::App& bench, Runner* runner) {
  CLI::App* spec = bench.add_subcommand(
      "spec", "Speculative decoding vs plain: self-draft at each block size, and prompt lookup (ngram)");
  auto f = std::make_shared<SpecBenchFlags>();
  spec->add_option("-m,--model", f->model, "GGUF model file")->required()->check(CLI::ExistingFile);
  spec->add_option("-p,--prompt", f->prompt, "Prompt (default: a repetitive piece of Python)");
  spec->add_option("-f,--file", f->prompt_file, "Read the prompt from a file");
  spec->add_option("-n,--n-predict", f->n_predict, "Tokens to generate per run")->capture_default_str();
  spec->add_option("--blocks", f->blocks, "Self-draft block sizes (comma separated)")->delimiter(',')->capture_default_str();
  spec->add_option("-t,--threads", f->threads, "Threads (default: all hardware threads)");
  spec->add_option("--reps", f->reps, "Repetitions (medians are reported)")->capture_default_str();
  spec->add_flag("--json", f->json, "Print one JSON object");
  *runner = [f] { return BenchSpec(*f); };
  return spec;
}

}  // namespace kakeya::cli
