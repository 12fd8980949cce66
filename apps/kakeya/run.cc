// `kakeya run`: generate from a prompt, streaming text or printing one JSON object.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <thread>

#include <nlohmann/json.hpp>

#include "base/error.h"
#include "cache_flags.h"
#include "commands.h"
#include "drafter_choice.h"
#include "sampling_flags.h"
#include "engine/generate.h"
#include "engine/limits.h"
#include "kernels/cpu/matmul.h"
#include "machine.h"
#include "roofline.h"
#include "speculative/speculative.h"

namespace kakeya::cli {
namespace {

struct RunFlags : ModelFlags {
  CacheTypeFlags cache;
  std::string prompt;
  std::string prompt_file;
  int n_predict = 256;
  SamplingFlags sampling;
  int threads = 0;
  int n_ctx = 0;
  bool ignore_eos = false;
  int n_top = 0;
  bool json = false;
  int block = 0;  // 0: adaptive
  bool block_given = false;
  bool spec_trace = false;
};

nlohmann::json AcceptByPos(const std::vector<int>& drafted, const std::vector<int>& accepted) {
  nlohmann::json by_pos = nlohmann::json::array();
  for (size_t i = 0; i < drafted.size() && drafted[i] > 0; ++i) by_pos.push_back(double(accepted[i]) / drafted[i]);
  return by_pos;
}

nlohmann::json SpecJson(const SpecStats& s) {
  nlohmann::json drafters = nlohmann::json::array();
  for (const DrafterStats& d : s.by_drafter) {
    drafters.push_back({{"name", d.name},
                        {"steps", d.steps},
                        {"drafted", d.drafted},
                        {"accepted", d.accepted},
                        {"mean_accept_len", d.steps > 0 ? double(d.steps + d.accepted) / d.steps : 0.0},
                        {"accept_by_pos", AcceptByPos(d.drafted_by_pos, d.accepted_by_pos)},
                        {"draft_ms", d.draft_ms},
                        {"verify_ms", d.verify_ms}});
  }
  return {{"method", s.method},
          {"block", s.block > 0 ? nlohmann::json(s.block) : nlohmann::json("adaptive")},
          {"steps", s.steps},
          {"drafted", s.drafted},
          {"accepted", s.accepted},
          {"mean_accept_len", s.mean_accept_len()},
          {"accept_by_pos", AcceptByPos(s.drafted_by_pos, s.accepted_by_pos)},
          {"draft_ms", s.draft_ms},
          {"verify_ms", s.verify_ms},
          {"commit_ms", s.commit_ms},
          {"drafters", drafters}};
}

nlohmann::json TraceJson(const SpecStats& s) {
  nlohmann::json trace = nlohmann::json::array();
  for (const SpecTraceStep& step : s.trace) trace.push_back({{"pos", step.pos}, {"draft", step.draft}, {"accepted", step.accepted}});
  return trace;
}

double MsSince(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

int Run(const RunFlags& f) {
  const std::string prompt_text = ReadPrompt(f.prompt, f.prompt_file);
  if (f.n_predict < 0) Fail("-n ", f.n_predict, " is negative");
  if (f.n_top < 0 || f.n_top > 1000) Fail("--top ", f.n_top, " is out of range (0 .. 1000)");

  const auto t_load = std::chrono::steady_clock::now();
  const std::unique_ptr<Model> model = Model::Load(f.model);
  const HParams& hp = model->hparams();
  ContextOptions copts;
  copts.n_ctx = ContextSizeOrDefault(f.n_ctx, hp.n_ctx_train);
  copts.n_threads = ThreadsOrDefault(f.threads);
  copts.max_batch = std::min(kPrefillChunk, copts.n_ctx);
  if (f.block_given && (f.block < 1 || f.block > kMaxBlock)) {
    Fail("--block ", f.block, " is out of range: give 1 .. ", kMaxBlock, " rows per verify step (omit it for adaptive)");
  }
  const int max_block = f.block > 0 ? f.block : kAdaptiveMaxBlock;
  copts.max_batch = std::max(copts.max_batch, max_block);
  copts.max_logit_rows = max_block;
  copts.cache_type_k = f.cache.k;
  copts.cache_type_v = f.cache.v;
  Context ctx(*model, copts);

  const Tokenizer& tok = model->tokenizer();
  const std::vector<TokenId> prompt = tok.Encode(prompt_text, true, true);

  GenerateOptions gopts;
  gopts.n_predict = f.n_predict;
  gopts.ignore_eos = f.ignore_eos;
  gopts.n_top = f.n_top;
  gopts.sampling = f.sampling.Resolve();
  gopts.grammar = f.sampling.Grammar(model->tokenizer());
  const std::unique_ptr<Drafter> drafter =
      MakeDrafter(f.spec, SourcesOf(f), SetupOf(f, *model, ctx, gopts.sampling, max_block));
  const double load_ms = MsSince(t_load);

  TokenCallback stream;
  if (!f.json) {
    std::fwrite(prompt_text.data(), 1, prompt_text.size(), stdout);
    std::fflush(stdout);
    stream = [&](TokenId id) {
      if (!f.ignore_eos && tok.IsEndOfGeneration(id)) return true;
      const std::string piece = tok.TokenToPiece(id, false);
      std::fwrite(piece.data(), 1, piece.size(), stdout);
      std::fflush(stdout);
      return true;
    };
  }
  SpecStats stats;
  const SpecOptions spec{.block = f.block, .max_block = max_block, .trace = f.spec_trace, .verify = f.sampling.Verify()};
  const GenerateResult r = Generate(ctx, drafter.get(), prompt, gopts, spec, stream, &stats);

  const int n_decoded = std::max<int>(0, static_cast<int>(r.tokens.size()) - 1);
  const double prefill_tok_s = r.prefill_ms > 0 ? prompt.size() * 1000.0 / r.prefill_ms : 0;
  // The first generated token comes from the prefill's logits; decode steps
  // are the forwards after it.
  const double decode_tok_s = r.decode_ms > 0 ? n_decoded * 1000.0 / r.decode_ms : 0;
  // Weights read per second of decoding (each forward reads them once, a
  // verify step as a plain one), against what the memory can stream: how
  // close decoding runs to its bound. Measured after the generation, and
  // after the peak RSS is taken, on a small buffer to keep this quick.
  const size_t peak_rss = PeakRssBytes();
  const int forwards = stats.steps;
  const double weights_gbps = r.decode_ms > 0 ? forwards * (ctx.weight_bytes_read() / 1e9) / (r.decode_ms / 1000.0) : 0;
  const double roofline_gbps = MeasureReadBandwidthGBps(ctx.pool(), size_t{256} << 20);
  const double roofline_share = roofline_gbps > 0 ? weights_gbps / roofline_gbps : 0;

  if (f.json) {
    std::string text;
    for (TokenId id : r.tokens) text += tok.TokenToPiece(id, false);
    nlohmann::json out;
    out["prompt_tokens"] = r.prompt_tokens;
    out["tokens"] = r.tokens;
    out["text"] = text;
    out["stop"] = StopReasonName(r.stop);
    out["seed"] = gopts.sampling.seed;
    if (drafter) out["spec"] = SpecJson(stats);
    if (drafter && f.spec_trace) out["spec"]["trace"] = TraceJson(stats);
    if (f.n_top > 0) {
      nlohmann::json top = nlohmann::json::array();
      for (const auto& step : r.top) {
        nlohmann::json entries = nlohmann::json::array();
        for (const TopLogit& t : step) entries.push_back({{"id", t.id}, {"logit", t.logit}});
        top.push_back(entries);
      }
      out["top"] = top;
    }
    const KvCache& kv = ctx.cache();
    out["memory"] = {{"kv_bytes", kv.bytes()},
                     {"kv_full_bytes_per_token", kv.full_bytes_per_token()},
                     {"kv_ring_bytes", kv.ring_bytes()},
                     {"peak_rss_bytes", peak_rss}};
    out["timings"] = {{"load_ms", load_ms},
                      {"prefill_ms", r.prefill_ms},
                      {"decode_ms", r.decode_ms},
                      {"prefill_tok_s", prefill_tok_s},
                      {"decode_tok_s", decode_tok_s},
                      {"weights_gbps", weights_gbps},
                      {"roofline_gbps", roofline_gbps},
                      // Generated tokens over prefill + decode time: what a user waits for.
                      {"e2e_tok_s", r.tokens.size() * 1000.0 / std::max(1e-9, r.prefill_ms + r.decode_ms)}};
    // Byte tokens may not be valid UTF-8 on their own: replace, don't throw.
    std::puts(out.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
  } else {
    std::printf("\n");
    std::fflush(stdout);
    std::fprintf(stderr,
                 "kakeya: load %.0f ms | prompt %zu tok, %.1f ms (%.1f tok/s) | generated %zu tok, "
                 "%.1f ms (%.1f tok/s) | stop: %s | %d threads, %s\n",
                 load_ms, prompt.size(), r.prefill_ms, prefill_tok_s, r.tokens.size(), r.decode_ms,
                 decode_tok_s, StopReasonName(r.stop), copts.n_threads, ActiveCpuTarget());
    std::fprintf(stderr, "kakeya: decode read weights at %.1f GB/s, %.0f%% of the %.1f GB/s memory roofline\n",
                 weights_gbps, 100 * roofline_share, roofline_gbps);
    if (drafter) {
      std::fprintf(stderr, "kakeya: spec %s | %d steps, %.2f tokens/step | %d of %d drafts accepted | draft %.1f ms, verify %.1f ms\n",
                   stats.method.c_str(), stats.steps, stats.mean_accept_len(), stats.accepted, stats.drafted,
                   stats.draft_ms, stats.verify_ms);
      if (stats.by_drafter.size() > 1) {
        for (const DrafterStats& d : stats.by_drafter) {
          std::fprintf(stderr, "kakeya:   %s: %d steps, %.2f tokens/step, %d of %d accepted\n", d.name.c_str(), d.steps,
                       d.steps > 0 ? double(d.steps + d.accepted) / d.steps : 0.0, d.accepted, d.drafted);
        }
      }
    }
  }
  return 0;
}

}  // namespace

Runner AddRunCommand(CLI::App& app) {
  auto f = std::make_shared<RunFlags>();
  AddModelFlags(app, *f);
  app.add_option("-p,--prompt", f->prompt, "Prompt text");
  app.add_option("-f,--file", f->prompt_file, "Read the prompt from a file");
  app.add_option("-n,--n-predict", f->n_predict, "Tokens to generate at most")->capture_default_str();
  AddSamplingFlags(app, f->sampling);
  AddCacheTypeFlags(app, f->cache);
  app.add_option("-t,--threads", f->threads, "Threads (default: all hardware threads)");
  app.add_option("-c,--ctx-size", f->n_ctx, "Context size in tokens (default: min(training context, " + std::to_string(kDefaultContextSize) + "))");
  app.add_flag("--ignore-eos", f->ignore_eos, "Do not stop at end-of-generation tokens");
  app.add_option("--top", f->n_top, "With --json: record the K best raw logits of every step");
  app.add_flag("--json", f->json, "Print one JSON object instead of streaming text");
  app.add_flag("--spec-trace", f->spec_trace, "With --json: record every verify step (position, proposals, accepted) in spec.trace");
  CLI::Option* block = app.add_option("--block", f->block, "Rows per verify step (1 + drafted tokens), 1.." + std::to_string(kMaxBlock) +
                                           "; default: adaptive up to " + std::to_string(kAdaptiveMaxBlock));
  return [f, block] {
    f->block_given = block->count() > 0;
    RunFlags flags = *f;
    UseShippedDefaults(flags);
    return Run(flags);
  };
}

}  // namespace kakeya::cli
