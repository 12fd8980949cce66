// kakeya serve's HTTP side (cpp-httplib): the OpenAI-compatible routes,
// --api-key, --max-body, errors as OpenAI shapes them, and the graceful
// stop. Routes:
//   GET  /health                  {"status": "ok"} (no key needed)
//   GET  /v1/models, /v1/models/ID the one model served
//   POST /v1/completions          completion_endpoint.h
//   POST /v1/chat/completions     completion_endpoint.h
//   GET  /metrics                 Prometheus text (metrics.h)
//   GET  /, /app.js, ...          the chat page (web_assets.h; no key needed)
#pragma once

#include <atomic>
#include <cstddef>
#include <memory>
#include <string>

#include "model/model.h"
#include "server/chat_prompt.h"
#include "server/completion_endpoint.h"
#include "server/metrics.h"
#include "server/scheduler.h"

namespace httplib {
class Server;
}  // namespace httplib

namespace kakeya {

struct HttpOptions {
  std::string host = "127.0.0.1";
  int port = 8080;                 // 0: any free port (Bind returns it)
  std::string api_key;             // empty: no authentication
  size_t max_body = 4 << 20;       // request bodies above this get 413 unread
  int threads = 8;                 // connections served at once (each stream holds one)
};

class HttpServer {
 public:
  HttpServer(const Model& model, std::string model_id, Scheduler& scheduler, const ChatPrompt& chat,
             const HttpOptions& options);
  ~HttpServer();

  // Binds host:port and returns the port. Throws Error naming the address.
  int Bind();
  // Serves until Stop(); returns when every connection's handler has.
  void Serve();
  // Answers new requests with 503 while the running ones go on.
  void Drain();
  // Drains, waits (5 s at most) for the responses in progress to be
  // written, then closes the listening socket; Serve returns. Called before
  // Serve has started listening (a signal during start-up), Serve does not
  // start, or returns at once.
  void Stop();

 private:
  void AddRoutes();

  std::string model_id_;
  Scheduler& scheduler_;
  HttpOptions options_;
  ServerCounters counters_;
  CompletionEndpoint completions_;
  std::unique_ptr<httplib::Server> http_;
  std::atomic<bool> draining_{false};
  std::atomic<bool> stop_requested_{false};
  std::atomic<bool> serving_{false};  // inside Serve
  const int64_t started_;  // Unix seconds, the models' "created"
};

}  // namespace kakeya
