// `kakeya serve`: an OpenAI-compatible HTTP server (src/server/http_server.h)
// over N slots of one model (src/server/scheduler.h).
#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <thread>

#include "base/error.h"
#include "cache_flags.h"
#include "commands.h"
#include "drafter_choice.h"
#include "engine/limits.h"
#include "server/chat_prompt.h"
#include "server/http_server.h"
#include "server/scheduler.h"

namespace kakeya::cli {
namespace {

struct ServeFlags : ModelFlags {
  CacheTypeFlags cache;
  std::string host = "127.0.0.1";
  int port = 8080;
  int slots = 4;
  int n_ctx = 0;
  int threads = 0;
  std::string api_key;
  int64_t max_body = 4 << 20;
  int max_queue = 64;
};

// Running requests may finish for this long after the first SIGINT/SIGTERM;
// then (or at a second signal) they are cancelled.
constexpr auto kShutdownGrace = std::chrono::seconds(10);
// Blocks SIGINT and SIGTERM in this thread and in every thread started after
// (they inherit the mask), so that only sigwait sees them; and ignores
// SIGPIPE, which a write to a client that went away would raise.
sigset_t BlockStopSignals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  signal(SIGPIPE, SIG_IGN);
  return set;
}

// After the first signal: running requests finish, for at most
// kShutdownGrace; a second signal cancels them at once.
void FinishOrCancel(const sigset_t& stop_signals, Scheduler& scheduler) {
  const auto deadline = std::chrono::steady_clock::now() + kShutdownGrace;
  bool cancel = false;
  for (;;) {
    const SchedulerMetrics m = scheduler.Metrics();
    if (m.slots_busy == 0 && m.queued == 0) break;
    if (std::chrono::steady_clock::now() >= deadline) {
      std::fprintf(stderr, "kakeya: cancelling the requests still running after %lld s\n",
                   static_cast<long long>(kShutdownGrace.count()));
      cancel = true;
      break;
    }
    const timespec poll{0, 100'000'000};
    if (sigtimedwait(&stop_signals, nullptr, &poll) > 0) {
      std::fprintf(stderr, "kakeya: second signal: cancelling the running requests\n");
      cancel = true;
      break;
    }
  }
  scheduler.Shutdown(cancel);
}

int Serve(const ServeFlags& f) {
  if (f.port < 0 || f.port > 65535) Fail("--port ", f.port, " is out of range (0 .. 65535; 0 picks a free port)");
  if (f.max_body < 1) Fail("--max-body ", f.max_body, " must be at least 1 byte");
  if (f.max_queue < 0 || f.max_queue > 4096) Fail("--max-queue ", f.max_queue, " is out of range (0 .. 4096)");
  const sigset_t stop_signals = BlockStopSignals();

  const std::unique_ptr<Model> model = Model::Load(f.model);
  SchedulerOptions options;
  options.slots = f.slots;
  options.n_ctx = ContextSizeOrDefault(f.n_ctx, model->hparams().n_ctx_train);
  options.n_threads = ThreadsOrDefault(f.threads);
  options.max_queue = f.max_queue;
  options.max_step_rows = std::min(kPrefillChunk, options.n_ctx);
  options.max_block = kAdaptiveMaxBlock;
  options.cache_type_k = f.cache.k;
  options.cache_type_v = f.cache.v;
  // One drafter per slot, on the slot's context. Sampling drafters draw with
  // the default filters; verification keeps every request's output exact
  // whatever its own sampling parameters (auto proposes greedily anyway).
  const DrafterFactory make_drafter = [&](Context& slot) {
    return MakeDrafter(f.spec, SourcesOf(f), SetupOf(f, *model, slot, SamplingParams{}, options.max_block));
  };
  Scheduler scheduler(*model, options, make_drafter);
  const ChatPrompt chat(*model);

  HttpOptions http_options;
  http_options.host = f.host;
  http_options.port = f.port;
  http_options.api_key = f.api_key;
  http_options.max_body = static_cast<size_t>(f.max_body);
  // A thread per connection: every slot and queued request can be streaming,
  // with a few to spare for /health and /metrics.
  http_options.threads = options.slots + options.max_queue + 4;
  const std::string model_id = std::filesystem::path(f.model).stem().string();
  HttpServer http(*model, model_id, scheduler, chat, http_options);
  const int port = http.Bind();

  std::printf("kakeya: listening on http://%s:%d/v1 (OpenAI API)%s\n", f.host.c_str(), port,
              f.api_key.empty() ? "" : ", API key required");
  std::printf("kakeya: model %s (%s), drafter %s, %d slots of %d tokens, %d threads, %s\n", model_id.c_str(),
              f.model.c_str(), scheduler.drafter_name().c_str(), options.slots, options.n_ctx, options.n_threads,
              chat.description().c_str());
  std::fflush(stdout);

  std::atomic<bool> stopping{false};
  std::thread server([&] {
    http.Serve();
    // Serve only returns early if listening failed: wake the main thread.
    if (!stopping) kill(getpid(), SIGTERM);
  });
  int signal_number = 0;
  sigwait(&stop_signals, &signal_number);
  stopping = true;
  std::fprintf(stderr, "kakeya: %s: no new requests; finishing the running ones (a second signal cancels them)\n",
               strsignal(signal_number));
  http.Drain();
  FinishOrCancel(stop_signals, scheduler);
  http.Stop();
  server.join();
  std::fprintf(stderr, "kakeya: stopped\n");
  return 0;
}

}  // namespace

Runner AddServeCommand(CLI::App& app) {
  auto f = std::make_shared<ServeFlags>();
  AddModelFlags(app, *f, ". Every slot gets its own drafter");
  app.add_option("--host", f->host,
                 "Address to listen on; 0.0.0.0 listens on every interface (then set --api-key)")
      ->capture_default_str();
  app.add_option("--port", f->port, "TCP port; 0 picks a free one (printed at start)")->capture_default_str();
  app.add_option("--slots", f->slots, "Requests decoded at once (each holds a KV cache of -c tokens)")
      ->capture_default_str();
  app.add_option("-c,--ctx-size", f->n_ctx,
                 "Context of each slot in tokens, prompt and completion together (default: min(training context, " +
                     std::to_string(kDefaultContextSize) + "))");
  app.add_option("-t,--threads", f->threads, "Threads for the forward passes (default: all hardware threads)");
  AddCacheTypeFlags(app, f->cache);
  app.add_option("--api-key", f->api_key,
                 "Require 'Authorization: Bearer KEY' on every route but /health (401 otherwise)");
  app.add_option("--max-body", f->max_body, "Largest request body in bytes; larger ones get 413 unread")
      ->capture_default_str();
  app.add_option("--max-queue", f->max_queue,
                 "Requests that may wait for a free slot; more get 503 with Retry-After")
      ->capture_default_str();
  app.footer(
      "Routes: GET /health, GET /v1/models, POST /v1/completions, POST /v1/chat/completions (both with "
      "\"stream\": true as server-sent events), GET /metrics (Prometheus). SIGINT or SIGTERM stops accepting "
      "requests and lets the running ones finish (10 s at most; a second signal cancels them), then exits 0.");
  return [f] {
    ServeFlags flags = *f;
    UseShippedDefaults(flags);
    return Serve(flags);
  };
}

}  // namespace kakeya::cli
