// `kakeya perplexity`: the cross-entropy a model assigns to text files.
//
// Each file is one document: BOS (when the model adds one) + its tokens + EOS.
// A document is cut into windows of --window tokens; each window starts from
// an empty cache, and every token after the first of the document is
// predicted exactly once (from the tokens before it in its window). This is
// tools/train/verify.py's held-out protocol, so the two numbers compare.
#include <chrono>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/error.h"
#include "base/portable_math.h"
#include "cache_flags.h"
#include "commands.h"
#include "engine/perplexity.h"
#include "model/context.h"
#include "model/model.h"

namespace kakeya::cli {
namespace {

struct PerplexityFlags {
  CacheTypeFlags cache;
  std::string model;
  std::vector<std::string> files;
  int window = 512;
  int batch = 64;
  int threads = 0;
  bool no_eos = false;
  bool json = false;
  bool kl = false;
};

// Where the bands of --kl begin, in positions of a window: the codec's exact
// window (ADR 0013) and the long-context bands of the gates.
constexpr int kBandStarts[] = {0, 256, 1024, 4096, 16384, 32768};

int Perplexity(const PerplexityFlags& f) {
  if (f.files.empty()) Fail("no input: pass one or more text files with -f");
  if (f.window < 1) Fail("--window must be at least 1, got ", f.window);
  if (f.batch < 1) Fail("--batch must be at least 1, got ", f.batch);
  const std::unique_ptr<Model> model = Model::Load(f.model);
  const Tokenizer& tok = model->tokenizer();
  if (!f.no_eos && tok.eos() < 0) Fail(f.model, ": the vocabulary has no EOS token; pass --no-eos");

  std::vector<std::vector<TokenId>> docs;
  int64_t n_bytes = 0, n_predicted = 0;
  for (const std::string& path : f.files) {
    const std::string text = ReadTextFile(path);
    n_bytes += static_cast<int64_t>(text.size());
    std::vector<TokenId> ids = tok.Encode(text, /*add_special=*/true, /*parse_special=*/false);
    if (!f.no_eos && (ids.empty() || ids.back() != tok.eos())) ids.push_back(tok.eos());
    if (ids.size() >= 2) n_predicted += static_cast<int64_t>(ids.size()) - 1;
    docs.push_back(std::move(ids));
  }
  if (n_predicted == 0) Fail("the files hold fewer than 2 tokens: nothing to predict");

  ContextOptions copts;
  copts.n_ctx = f.window;
  copts.max_batch = std::min(f.batch, f.window);
  copts.n_threads = ThreadsOrDefault(f.threads);
  copts.cache_type_k = f.cache.k;
  copts.cache_type_v = f.cache.v;
  Context ctx(*model, copts);

  const auto start = std::chrono::steady_clock::now();
  const auto report_progress = [&](const CrossEntropy& so_far) {
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::fprintf(stderr, "\rperplexity: %lld/%lld tokens, %.0f tok/s, running ppl %.3f   ",
                 static_cast<long long>(so_far.predicted), static_cast<long long>(n_predicted),
                 so_far.predicted / std::max(secs, 1e-9), PortableExp(so_far.nats / so_far.predicted));
  };
  Comparison cmp;
  if (f.kl) {
    ContextOptions exact = copts;
    exact.cache_type_k = exact.cache_type_v = KvType::kF32;
    Context reference(*model, exact);
    cmp = CompareDocuments(ctx, reference, docs, f.window, kBandStarts, report_progress);
  } else {
    cmp.ce = ScoreDocuments(ctx, docs, f.window, report_progress);
  }
  std::fputc('\n', stderr);
  const double nats = cmp.ce.nats;

  const double nats_per_token = nats / static_cast<double>(n_predicted);
  const double bits_per_byte = nats / PortableLog(2.0) / static_cast<double>(n_bytes);
  const std::string types = std::string(KvTypeName(f.cache.k)) + "/" + std::string(KvTypeName(f.cache.v));
  nlohmann::json bands = nlohmann::json::array();
  for (size_t b = 0; b < cmp.bands.size(); ++b) {
    const Divergence& d = cmp.bands[b];
    if (d.positions == 0) continue;
    const int end = b + 1 < cmp.bands.size() ? cmp.bands[b + 1].first_position : f.window;
    bands.push_back({{"positions", std::to_string(d.first_position) + "-" + std::to_string(std::min(end, f.window))},
                     {"tokens", d.positions},
                     {"mean_kl", d.kl_nats / d.positions},
                     {"top1_agreement", double(d.top1_agree) / d.positions}});
  }
  if (f.json) {
    nlohmann::json out = {{"files", f.files.size()},     {"tokens", n_predicted},
                          {"bytes", n_bytes},            {"window", f.window},
                          {"cache_types", types},        {"nats_per_token", nats_per_token},
                          {"perplexity", PortableExp(nats_per_token)}, {"bits_per_byte", bits_per_byte}};
    if (f.kl) {
      out["f32_perplexity"] = PortableExp(cmp.reference_ce.nats / n_predicted);
      out["kl_bands"] = bands;
    }
    std::puts(out.dump().c_str());
  } else {
    std::printf("%lld tokens predicted in %zu file(s), %lld bytes, window %d, cache %s\n",
                static_cast<long long>(n_predicted), f.files.size(), static_cast<long long>(n_bytes), f.window,
                types.c_str());
    std::printf("cross-entropy %.5f nats/token, perplexity %.4f, %.5f bits/byte\n", nats_per_token,
                PortableExp(nats_per_token), bits_per_byte);
    if (f.kl) {
      std::printf("against the f32 cache (perplexity %.4f):\n", PortableExp(cmp.reference_ce.nats / n_predicted));
      for (const auto& b : bands) {
        std::printf("  positions %-12s %8lld tokens  mean KL %.6f nats  top-1 agreement %.2f%%\n",
                    b["positions"].get<std::string>().c_str(), static_cast<long long>(b["tokens"].get<int64_t>()),
                    b["mean_kl"].get<double>(), 100 * b["top1_agreement"].get<double>());
      }
    }
  }
  return 0;
}

}  // namespace

Runner AddPerplexityCommand(CLI::App& app) {
  auto f = std::make_shared<PerplexityFlags>();
  app.description(
      "Cross-entropy of a model on text files (each file one document: BOS + tokens + EOS),\n"
      "in windows of --window tokens that each start from an empty cache; every token but\n"
      "the first is predicted once. Reports nats/token, perplexity and bits/byte.");
  app.add_option("-m,--model", f->model, "GGUF model file")->required()->check(CLI::ExistingFile);
  app.add_option("-f,--file", f->files, "Text file(s); repeat -f or list several")->required()->check(CLI::ExistingFile);
  app.add_option("-w,--window", f->window, "Tokens per window (default 512)");
  app.add_option("-b,--batch", f->batch, "Rows per forward pass (default 64)");
  app.add_option("-t,--threads", f->threads, "Threads (default: all hardware threads)");
  AddCacheTypeFlags(app, f->cache);
  app.add_flag("--no-eos", f->no_eos, "Do not append EOS to each document");
  app.add_flag("--json", f->json, "Print one JSON object");
  app.add_flag("--kl", f->kl,
               "Also run the model with the exact f32 cache on the same windows and report the mean KL divergence "
               "of this cache type's next-token distributions from it, and how often the argmaxes agree, by band of "
               "position in the window (as llama-perplexity --kl-divergence against its base)");
  return [f] { return Perplexity(*f); };
}

}  // namespace kakeya::cli
