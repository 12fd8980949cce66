// One completion in flight: submitted to the scheduler, its tokens pulled
// from the channel and turned into client text (completion_text.h). Shared
// by the HTTP handler and the response's content provider, which httplib
// runs after the handler has returned; the scheduler's callbacks hold only
// the channel, so the job may go first.
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "chat/tool_call_parser.h"
#include "server/api_error.h"
#include "server/completion_text.h"
#include "server/metrics.h"
#include "server/openai_request.h"
#include "server/openai_response.h"
#include "server/scheduler.h"
#include "server/token_channel.h"

namespace kakeya {

class CompletionJob {
 public:
  // Submits the request. Throws ApiError 503 (with Retry-After) when the
  // queue is full or the server is shutting down.
  // `tool_syntax`: the syntax the reply is read for tool calls in, whose
  // single-token markers are `tool_markers`; null: the reply is all content.
  CompletionJob(Scheduler& scheduler, const Tokenizer& tokenizer, ServerCounters& counters,
                const CompletionRequest& request, std::vector<TokenId> prompt, ResponseHeader header,
                const ToolCallSyntax* tool_syntax = nullptr, std::vector<TokenId> tool_markers = {},
                std::shared_ptr<const GrammarMatcher> grammar = nullptr);
  // Cancels the generation if it is still running.
  ~CompletionJob();

  // Waits up to `timeout` for tokens; returns the text (and logprobs) that
  // can go to the client now. After the generation ended, finished() is true.
  CompletionText::Delta Pull(std::chrono::milliseconds timeout);
  bool finished() const { return outcome_.has_value(); }

  // The client went away: stops the generation.
  void Cancel();

  // After finished(): why it ended, and for a failure (an internal error, or
  // cancelled by shutdown) the error to report instead of a completion.
  CompletionSummary Summary() const;
  std::optional<ApiError> Failure() const;

  // All text (content, outside tool calls) and logprobs so far, for a
  // response that is not streamed, and the tool calls, each with its id.
  const std::string& text() const { return text_; }
  const std::vector<ToolCall>& tool_calls() const { return tool_calls_; }
  const std::vector<CompletionText::Logprob>& logprobs() const { return logprobs_; }
  const ResponseHeader& header() const { return header_; }
  const CompletionRequest& request() const { return request_; }
  const Tokenizer& tokenizer() const { return tokenizer_; }

 private:
  void Finish(const GenerationOutcome& outcome);
  // Moves the calls in `delta`'s text to its tool_calls; `last`: the text ends here.
  void ReadToolCalls(CompletionText::Delta& delta, bool last);

  Scheduler& scheduler_;
  const Tokenizer& tokenizer_;
  ServerCounters& counters_;
  CompletionRequest request_;
  ResponseHeader header_;
  std::shared_ptr<TokenChannel> channel_;
  uint64_t id_ = 0;
  CompletionText completion_;
  std::optional<ToolCallParser> tool_parser_;
  std::string text_;
  std::vector<ToolCall> tool_calls_;
  std::vector<CompletionText::Logprob> logprobs_;
  std::optional<GenerationOutcome> outcome_;
  bool cancelled_by_client_ = false;
};

}  // namespace kakeya
