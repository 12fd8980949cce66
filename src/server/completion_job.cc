#include "server/completion_job.h"

#include "base/error.h"

namespace kakeya {

CompletionJob::CompletionJob(Scheduler& scheduler, const Tokenizer& tokenizer, ServerCounters& counters,
                             const CompletionRequest& request, std::vector<TokenId> prompt, ResponseHeader header,
                             const ToolCallSyntax* tool_syntax, std::vector<TokenId> tool_markers,
                             std::shared_ptr<const GrammarMatcher> grammar)
    : scheduler_(scheduler), tokenizer_(tokenizer), counters_(counters), request_(request), header_(std::move(header)),
      channel_(std::make_shared<TokenChannel>()), completion_(tokenizer, request.stop, std::move(tool_markers)) {
  if (tool_syntax != nullptr) tool_parser_.emplace(*tool_syntax, request.tools.tools);
  GenerationRequest generation;
  generation.prompt = std::move(prompt);
  // No max_tokens: the context's end stops the generation ("length").
  generation.options.n_predict = request.max_tokens > 0 ? request.max_tokens : scheduler.options().n_ctx;
  generation.options.sampling = request.sampling;
  generation.options.grammar = std::move(grammar);
  GenerationCallbacks callbacks;
  const int n_top = request.logprobs ? request.top_logprobs : -1;
  callbacks.on_token = [channel = channel_, n_top](const TokenEvent& e) {
    TokenChannel::Token token{e.token, std::nullopt};
    // The scheduler gives logits only where they cost nothing extra; without
    // them logprobs stay null.
    if (n_top >= 0 && !e.logits.empty()) token.logprob = LogprobOf(e.logits, e.token, n_top);
    return channel->Push(std::move(token));
  };
  callbacks.on_done = [channel = channel_](const GenerationOutcome& outcome) { channel->Close(outcome); };
  try {
    id_ = scheduler_.Submit(std::move(generation), std::move(callbacks));
  } catch (const QueueFull&) {
    throw ApiError(503, "the request queue is full (" + std::to_string(scheduler_.options().max_queue) +
                            " waiting); try again shortly",
                   "server_error", "", "queue_full")
        .set_retry_after_s(1);
  } catch (const Error& e) {
    // The prompt and the sampling parameters were checked before, so what
    // is left is a scheduler that no longer takes requests.
    throw ApiError(503, e.what(), "server_error", "", "unavailable").set_retry_after_s(1);
  }
}

CompletionJob::~CompletionJob() {
  if (!finished()) Cancel();
}

CompletionText::Delta CompletionJob::Pull(std::chrono::milliseconds timeout) {
  if (finished()) return {};
  std::vector<TokenChannel::Token> tokens;
  const std::optional<GenerationOutcome> outcome = channel_->Wait(&tokens, timeout);
  CompletionText::Delta delta;
  auto add = [&](CompletionText::Delta d) {
    delta.text += d.text;
    for (auto& lp : d.logprobs) delta.logprobs.push_back(std::move(lp));
  };
  for (const TokenChannel::Token& t : tokens) {
    add(completion_.Push(t));
    if (completion_.stopped()) {
      channel_->Abandon();  // the scheduler stops at the next token
      break;
    }
  }
  if (outcome) add(completion_.Finish());
  if (tool_parser_) ReadToolCalls(delta, outcome.has_value());
  if (outcome) Finish(*outcome);
  text_ += delta.text;
  logprobs_.insert(logprobs_.end(), delta.logprobs.begin(), delta.logprobs.end());
  return delta;
}

void CompletionJob::ReadToolCalls(CompletionText::Delta& delta, bool last) {
  ParsedToolReply reply = tool_parser_->Push(delta.text);
  if (last) {
    ParsedToolReply rest = tool_parser_->Finish();
    reply.content += rest.content;
    for (ToolCall& call : rest.calls) reply.calls.push_back(std::move(call));
  }
  delta.text = std::move(reply.content);
  for (ToolCall& call : reply.calls) {
    // Random, so that ids stay unique across the turns of a conversation;
    // the index makes them unique within the reply whatever the draw.
    call.id = RandomId("call_") + std::to_string(tool_calls_.size());
    tool_calls_.push_back(call);
    delta.tool_calls.push_back(std::move(call));
  }
}

void CompletionJob::Cancel() {
  if (finished() || cancelled_by_client_) return;
  cancelled_by_client_ = true;
  scheduler_.Cancel(id_);  // first, so that the scheduler counts the stop that Abandon() causes as cancelled
  channel_->Abandon();
  counters_.CountFinish("cancelled");
}

void CompletionJob::Finish(const GenerationOutcome& outcome) {
  outcome_ = outcome;
  if (cancelled_by_client_) return;
  const std::optional<ApiError> failure = Failure();
  counters_.CountFinish(failure ? "error" : Summary().finish_reason);
}

CompletionSummary CompletionJob::Summary() const {
  CompletionSummary s;
  s.outcome = *outcome_;
  s.finish_reason = FinishReason(*outcome_, completion_.stopped());
  if (!tool_calls_.empty() && s.finish_reason == "stop") s.finish_reason = "tool_calls";
  s.drafter = scheduler_.drafter_name();
  s.seed = request_.sampling.seed;
  return s;
}

std::optional<ApiError> CompletionJob::Failure() const {
  if (!outcome_->error.empty()) {
    return ApiError(500, "the generation failed: " + outcome_->error, "server_error");
  }
  // Cancelled, and neither by a stop string nor by this client: shutdown.
  if (outcome_->cancelled && !completion_.stopped() && !cancelled_by_client_) {
    return ApiError(503, "the server is shutting down; the request was cancelled", "server_error", "", "unavailable");
  }
  return std::nullopt;
}

}  // namespace kakeya
