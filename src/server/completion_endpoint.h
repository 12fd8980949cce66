// POST /v1/completions and /v1/chat/completions: the parsed request becomes
// a scheduler request; its tokens come back through a TokenChannel and go to
// the client as one JSON response or as server-sent events.
//
// A client that goes away is noticed when a write to it fails; its request
// is then cancelled and its slot freed before the scheduler's next step.
// Streams write a comment line while no token comes (queued, or a long
// prefill), and a response that is not streamed and takes longer than a
// second is sent chunked, led by whitespace written while it waits (JSON
// allows it before the value), so that both notice a departed client too.
#pragma once

#include <atomic>
#include <string>

#include "model/model.h"
#include "server/chat_prompt.h"
#include "server/metrics.h"
#include "server/openai_request.h"
#include "server/scheduler.h"

namespace httplib {
struct Response;
}  // namespace httplib

namespace kakeya {

class CompletionEndpoint {
 public:
  CompletionEndpoint(const Model& model, std::string model_id, Scheduler& scheduler, const ChatPrompt& chat,
                     ServerCounters& counters);

  // Answers one request. Throws ApiError for a request refused before any
  // byte of the response was sent (bad field, prompt too long, full queue).
  void Handle(Endpoint endpoint, const std::string& body, httplib::Response& response);

  // Responses still being generated or written (a stream's last bytes go
  // out after its handler returned).
  int open_jobs() const { return open_jobs_; }

 private:
  std::vector<TokenId> PromptTokens(const CompletionRequest& request) const;

  const Model& model_;
  std::string model_id_;
  Scheduler& scheduler_;
  const ChatPrompt& chat_;
  ServerCounters& counters_;
  std::shared_ptr<const TokenTrie> tokens_;  // the vocabulary as grammars walk it, built once
  std::atomic<int> open_jobs_{0};
};

}  // namespace kakeya
