// `kakeya bench spec`: speculative decoding against plain decoding on a
// workload, every method and block size in the same run, with two gates on
// every output (bench_gates.h). Each repetition runs every prompt plainly and
// then with each configuration, alternating, so that machine noise falls on
// all of them alike; a warm-up pass comes first and medians are reported.
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <map>
#include <set>

#include "base/error.h"
#include "bench_gates.h"
#include "bench_plot.h"
#include "bench_report.h"
#include "bench_workload.h"
#include "cache_flags.h"
#include "commands.h"
#include "drafter_choice.h"
#include "engine/limits.h"
#include "kernels/cpu/matmul.h"
#include "machine.h"
#include "median.h"
#include "progress_bar.h"
#include "sampling_flags.h"
#include "speculative/speculative.h"

namespace kakeya::cli {
namespace {

struct SpecBenchFlags : ModelFlags {
  CacheTypeFlags cache;
  std::vector<std::string> workloads = {"code"};
  std::vector<std::string> methods;  // empty: every drafter the model has
  std::vector<int> blocks = {0, 4, 8, 16};
  int n_predict = 128;
  int reps = 3;
  int threads = 0;
  SamplingFlags sampling = [] {
    SamplingFlags s;
    s.seed = 1;  // fixed, so that every run samples the same text
    return s;
  }();
  double synthetic_accept = 0;
  bool allow_degenerate = false;
  bool json = false;
  std::string csv;
  std::string plot;
};

struct Config {
  std::string method;  // "none": plain decoding
  int block = 0;
};

// One configuration's totals in one repetition, over every prompt.
struct RepTotals {
  long tokens = 0;
  long decoded = 0;  // tokens after the first, which comes from the prefill
  long prompt_tokens = 0;
  double prefill_ms = 0;
  double decode_ms = 0;
  double tok_s() const { return decode_ms > 0 ? decoded * 1000.0 / decode_ms : 0; }
};

struct ConfigResult {
  std::vector<RepTotals> reps;
  long steps = 0, accepted = 0;
  double draft_ms = 0, verify_ms = 0, decode_ms = 0;
  size_t peak_rss = 0;
  bool identical = true;
  std::set<size_t> degenerate_prompts;
};

// The weight type that holds most of the model's bytes.
std::string MainDType(const Model& model) {
  std::map<DType, uint64_t> bytes;
  for (const GgufTensor& t : model.gguf().tensors()) bytes[t.type] += t.nbytes;
  const auto best = std::max_element(bytes.begin(), bytes.end(), [](auto& a, auto& b) { return a.second < b.second; });
  return best == bytes.end() ? "unknown" : std::string(NameOf(best->first));
}

std::string SamplingName(const SamplingParams& s, SampledVerify verify) {
  if (s.temperature <= 0) return "greedy";
  char buf[256];
  int n = std::snprintf(buf, sizeof buf, "temp %.2g seed %llu top-k %d top-p %.2g min-p %.2g", s.temperature,
                        static_cast<unsigned long long>(s.seed), s.top_k, s.top_p, s.min_p);
  if (s.repeat_penalty != 1 || s.frequency_penalty != 0 || s.presence_penalty != 0) {
    n += std::snprintf(buf + n, sizeof buf - n, " penalties %.2g/%.2g/%.2g last %d", s.repeat_penalty,
                       s.frequency_penalty, s.presence_penalty, s.repeat_last_n);
  }
  if (s.dry_multiplier > 0) n += std::snprintf(buf + n, sizeof buf - n, " dry %.2g", s.dry_multiplier);
  if (verify == SampledVerify::kRejection) std::snprintf(buf + n, sizeof buf - n, " verify rejection");
  return buf;
}

void Validate(const SpecBenchFlags& f) {
  if (f.n_predict < 2) Fail("-n must be at least 2");
  if (f.reps < 1 || f.reps > 1000) Fail("--reps ", f.reps, " is out of range (1 .. 1000)");
  if (f.synthetic_accept < 0) Fail("--synthetic-accept ", f.synthetic_accept, " is negative (0 = off)");
  if (f.workloads.empty()) Fail("--workload is empty");
  if (f.blocks.empty()) Fail("--blocks is empty");
  for (int b : f.blocks) {
    if (b < 0 || b > kMaxBlock) Fail("--blocks value ", b, " is out of range (0 = adaptive, or 1 .. ", kMaxBlock, ")");
    if (f.synthetic_accept > 0 && b == 0) Fail("--synthetic-accept needs fixed blocks: drop 0 (adaptive) from --blocks");
    if (f.synthetic_accept > 0 && (f.synthetic_accept <= 1 || f.synthetic_accept > b)) {
      Fail("--synthetic-accept ", f.synthetic_accept, " is out of range for block ", b, ": give a mean in (1, ", b, "]");
    }
  }
}

int BenchSpec(SpecBenchFlags f) {
  Validate(f);
  UseShippedDefaults(f);  // -m defaults to the shipped model
  std::vector<Workload> workloads;
  for (const std::string& w : f.workloads) workloads.push_back(LoadWorkload(w, f.n_predict));

  const std::unique_ptr<Model> model = Model::Load(f.model);
  const Tokenizer& tok = model->tokenizer();
  std::vector<std::vector<std::vector<TokenId>>> prompts(workloads.size());  // [workload][prompt]
  int longest = 0;
  for (size_t w = 0; w < workloads.size(); ++w) {
    for (const BenchPrompt& p : workloads[w].prompts) {
      prompts[w].push_back(tok.Encode(p.text, true, true));
      longest = std::max(longest, static_cast<int>(prompts[w].back().size()) + workloads[w].n_predict);
    }
  }

  // Every drafter the model has, and auto, unless --spec names the methods.
  const std::vector<DrafterChoice> available = AvailableDrafters(SourcesOf(f), *model);
  std::vector<std::string> wanted = f.methods;
  if (wanted.empty()) {
    for (const DrafterChoice& c : available) wanted.emplace_back(c.kind->name);
    wanted.emplace_back("auto");
  }
  std::vector<std::string> methods;
  for (const std::string& m : wanted) {
    // Plain decoding always runs, first; a method named twice runs once.
    if (m != "none" && std::find(methods.begin(), methods.end(), m) == methods.end()) methods.push_back(m);
  }
  std::vector<Config> configs = {{"none", 0}};
  for (const std::string& m : methods) {
    for (int b : f.blocks) configs.push_back({m, b});
  }
  const int max_block = std::max(kAdaptiveMaxBlock, *std::max_element(f.blocks.begin(), f.blocks.end()));

  ContextOptions copts;
  copts.n_threads = ThreadsOrDefault(f.threads);
  copts.n_ctx = longest + max_block;
  copts.max_batch = std::max(max_block, std::min(kPrefillChunk, copts.n_ctx));
  copts.max_logit_rows = max_block;
  copts.cache_type_k = f.cache.k;
  copts.cache_type_v = f.cache.v;
  Context ctx(*model, copts);

  GenerateOptions g;
  g.ignore_eos = true;  // every configuration generates the same number of tokens
  g.sampling = f.sampling.Resolve();
  g.grammar = f.sampling.Grammar(model->tokenizer());

  // One drafter per method, reused across its blocks and prompts as a server
  // reuses a slot's drafter across requests (Begin starts each request).
  std::map<std::string, std::unique_ptr<Drafter>> drafters;
  for (const std::string& m : methods) {
    drafters[m] = MakeDrafterFrom(m, available, SetupOf(f, *model, ctx, g.sampling, max_block));
  }

  const bool synthetic = f.synthetic_accept > 0;
  // Rejection sampling keeps the distribution, not the bytes: only the
  // default verifier (match) and greedy decoding promise identical tokens.
  const bool rejection = g.sampling.temperature > 0 && f.sampling.Verify() == SampledVerify::kRejection;
  const bool check_identity = !synthetic && !rejection;
  std::vector<std::string> failures;
  std::vector<BenchRow> rows;
  size_t total_runs = 0;
  for (const auto& p : prompts) total_runs += configs.size() * (1 + p.size() * f.reps);
  ProgressBar progress(static_cast<int>(total_runs));

  for (size_t w = 0; w < workloads.size(); ++w) {
    const Workload& wl = workloads[w];
    g.n_predict = wl.n_predict;
    std::vector<ConfigResult> results(configs.size());
    std::vector<std::vector<TokenId>> plain_tokens(prompts[w].size());
    // rep -1 is the warm-up: every configuration once on the first prompt, not counted.
    for (int rep = -1; rep < f.reps; ++rep) {
      std::vector<RepTotals> totals(configs.size());
      const size_t n_prompts = rep < 0 ? 1 : prompts[w].size();
      for (size_t k = 0; k < n_prompts; ++k) {
        const std::vector<TokenId>& prompt = prompts[w][k];
        for (size_t c = 0; c < configs.size(); ++c) {
          const Config& cfg = configs[c];
          progress.Start(wl.name + ": " + (cfg.method == "none" ? "plain" : cfg.method + " block " + BlockName(cfg.block)));
          ResetPeakRss();
          SpecStats stats;
          GenerateResult r;
          const SpecOptions spec{.block = cfg.block,
                                 .max_block = cfg.block > 0 ? cfg.block : kAdaptiveMaxBlock,
                                 .verify = f.sampling.Verify(),
                                 .synthetic_accept = cfg.method == "none" ? 0 : f.synthetic_accept,
                                 .synthetic_seed = g.sampling.seed};
          r = Generate(ctx, cfg.method == "none" ? nullptr : drafters[cfg.method].get(), prompt, g, spec, nullptr, &stats);
          if (rep < 0) continue;
          ConfigResult& res = results[c];
          res.peak_rss = std::max(res.peak_rss, PeakRssBytes());
          RepTotals& t = totals[c];
          t.tokens += r.tokens.size();
          t.decoded += std::max<long>(0, static_cast<long>(r.tokens.size()) - 1);
          t.prompt_tokens += prompt.size();
          t.prefill_ms += r.prefill_ms;
          t.decode_ms += r.decode_ms;
          if (cfg.method != "none") {  // plain steps are no verify steps in the report
            res.steps += stats.steps;
            res.accepted += stats.accepted;
            res.draft_ms += stats.draft_ms;
            res.verify_ms += stats.verify_ms;
          }
          res.decode_ms += r.decode_ms;

          const std::string run = RunName(cfg.method, cfg.block, wl.prompts[k].name);
          if (cfg.method == "none") {
            plain_tokens[k] = r.tokens;
          } else if (check_identity) {
            const std::string diff = IdentityFailure(run, plain_tokens[k], r.tokens);
            if (!diff.empty()) {
              if (res.identical) failures.push_back(diff);  // the first per configuration
              res.identical = false;
            }
          }
          std::string text;
          for (TokenId id : r.tokens) text += tok.TokenToPiece(id, false);
          const std::string loop = DegenerationFailure(run, text);
          // A synthetic run commits the drafter's tokens, not the target's:
          // its text is reported, never a reason to fail.
          if (!loop.empty() && res.degenerate_prompts.insert(k).second && !f.allow_degenerate && !synthetic) {
            failures.push_back(loop);
          }
        }
      }
      if (rep >= 0) {
        for (size_t c = 0; c < configs.size(); ++c) results[c].reps.push_back(totals[c]);
      }
    }

    for (size_t c = 0; c < configs.size(); ++c) {
      const ConfigResult& res = results[c];
      std::vector<double> tok_s, prefill, speedup;
      for (int rep = 0; rep < f.reps; ++rep) {
        const RepTotals& t = res.reps[rep];
        tok_s.push_back(t.tok_s());
        prefill.push_back(t.prefill_ms > 0 ? t.prompt_tokens * 1000.0 / t.prefill_ms : 0);
        speedup.push_back(results[0].reps[rep].tok_s() > 0 ? t.tok_s() / results[0].reps[rep].tok_s() : 0);
      }
      const bool plain = configs[c].method == "none";
      BenchRow row;
      row.workload = wl.name;
      row.method = configs[c].method;
      row.block = configs[c].block;
      row.prompts = static_cast<int>(prompts[w].size());
      row.tokens = res.reps[0].tokens;
      row.prefill_tok_s = Median(prefill);
      row.decode_tok_s = Median(tok_s);
      row.speedup = Median(speedup);
      row.mean_accept_len = res.steps > 0 ? double(res.steps + res.accepted) / res.steps : 0;
      row.draft_share = res.decode_ms > 0 ? res.draft_ms / res.decode_ms : 0;
      row.verify_share = res.decode_ms > 0 ? res.verify_ms / res.decode_ms : 0;
      row.peak_rss_bytes = res.peak_rss;
      row.kv_bytes = ctx.cache().bytes();
      row.identical = plain ? "-" : !check_identity ? "skipped" : res.identical ? "yes" : "no";
      row.degenerate = static_cast<int>(res.degenerate_prompts.size());
      rows.push_back(row);
    }
  }

  BenchSetup setup;
  setup.machine = CpuModel();
  setup.cpu_target = ActiveCpuTarget();
  setup.model = std::filesystem::path(f.model).filename().string();
  setup.dtype = MainDType(*model);
  setup.threads = copts.n_threads;
  setup.sampling = SamplingName(g.sampling, f.sampling.Verify());
  setup.reps = f.reps;
  setup.synthetic_accept = f.synthetic_accept;

  if (f.json) {
    nlohmann::json out = ReportJson(setup, rows);
    out["failures"] = failures;
    std::puts(out.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
  } else {
    PrintTable(stdout, setup, rows);
    if (f.allow_degenerate) {
      const bool any = std::any_of(rows.begin(), rows.end(), [](const BenchRow& r) { return r.degenerate > 0; });
      if (any) std::printf("(degenerate outputs allowed by --allow-degenerate: reported, not failed)\n");
    }
  }
  if (!f.csv.empty()) AppendCsv(f.csv, setup, rows);
  if (!f.plot.empty()) WritePlotSvg(f.plot, setup, rows);
  std::fflush(stdout);
  for (const std::string& failure : failures) std::fprintf(stderr, "kakeya: bench failed: %s\n", failure.c_str());
  return failures.empty() ? 0 : 1;
}

constexpr const char* kHelp =
    "Speculative decoding against plain decoding on a workload, every --spec method at every --blocks size in "
    "the same run. Each repetition decodes every prompt plainly and with each configuration, alternating; a "
    "warm-up pass comes first; medians are reported, and speedup is the ratio to plain decoding in the same "
    "repetition. Every run is gated: each speculative output must equal plain decoding's token for token, and "
    "no output may degenerate (walls of identical lines, a short unit tiled 8+ times, a phrase cycle); either "
    "failure names the run and exits 1. The default sampling is seeded (--temp 0.8 --seed 1): the shipped "
    "model's greedy output loops, which the degeneration gate rejects, while a seeded sample is the same with "
    "and without speculation, so the identity gate holds for it as for greedy.";

}  // namespace

CLI::App* AddBenchSpecCommand(CLI::App& bench, Runner* runner) {
  CLI::App* spec = bench.add_subcommand("spec", kHelp);
  auto f = std::make_shared<SpecBenchFlags>();
  spec->add_option("-m,--model", f->model, "GGUF model file (default: the shipped model, with its drafters)")
      ->check(CLI::ExistingFile);
  spec->add_option("--draft", f->draft, "Drafter GGUF, as for `kakeya run` (used by the method of its kind and auto)")
      ->check(CLI::ExistingFile);
  AddDraftVocabFlag(*spec, *f);
  spec->add_option("--workload", f->workloads,
                   "Prompts, comma separated: code (function starts from files held out of the shipped model's "
                   "training corpus), code-edit (a function from the same files and a small edit of it: the "
                   "continuation copies it), prose (English paragraphs), long (one 2,048+-token generation), "
                   "file:PATH (a text file as one prompt, or JSONL with a \"prompt\" field per line)")
      ->delimiter(',')
      ->capture_default_str();
  spec->add_option("--spec", f->methods,
                   "Methods, comma separated, of the --spec values of `kakeya run` (default: every drafter the "
                   "model has, and auto); plain decoding always runs as the baseline")
      ->delimiter(',')
      ->check(CLI::IsMember(SpecNames()));
  spec->add_option("--blocks", f->blocks, "Rows per verify step, comma separated; 0 = adaptive (up to " + std::to_string(kAdaptiveMaxBlock) + ")")
      ->delimiter(',')
      ->capture_default_str();
  spec->add_option("-n,--n-predict", f->n_predict, "Tokens to generate per prompt (long: at least 2048)")
      ->capture_default_str();
  spec->add_option("--reps", f->reps, "Timed repetitions, after one warm-up (medians are reported)")
      ->capture_default_str();
  spec->add_option("-t,--threads", f->threads, "Threads (default: all hardware threads)");
  AddSamplingFlags(*spec, f->sampling);
  AddCacheTypeFlags(*spec, f->cache);
  spec->add_option("--synthetic-accept", f->synthetic_accept,
                   "Benchmarking only, never lossless: accept drafts at random so that a verify step commits TAU "
                   "tokens on average (bonus included, in (1, block]); needs fixed --blocks. Measures the "
                   "machinery apart from the drafter's quality; the identity gate is skipped");
  spec->add_flag("--allow-degenerate", f->allow_degenerate, "Report degenerate outputs instead of failing");
  spec->add_flag("--json", f->json, "Print one JSON object");
  spec->add_option("--csv", f->csv, "Append one row per configuration to this CSV file (header when new)");
  spec->add_option("--plot", f->plot, "Write an SVG of decode tok/s and speedup against block size per method");
  *runner = [f] { return BenchSpec(*f); };
  return spec;
}

}  // namespace kakeya::cli
