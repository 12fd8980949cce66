#include "server/completion_endpoint.h"

#include <httplib.h>

#include <chrono>
#include <ctime>

#include "server/api_error.h"
#include "server/completion_job.h"
#include "server/sse.h"
#include "server/tool_grammar.h"

namespace kakeya {
namespace {

using nlohmann::json;

// How long a connection waits for tokens before it writes something anyway
// (a keep-alive comment or whitespace) to learn whether the client is there.
constexpr std::chrono::milliseconds kPollInterval{1000};

std::string NewResponseId(Endpoint endpoint) {
  return RandomId(endpoint == Endpoint::kCompletions ? "cmpl-" : "chatcmpl-");
}

json LogprobsOrNull(const CompletionJob& job, const std::vector<CompletionText::Logprob>& logprobs) {
  // Null, not empty, when nothing could be computed (the scheduler gave no logits).
  if (!job.request().logprobs || logprobs.empty()) return nullptr;
  return LogprobsJson(job.request().endpoint, logprobs, job.tokenizer());
}

// Pulls until the generation ends or `wait` has passed (what was pulled
// stays in the job's text).
void PullFor(CompletionJob& job, std::chrono::milliseconds wait) {
  const auto deadline = std::chrono::steady_clock::now() + wait;
  while (!job.finished()) {
    const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return;
    job.Pull(left);
  }
}

bool Write(httplib::DataSink& sink, std::string_view bytes) { return sink.write(bytes.data(), bytes.size()); }

// Server-sent events: a chunk per pull that brought text, the last chunk
// with finish_reason, the usage chunk if asked, then [DONE]. A failure after
// the stream began (the status line is gone) is an {"error": ...} event.
void StreamEvents(const std::shared_ptr<CompletionJob>& job, httplib::Response& response) {
  response.set_header("Cache-Control", "no-cache");
  response.set_chunked_content_provider(
      "text/event-stream",
      [job, first = true, calls_sent = size_t{0},
       last_write = std::chrono::steady_clock::now()](size_t, httplib::DataSink& sink) mutable {
        const bool chat = job->request().endpoint == Endpoint::kChatCompletions;
        // A chat stream opens with the assistant's role, at once.
        CompletionText::Delta delta = first && chat ? CompletionText::Delta{} : job->Pull(kPollInterval);
        const bool has_text = !delta.text.empty() || !delta.logprobs.empty() || !delta.tool_calls.empty();
        const auto now = std::chrono::steady_clock::now();
        if (has_text || (first && chat)) {
          ChunkParts parts{delta.text, LogprobsOrNull(*job, delta.logprobs), nullptr, first, job->request().include_usage,
                           std::move(delta.tool_calls), calls_sent};
          calls_sent += parts.tool_calls.size();
          if (!Write(sink, SseEvent(StreamChunk(job->header(), parts)))) return false;
          first = false;
          last_write = now;
        } else if (!job->finished() && now - last_write >= kPollInterval) {
          if (!Write(sink, kSseKeepAlive)) return false;  // the client is gone: the releaser cancels the job
          last_write = now;
        }
        if (!job->finished()) return true;
        if (const auto failure = job->Failure()) {
          if (!Write(sink, SseEvent(failure->Body()))) return false;
        } else {
          const CompletionSummary summary = job->Summary();
          ChunkParts last{"", nullptr, &summary, false, job->request().include_usage, {}, 0};
          if (!Write(sink, SseEvent(StreamChunk(job->header(), last)))) return false;
          if (job->request().include_usage && !Write(sink, SseEvent(UsageChunk(job->header(), summary)))) return false;
        }
        if (!Write(sink, kSseDone)) return false;
        sink.done();
        return true;
      },
      [job](bool) { job->Cancel(); });
}

std::string WholeResponse(const CompletionJob& job) {
  return DumpJson(CompletionResponse(job.header(), job.text(), LogprobsOrNull(job, job.logprobs()), job.Summary(),
                                     job.tool_calls()));
}

// One JSON object. Quick answers get an ordinary response (with its real
// status on failure); slower ones switch to a chunked body led by
// whitespace, written while the generation runs, and a failure is then an
// {"error": ...} body under status 200.
void RespondWhole(const std::shared_ptr<CompletionJob>& job, httplib::Response& response) {
  PullFor(*job, kPollInterval);
  if (job->finished()) {
    if (const auto failure = job->Failure()) throw *failure;
    response.set_content(WholeResponse(*job), "application/json");
    return;
  }
  response.set_chunked_content_provider(
      "application/json",
      [job](size_t, httplib::DataSink& sink) {
        PullFor(*job, kPollInterval);
        if (!job->finished()) return Write(sink, " ");
        const auto failure = job->Failure();
        if (!Write(sink, failure ? DumpJson(failure->Body()) : WholeResponse(*job))) return false;
        sink.done();
        return true;
      },
      [job](bool) { job->Cancel(); });
}

}  // namespace

CompletionEndpoint::CompletionEndpoint(const Model& model, std::string model_id, Scheduler& scheduler,
                                       const ChatPrompt& chat, ServerCounters& counters)
    : model_(model),
      model_id_(std::move(model_id)),
      scheduler_(scheduler),
      chat_(chat),
      counters_(counters),
      tokens_(std::make_shared<TokenTrie>(model.tokenizer())) {}

std::vector<TokenId> CompletionEndpoint::PromptTokens(const CompletionRequest& r) const {
  const Tokenizer& tok = model_.tokenizer();
  const std::string param = r.endpoint == Endpoint::kCompletions ? "prompt" : "messages";
  std::vector<TokenId> prompt;
  if (r.endpoint == Endpoint::kChatCompletions) {
    prompt = chat_.Tokens(r.messages, r.tools);
  } else if (r.prompt_is_ids) {
    for (size_t i = 0; i < r.prompt_ids.size(); ++i) {
      if (r.prompt_ids[i] >= tok.n_vocab()) {
        throw BadRequest(param, "prompt[" + std::to_string(i) + "] = " + std::to_string(r.prompt_ids[i]) +
                                    " is not a token id of this model (its vocabulary has " +
                                    std::to_string(tok.n_vocab()) + ")");
      }
    }
    prompt = r.prompt_ids;
  } else {
    // As `kakeya run -p` encodes its prompt, so the two generate the same.
    prompt = tok.Encode(r.prompt_text, /*add_special=*/true, /*parse_special=*/true);
  }
  if (prompt.empty()) throw BadRequest(param, "the prompt is empty");
  const int n_ctx = scheduler_.options().n_ctx;
  if (static_cast<int>(prompt.size()) >= n_ctx) {
    throw BadRequest(param, "the prompt is " + std::to_string(prompt.size()) + " tokens but the context holds " +
                                std::to_string(n_ctx) + " (prompt and completion together; the server's -c sets it)");
  }
  return prompt;
}

void CompletionEndpoint::Handle(Endpoint endpoint, const std::string& body, httplib::Response& response) {
  const CompletionRequest r = ParseCompletionRequest(body, endpoint, model_id_);
  std::vector<TokenId> prompt = PromptTokens(r);
  const ResponseHeader header{endpoint, NewResponseId(endpoint), static_cast<int64_t>(std::time(nullptr)), model_id_};
  // tool_choice "none": the tools were rendered (PromptTokens) but the reply is all content.
  const ToolCallSyntax* tool_syntax = r.tools.parse_calls() ? chat_.tool_syntax() : nullptr;
  std::shared_ptr<const Grammar> constraint = r.grammar;
  if (tool_syntax != nullptr) {
    if (std::shared_ptr<const Grammar> calls = RequiredToolCallGrammar(*tool_syntax, r.tools)) {
      if (constraint != nullptr) {
        throw BadRequest("tool_choice", "a required tool call and response_format (or grammar) both constrain the "
                                        "reply; send one");
      }
      constraint = std::move(calls);
    }
  }
  std::shared_ptr<const GrammarMatcher> grammar;
  if (constraint != nullptr) grammar = std::make_shared<GrammarMatcher>(constraint, tokens_);
  auto* submitted = new CompletionJob(scheduler_, model_.tokenizer(), counters_, r, std::move(prompt), header,
                                      tool_syntax, tool_syntax ? chat_.tool_marker_tokens() : std::vector<TokenId>{},
                                      std::move(grammar));
  ++open_jobs_;
  const std::shared_ptr<CompletionJob> job(submitted, [this](CompletionJob* j) {
    delete j;
    --open_jobs_;
  });
  if (r.stream) {
    StreamEvents(job, response);
  } else {
    RespondWhole(job, response);
  }
}

}  // namespace kakeya
