// `kakeya bench recall`: the needle-in-a-haystack gate of the KV cache types
// (ADR 0013). Haystacks of real text (the -f files) of each --context length
// carry several needles each (multi-key, as RULER places them): lines
// `NAME = "VALUE"` at depths spread from 0% to 100% over all the haystacks of
// a context. For each needle the model reads the haystack, then `NAME = "`,
// and decodes greedily; it recalls the needle when its text starts with
// VALUE and the closing quote (exact match). Every cache type reads the same
// haystacks; the gate: each type recalls every needle the first type (the
// reference, f32 by default) recalls, else the run exits 1 naming them.
#include <algorithm>
#include <cstdio>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/error.h"
#include "cache_flags.h"
#include "commands.h"
#include "engine/limits.h"
#include "kernels/cpu/matmul.h"
#include "machine.h"
#include "model/context.h"
#include "sampling/sampler.h"

namespace kakeya::cli {
namespace {

constexpr const char* kHelp =
    "Needle-in-a-haystack recall for each of --cache-types: haystacks of the -f files' text, --context tokens "
    "long, each carrying --needles lines NAME = \"VALUE\" at depths spread over 0-100%; the model reads a "
    "haystack, then NAME = \", and decodes greedily; a needle is recalled when the text starts with VALUE\". "
    "Gate: every type recalls each needle the first type recalls (exit 1 otherwise)";

// Tokens decoded after a question: a 5-digit value and its quote, however
// the vocabulary splits them.
constexpr int kAnswerTokens = 12;

struct RecallFlags {
  std::string model;
  std::vector<std::string> files;
  std::vector<int> contexts;  // empty: the model's training context (at most 32768)
  int needles = 4;
  int haystacks = 25;
  std::vector<std::string> types = {"f32", "kakeya4/kakeya3"};
  int threads = 0;
  unsigned seed = 1;
  bool json = false;
};

struct Needle {
  std::string name, value;
  double depth;  // of the haystack's text, 0 .. 1
};

// Identifiers a code model reads as constants, distinct within a haystack.
std::vector<Needle> MakeNeedles(int n, std::mt19937& rng) {
  static const char* const kWords[] = {"ALPHA", "BRAVO", "CEDAR", "DELTA", "EMBER", "FJORD", "GAMMA", "HAZEL",
                                       "IVORY", "JUNIPER", "KAPPA", "LUNAR", "MAPLE", "NOVA", "OPAL", "PRISM",
                                       "QUARTZ", "RAVEN", "SIGMA", "TUNDRA", "UMBER", "VELVET", "WILLOW", "ZENITH"};
  std::vector<Needle> out;
  std::vector<int> words(std::size(kWords));
  for (size_t i = 0; i < words.size(); ++i) words[i] = static_cast<int>(i);
  std::shuffle(words.begin(), words.end(), rng);
  for (int i = 0; i < n; ++i) {
    out.push_back({std::string("SECRET_") + kWords[words[i % words.size()]] + "_" + std::to_string(rng() % 90 + 10),
                   std::to_string(rng() % 90000 + 10000), 0.0});
  }
  return out;
}

struct Haystack {
  std::vector<TokenId> tokens;  // BOS, the text with the needles in it
  std::vector<Needle> needles;
};

// Whether the greedy answer after `question` starts with the needle's value
// and its closing quote. The question's rows and the answer's are trimmed
// again, leaving the haystack committed for the next question.
bool Recalls(Context& ctx, const Tokenizer& tok, const std::vector<TokenId>& question, const std::string& value) {
  ctx.Forward(question, /*all_logits=*/false);
  int fed = static_cast<int>(question.size());
  std::vector<TokenId> answer;
  const std::string want = value + "\"";
  for (int i = 0; i < kAnswerTokens; ++i) {
    answer.push_back(Argmax(ctx.logits(0)));
    const std::string text = tok.Decode(answer, false);
    if (text.size() >= want.size() || want.compare(0, text.size(), text) != 0) break;
    ctx.Forward(std::span<const TokenId>(&answer.back(), 1), false);
    ++fed;
  }
  ctx.Trim(fed);
  return tok.Decode(answer, false).rfind(want, 0) == 0;
}

int BenchRecall(const RecallFlags& f) {
  if (f.files.empty()) Fail("-f: give the haystacks' text files");
  if (f.needles < 1 || f.needles > 64) Fail("--needles ", f.needles, " is out of range (1 .. 64)");
  if (f.haystacks < 1 || f.haystacks > 10000) Fail("--haystacks ", f.haystacks, " is out of range (1 .. 10000)");
  if (f.types.empty()) Fail("--cache-types is empty");
  std::vector<CacheTypes> types;
  for (const std::string& item : f.types) types.push_back(ParseCacheTypes(item, "--cache-types"));

  const std::unique_ptr<Model> model = Model::Load(f.model);
  const Tokenizer& tok = model->tokenizer();
  std::vector<int> contexts = f.contexts;
  if (contexts.empty()) contexts = {std::min(model->hparams().n_ctx_train > 0 ? model->hparams().n_ctx_train : 4096, 32768)};
  std::string text;
  for (const std::string& path : f.files) text += ReadTextFile(path) + "\n";
  const std::vector<TokenId> filler = tok.Encode(text, /*add_special=*/false, /*parse_special=*/false);
  const int threads = ThreadsOrDefault(f.threads);

  nlohmann::json out = {{"cpu", CpuModel()}, {"threads", threads}, {"model", f.model}, {"needles", f.needles},
                        {"haystacks", f.haystacks}, {"results", nlohmann::json::array()},
                        {"lost", nlohmann::json::array()}};
  int lost_total = 0;
  for (int n_ctx : contexts) {
    if (n_ctx < 64 || n_ctx > (1 << 24)) Fail("--context ", n_ctx, " is out of range (64 .. ", 1 << 24, ")");
    if (model->hparams().n_ctx_train > 0 && n_ctx > model->hparams().n_ctx_train) {
      std::fprintf(stderr, "note: --context %d is past the model's training context (%d)\n", n_ctx,
                   model->hparams().n_ctx_train);
    }
    // The haystacks, the same for every type.
    std::mt19937 rng(f.seed + static_cast<unsigned>(n_ctx));
    std::vector<Haystack> haystacks;
    const int total = f.needles * f.haystacks;
    for (int h = 0; h < f.haystacks; ++h) {
      Haystack hs{{}, MakeNeedles(f.needles, rng)};
      std::vector<std::vector<TokenId>> lines;
      int needle_tokens = 0, longest_question = 0;
      for (int i = 0; i < f.needles; ++i) {
        Needle& n = hs.needles[i];
        n.depth = total > 1 ? double(h + i * f.haystacks) / (total - 1) : 0.5;  // all of 0 .. 1 over the haystacks
        lines.push_back(tok.Encode("\n" + n.name + " = \"" + n.value + "\"\n", false, false));
        needle_tokens += static_cast<int>(lines.back().size());
        longest_question = std::max(longest_question, static_cast<int>(tok.Encode("\n" + n.name + " = \"", false, false).size()));
      }
      const int budget = n_ctx - 1 - needle_tokens - longest_question - kAnswerTokens;
      if (budget < 16 || budget > static_cast<int>(filler.size())) {
        Fail("--context ", n_ctx, ": the -f files give ", filler.size(), " tokens of text; a haystack needs ",
             std::max(budget, 16), " (and the context room for ", f.needles, " needles and a question)");
      }
      const size_t start = (size_t(h) * 7919 * 16) % (filler.size() - budget + 1);  // haystacks of different text
      if (tok.bos() >= 0) hs.tokens.push_back(tok.bos());
      int next = 0;  // needles in depth order
      for (int t = 0; t <= budget; ++t) {
        while (next < f.needles && hs.needles[next].depth * budget <= t) {
          hs.tokens.insert(hs.tokens.end(), lines[next].begin(), lines[next].end());
          ++next;
        }
        if (t < budget) hs.tokens.push_back(filler[start + t]);
      }
      haystacks.push_back(std::move(hs));
    }
    if (!f.json && n_ctx == contexts.front()) {
      std::printf("%8s %-16s %10s %8s %6s\n", "context", "cache", "recalled", "of", "%");
    }
    std::vector<std::vector<bool>> recalled(types.size());
    for (size_t ti = 0; ti < types.size(); ++ti) {
      ContextOptions o;
      o.n_threads = threads;
      o.n_ctx = n_ctx;
      o.max_batch = std::min(kPrefillChunk, n_ctx);
      o.max_logit_rows = 1;
      o.cache_type_k = types[ti].k;
      o.cache_type_v = types[ti].v;
      Context ctx(*model, o);
      for (size_t h = 0; h < haystacks.size(); ++h) {
        if (!f.json) {
          std::fprintf(stderr, "\rcontext %d, %s: haystack %zu/%zu", n_ctx, types[ti].name.c_str(), h + 1,
                       haystacks.size());
        }
        ctx.Clear();
        const std::vector<TokenId>& all = haystacks[h].tokens;
        for (size_t at = 0; at < all.size(); at += o.max_batch) {
          const size_t n = std::min(all.size() - at, size_t(o.max_batch));
          ctx.Forward(std::span<const TokenId>(all).subspan(at, n), false);
          ctx.Commit();
        }
        for (const Needle& n : haystacks[h].needles) {
          recalled[ti].push_back(Recalls(ctx, tok, tok.Encode("\n" + n.name + " = \"", false, false), n.value));
        }
      }
      if (!f.json) std::fprintf(stderr, "\n");
      const int hits = static_cast<int>(std::count(recalled[ti].begin(), recalled[ti].end(), true));
      out["results"].push_back({{"context", n_ctx}, {"cache_types", types[ti].name}, {"recalled", hits},
                                {"needles", total}});
      if (!f.json) {
        std::printf("%8d %-16s %10d %8d %6.1f\n", n_ctx, types[ti].name.c_str(), hits, total, 100.0 * hits / total);
      }
    }
    // The gate: what the reference recalls, every other type recalls.
    for (size_t ti = 1; ti < types.size(); ++ti) {
      for (int i = 0; i < total; ++i) {
        if (!recalled[0][i] || recalled[ti][i]) continue;
        const Needle& n = haystacks[i / f.needles].needles[i % f.needles];
        out["lost"].push_back({{"context", n_ctx}, {"cache_types", types[ti].name}, {"haystack", i / f.needles},
                               {"name", n.name}, {"depth", n.depth}});
        if (!f.json) {
          std::printf("lost: %s misses %s (haystack %d, depth %.0f%%), which %s recalls\n", types[ti].name.c_str(),
                      n.name.c_str(), i / f.needles, 100 * n.depth, types[0].name.c_str());
        }
        ++lost_total;
      }
    }
  }
  if (f.json) std::puts(out.dump().c_str());
  if (lost_total > 0) {
    std::fprintf(stderr, "kakeya: recall gate failed: %d needles recalled by %s are lost by another cache type\n",
                 lost_total, types[0].name.c_str());
    return 1;
  }
  return 0;
}

}  // namespace

CLI::App* AddBenchRecallCommand(CLI::App& bench, Runner* runner) {
  CLI::App* recall = bench.add_subcommand("recall", kHelp);
  auto f = std::make_shared<RecallFlags>();
  recall->add_option("-m,--model", f->model, "GGUF model file")->required()->check(CLI::ExistingFile);
  recall->add_option("-f,--file", f->files, "Text files whose text makes the haystacks (concatenated)")
      ->required()
      ->check(CLI::ExistingFile);
  recall->add_option("--context", f->contexts,
                     "Haystack lengths in tokens, question and answer included, comma separated (default: the "
                     "model's training context, at most 32768)")
      ->delimiter(',');
  recall->add_option("--needles", f->needles, "Needles per haystack (multi-key)")->capture_default_str();
  recall->add_option("--haystacks", f->haystacks,
                     "Haystacks per context: needles x haystacks placements, their depths spread over 0-100%")
      ->capture_default_str();
  recall->add_option("--cache-types", f->types,
                     "Cache types, comma separated, each K or K/V as -ctk/-ctv take them; the first is the "
                     "reference the others must match")
      ->delimiter(',')
      ->capture_default_str();
  recall->add_option("-t,--threads", f->threads, "Threads (default: all hardware threads)");
  recall->add_option("--seed", f->seed, "Seed of the needles' names and values")->capture_default_str();
  recall->add_flag("--json", f->json, "Print one JSON object");
  *runner = [f] { return BenchRecall(*f); };
  return recall;
}

}  // namespace kakeya::cli
