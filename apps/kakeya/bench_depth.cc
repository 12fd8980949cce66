// `kakeya bench depth`: decode and verify at depth (llama-bench's -d) for
// several KV cache types side by side: each type's context filled once per
// depth, then the types timed in turn within every round, so that a shared
// machine's drift falls on all of them alike (ADR 0013).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/error.h"
#include "cache_flags.h"
#include "commands.h"
#include "engine/limits.h"
#include "kernels/cpu/matmul.h"
#include "machine.h"
#include "median.h"
#include "model/context.h"

namespace kakeya::cli {
namespace {

constexpr const char* kHelp =
    "Decode (1 row) and verify (--rows rows) at each --depth, for each of --cache-types side by side: KV "
    "bytes, ms per step, tok/s, a verify step's cost in decode steps. The cache is filled with random keys "
    "and values (stored and coded as a prefill would leave them; bench verify --fill random), so a 32k "
    "depth costs seconds, not a prefill's minutes. Quality per type: kakeya perplexity --kl";

struct DepthFlags {
  std::string model;
  std::vector<int> depths = {1024, 8192, 32768};
  std::vector<std::string> types = {"f16", "q8_0", "q4_0", "kakeya4/kakeya3"};
  int rows = 4;
  int reps = 3;
  int rounds = 3;
  int threads = 0;
  bool json = false;
};

// Milliseconds of one forward over n rows at the context's depth, the rows then trimmed.
double TimeRows(Context& ctx, const std::vector<TokenId>& tokens, int n) {
  const auto t0 = std::chrono::steady_clock::now();
  ctx.Forward(std::span<const TokenId>(tokens).first(n), /*all_logits=*/true);
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  ctx.Trim(n);
  return ms;
}

int BenchDepth(const DepthFlags& f) {
  if (f.depths.empty()) Fail("--depth is empty");
  for (int d : f.depths) {
    if (d < 1 || d > (1 << 24)) Fail("--depth ", d, " is out of range (1 .. ", 1 << 24, ")");
  }
  if (f.types.empty()) Fail("--cache-types is empty");
  if (f.rows < 2 || f.rows > 64) Fail("--rows ", f.rows, " is out of range (2 .. 64)");
  if (f.reps < 1 || f.reps > 1000) Fail("--reps ", f.reps, " is out of range (1 .. 1000)");
  if (f.rounds < 1 || f.rounds > 100) Fail("--rounds ", f.rounds, " is out of range (1 .. 100)");
  std::vector<CacheTypes> types;
  for (const std::string& item : f.types) types.push_back(ParseCacheTypes(item, "--cache-types"));

  const std::unique_ptr<Model> model = Model::Load(f.model);
  std::vector<TokenId> tokens(f.rows);
  for (int i = 0; i < f.rows; ++i) tokens[i] = static_cast<TokenId>((i * 7919 + 13) % model->hparams().n_vocab);
  const int threads = ThreadsOrDefault(f.threads);

  nlohmann::json out = {{"cpu", CpuModel()}, {"target", ActiveCpuTarget()}, {"threads", threads},
                        {"model", f.model},  {"rows", f.rows},              {"reps", f.reps},
                        {"rounds", f.rounds}, {"results", nlohmann::json::array()}};
  if (!f.json) {
    std::printf("cpu: %s | target %s | %d threads | model %s\n", CpuModel().c_str(), ActiveCpuTarget(), threads,
                f.model.c_str());
    std::printf("%8s %-16s %10s %12s %10s %10s %10s %8s\n", "depth", "cache", "KV MiB", "KV B/token", "decode ms",
                "decode t/s", "verify ms", "steps");
  }
  for (int depth : f.depths) {
    std::vector<std::unique_ptr<Context>> contexts;
    for (const CacheTypes& t : types) {
      if (!f.json) std::fprintf(stderr, "filling %d positions of %s...\n", depth, t.name.c_str());
      ContextOptions o;
      o.n_threads = threads;
      // Prefill's chunk, as run sizes it: a ring's and the codec's exact rows as run allocates them.
      o.max_batch = std::max(f.rows, std::min(kPrefillChunk, depth + f.rows));
      o.max_logit_rows = f.rows;
      o.n_ctx = depth + f.rows;
      o.cache_type_k = t.k;
      o.cache_type_v = t.v;
      contexts.push_back(std::make_unique<Context>(*model, o));
      contexts.back()->FillCacheForBenchmark(depth, 1);
    }
    std::vector<std::vector<double>> decode(types.size()), verify(types.size());
    for (int round = 0; round < f.rounds; ++round) {
      for (size_t i = 0; i < types.size(); ++i) {
        Context& ctx = *contexts[i];
        TimeRows(ctx, tokens, 1);  // warm-up after the other types ran
        for (int rep = 0; rep < f.reps; ++rep) {
          decode[i].push_back(TimeRows(ctx, tokens, 1));
          verify[i].push_back(TimeRows(ctx, tokens, f.rows));
        }
      }
    }
    for (size_t i = 0; i < types.size(); ++i) {
      const double d_ms = Median(decode[i]), v_ms = Median(verify[i]);
      const KvCache& cache = contexts[i]->cache();
      nlohmann::json r = {{"depth", depth},
                          {"cache_types", types[i].name},
                          {"kv_bytes", cache.bytes()},
                          {"kv_bytes_per_token", cache.full_bytes_per_token()},
                          {"decode_ms", d_ms},
                          {"decode_tok_s", 1000.0 / d_ms},
                          {"verify_ms", v_ms},
                          {"verify_steps", v_ms / d_ms}};
      if (!f.json) {
        std::printf("%8d %-16s %10.1f %12zu %10.1f %10.2f %10.1f %8.2f\n", depth, types[i].name.c_str(),
                    cache.bytes() / 1048576.0, cache.full_bytes_per_token(), d_ms, 1000.0 / d_ms, v_ms, v_ms / d_ms);
      }
      out["results"].push_back(r);
    }
  }
  if (f.json) std::puts(out.dump().c_str());
  return 0;
}

}  // namespace

CLI::App* AddBenchDepthCommand(CLI::App& bench, Runner* runner) {
  CLI::App* depth = bench.add_subcommand("depth", kHelp);
  auto f = std::make_shared<DepthFlags>();
  depth->add_option("-m,--model", f->model, "GGUF model file")->required()->check(CLI::ExistingFile);
  depth->add_option("--depth", f->depths, "Positions already in the cache, comma separated (llama-bench's -d)")
      ->delimiter(',')
      ->capture_default_str();
  depth->add_option("--cache-types", f->types,
                    "Cache types to compare, comma separated, each K or K/V as -ctk/-ctv take them (f32, f16, bf16, "
                    "q8_0, q4_0, kakeya4, kakeya3)")
      ->delimiter(',')
      ->capture_default_str();
  depth->add_option("--rows", f->rows, "Rows of the verify step (a block of rows - 1 drafted tokens)")
      ->capture_default_str();
  depth->add_option("--reps", f->reps, "Timed steps of each kind per type and round")->capture_default_str();
  depth->add_option("--rounds", f->rounds, "Rounds, each timing every type in turn (medians over all)")
      ->capture_default_str();
  depth->add_option("-t,--threads", f->threads, "Threads (default: all hardware threads)");
  depth->add_flag("--json", f->json, "Print one JSON object");
  *runner = [f] { return BenchDepth(*f); };
  return depth;
}

}  // namespace kakeya::cli
