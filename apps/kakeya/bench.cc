// `kakeya bench verify`: the cost of one forward over N rows (a
// speculative verify step of N-1 drafted tokens, or a prefill chunk of N), against one row
// and against the machine's memory roofline (docs/design.md, "Performance model").
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <thread>

#include <nlohmann/json.hpp>

#include "base/error.h"
#include "cache_flags.h"
#include "commands.h"
#include "engine/limits.h"
#include "kernels/cpu/matmul.h"
#include "engine/generate.h"
#include "model/context.h"
#include "machine.h"
#include "median.h"
#include "roofline.h"

namespace kakeya::cli {
namespace {

struct BenchFlags {
  CacheTypeFlags cache;
  std::string model;
  std::vector<int> rows = {1, 2, 4, 8, 16};
  int threads = 0;
  int reps = 10;
  int context = 64;
  bool prefill = false;  // logits for the last row only
  std::string fill = "prefill";  // how the context is filled: prefill | random
  bool json = false;
};

int BenchVerify(const BenchFlags& f) {
  if (f.rows.empty()) Fail("--rows is empty");
  for (int n : f.rows) {
    if (n < 1 || n > 4096) Fail("--rows value ", n, " is out of range (1 .. 4096)");
  }
  if (f.reps < 1 || f.reps > 100000) Fail("--reps ", f.reps, " is out of range");
  if (f.context < 0) Fail("--context ", f.context, " is negative");

  const std::unique_ptr<Model> model = Model::Load(f.model);
  const HParams& hp = model->hparams();
  const int max_rows = *std::max_element(f.rows.begin(), f.rows.end());
  ContextOptions copts;
  copts.n_threads = f.threads > 0 ? f.threads : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  copts.max_batch = std::max(max_rows, std::min(f.context, kPrefillChunk));
  copts.max_logit_rows = max_rows;
  copts.cache_type_k = f.cache.k;
  copts.cache_type_v = f.cache.v;
  copts.n_ctx = f.context + max_rows;
  Context ctx(*model, copts);

  // A fixed pseudo-random prefix, so attention has something to read.
  std::vector<TokenId> tokens(std::max(f.context, max_rows));
  for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = static_cast<TokenId>((i * 7919 + 13) % hp.n_vocab);
  if (f.fill == "random") {
    ctx.FillCacheForBenchmark(f.context, 1);
  } else {
    Prefill(ctx, std::span<const TokenId>(tokens).first(f.context));
  }

  // The roofline is read before and after the rows and the higher one kept,
  // so a fraction of it never flatters; on a shared machine whose memory
  // bandwidth changes within minutes (34 vs 60 GB/s on one VM here), the two
  // readings also show that it changed.
  if (!f.json) std::fprintf(stderr, "measuring memory read bandwidth...\n");
  const double roofline_before = MeasureReadBandwidthGBps(ctx.pool());
  const double weight_gb = model->weight_bytes() / 1e9;

  // Alternate the row counts within each repetition so that machine noise
  // spreads evenly over them; the first repetition is a warm-up.
  std::vector<std::vector<double>> ms(f.rows.size());
  // Per row count, what one forward read: the dense weights and, of a
  // mixture, the union of the experts its rows chose (the same rows each rep).
  std::vector<size_t> bytes_read(f.rows.size());
  std::vector<int> experts_touched(f.rows.size());
  for (int rep = 0; rep <= f.reps; ++rep) {
    for (size_t k = 0; k < f.rows.size(); ++k) {
      const auto t0 = std::chrono::steady_clock::now();
      ctx.Forward(std::span<const TokenId>(tokens).first(f.rows[k]), /*all_logits=*/!f.prefill);
      const double t = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
      ctx.Trim(f.rows[k]);
      if (rep > 0) ms[k].push_back(t);
      bytes_read[k] = ctx.weight_bytes_read();
      experts_touched[k] = ctx.experts_touched();
    }
  }
  if (!f.json) std::fprintf(stderr, "measuring memory read bandwidth again...\n");
  const double roofline_after = MeasureReadBandwidthGBps(ctx.pool());
  const double roofline_gbps = std::max(roofline_before, roofline_after);

  nlohmann::json out;
  out["cpu"] = CpuModel();
  out["features"] = CpuFeatures();
  out["target"] = ActiveCpuTarget();
  out["threads"] = copts.n_threads;
  out["model"] = f.model;
  out["weight_gb"] = weight_gb;
  out["context"] = f.context;
  out["fill"] = f.fill;
  out["cache_types"] = std::string(KvTypeName(f.cache.k)) + "/" + std::string(KvTypeName(f.cache.v));
  out["kv_bytes"] = ctx.cache().bytes();
  out["prefill"] = f.prefill;
  out["roofline_gbps"] = roofline_gbps;
  out["roofline_gbps_before"] = roofline_before;
  out["roofline_gbps_after"] = roofline_after;
  out["rows"] = nlohmann::json::array();
  double ms_one = 0;
  for (size_t k = 0; k < f.rows.size(); ++k) {
    if (f.rows[k] == 1) ms_one = Median(ms[k]);
  }
  const bool experts = model->has_experts();
  for (size_t k = 0; k < f.rows.size(); ++k) {
    const double m = Median(ms[k]);
    const double gb = bytes_read[k] / 1e9;
    nlohmann::json row = {{"n", f.rows[k]},
                          {"ms", m},
                          {"ratio", ms_one > 0 ? m / ms_one : 0.0},
                          {"gbps", gb / (m / 1000.0)},
                          {"tok_s", f.rows[k] * 1000.0 / m}};
    if (experts) {
      // The expert-union bound (docs/design.md, "Performance model"): no kernel can
      // read the dense weights and the touched experts faster than the roofline.
      const double bound_ms = gb / roofline_gbps * 1000.0;
      row["experts_touched"] = experts_touched[k];
      row["weight_gb_read"] = gb;
      row["union_bound_ms"] = bound_ms;
      row["ratio_to_bound"] = m / bound_ms;
    }
    out["rows"].push_back(row);
  }

  if (f.json) {
    std::puts(out.dump().c_str());
    return 0;
  }
  std::printf("cpu: %s | target %s | %d threads\n", out["cpu"].get<std::string>().c_str(),
              ActiveCpuTarget(), copts.n_threads);
  std::printf("model: %s (%.2f GB of weights read per step) | context %d (%s) | logits for %s\n", f.model.c_str(),
              weight_gb, f.context, f.fill.c_str(), f.prefill ? "the last row (prefill)" : "every row (verify)");
  std::printf("KV cache: %s, %.1f MiB\n", out["cache_types"].get<std::string>().c_str(),
              ctx.cache().bytes() / 1048576.0);
  std::printf("memory roofline (streaming read, the higher of before and after the rows): %.1f GB/s\n",
              roofline_gbps);
  if (std::min(roofline_before, roofline_after) < 0.8 * roofline_gbps) {
    std::printf("note: memory bandwidth changed during the run (%.1f GB/s before, %.1f after); "
                "compare only runs taken side by side\n", roofline_before, roofline_after);
  }
  if (experts) {
    std::printf("mixture of experts: %.2f GB of dense weights read by every step, %d experts per row; "
                "\"experts\" is the distinct (layer, expert) pairs a step's rows chose, \"bound\" the time to "
                "read the dense weights and those experts at the roofline\n",
                model->dense_weight_bytes() / 1e9, model->layers.back().moe.n_used);
    std::printf("%6s %10s %8s %10s %9s %10s %8s %10s %8s\n", "rows", "ms", "ratio", "tok/s", "GB/s", "roofline",
                "experts", "bound ms", "x bound");
  } else {
    std::printf("%6s %10s %8s %10s %9s %10s\n", "rows", "ms", "ratio", "tok/s", "GB/s", "roofline");
  }
  for (const auto& r : out["rows"]) {
    const double gbps = r["gbps"].get<double>();
    std::printf("%6d %10.2f %8.2f %10.1f %9.1f %9.0f%%", r["n"].get<int>(), r["ms"].get<double>(),
                r["ratio"].get<double>(), r["tok_s"].get<double>(), gbps, 100.0 * gbps / roofline_gbps);
    if (experts) {
      std::printf(" %8d %10.2f %8.2f", r["experts_touched"].get<int>(), r["union_bound_ms"].get<double>(),
                  r["ratio_to_bound"].get<double>());
    }
    std::printf("\n");
  }
  if (ms_one == 0) std::printf("(ratios need rows=1 in --rows)\n");
  return 0;
}

}  // namespace

Runner AddBenchCommand(CLI::App& app) {
  app.require_subcommand(1);
  CLI::App* verify = app.add_subcommand(
      "verify", "Time one forward over N rows (median of reps) vs one row and the memory roofline");
  auto f = std::make_shared<BenchFlags>();
  verify->add_option("-m,--model", f->model, "GGUF model file")->required()->check(CLI::ExistingFile);
  verify->add_option("--rows", f->rows, "Row counts to time (comma separated)")->delimiter(',')->capture_default_str();
  verify->add_option("-t,--threads", f->threads, "Threads (default: all hardware threads)");
  AddCacheTypeFlags(*verify, f->cache);
  verify->add_option("--reps", f->reps, "Timed repetitions per row count, after one warm-up")->capture_default_str();
  verify->add_option("--context", f->context, "Tokens already in the cache when the rows run (llama-bench's -d)")
      ->capture_default_str();
  verify->add_option("--fill", f->fill,
                     "How the context gets there: prefill (run the model on a fixed token sequence) or random "
                     "(random keys and values written straight into the cache, coded as a prefill would leave them: "
                     "the same attention work at depth without the prefill's minutes)")
      ->check(CLI::IsMember({"prefill", "random"}))
      ->capture_default_str();
  verify->add_flag("--prefill", f->prefill,
                   "Logits for the last row only, as a prompt prefill (and llama-bench's pp test) computes them; "
                   "default: every row's, as a verify step needs");
  verify->add_flag("--json", f->json, "Print one JSON object");
  Runner spec_runner, depth_runner, recall_runner;
  CLI::App* spec = AddBenchSpecCommand(app, &spec_runner);
  CLI::App* depth = AddBenchDepthCommand(app, &depth_runner);
  CLI::App* recall = AddBenchRecallCommand(app, &recall_runner);
  return [f, spec, spec_runner, depth, depth_runner, recall, recall_runner] {
    if (spec->parsed()) return spec_runner();
    if (depth->parsed()) return depth_runner();
    return recall->parsed() ? recall_runner() : BenchVerify(*f);
  };
}

}  // namespace kakeya::cli
