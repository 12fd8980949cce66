// The JSON kakeya answers with, shaped as OpenAI's: whole responses, stream
// chunks and logprobs, for /v1/completions ("text_completion") and
// /v1/chat/completions ("chat.completion" and ".chunk").
//
// Every response, and the last chunk of a stream, also carries the extension
// field "kakeya": the seed used, the speculative statistics (drafter, verify
// steps, tokens drafted and accepted, mean tokens committed per step) and
// the timings (queue, time to first token, total) of the request.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "server/completion_text.h"
#include "server/openai_request.h"
#include "server/scheduler.h"

namespace kakeya {

// `prefix` and 16 random hex digits: the ids of responses ("chatcmpl-...")
// and of tool calls ("call_..."), unique across requests and turns.
std::string RandomId(const std::string& prefix);

// What every object of one response shares.
struct ResponseHeader {
  Endpoint endpoint;
  std::string id;   // "cmpl-..." or "chatcmpl-..."
  int64_t created;  // Unix seconds
  std::string model;
};

// How a generation ended, for usage, finish_reason and the extension.
struct CompletionSummary {
  std::string finish_reason;  // "stop" (end of generation or a stop string) or "length"
  GenerationOutcome outcome;
  std::string drafter;
  uint64_t seed = 0;
};

// "stop" or "length".
std::string FinishReason(const GenerationOutcome& outcome, bool stop_string_matched);

nlohmann::json UsageJson(const GenerationOutcome& outcome);
nlohmann::json ExtensionJson(const CompletionSummary& summary);

// The logprobs of released tokens in the endpoint's format: completions'
// {tokens, token_logprobs, top_logprobs, text_offset}, chat's
// {content: [{token, logprob, bytes, top_logprobs}]}.
nlohmann::json LogprobsJson(Endpoint endpoint, const std::vector<CompletionText::Logprob>& logprobs,
                            const Tokenizer& tokenizer);

// The whole response of a request that was not streamed. `logprobs` is null
// when the request did not ask or the scheduler gave no logits.
// A chat reply with `tool_calls` carries them in message.tool_calls, and
// its content is null when the model wrote nothing else.
nlohmann::json CompletionResponse(const ResponseHeader& header, const std::string& text, const nlohmann::json& logprobs,
                                  const CompletionSummary& summary, const std::vector<ToolCall>& tool_calls = {});

// One chunk of a stream: new text (and its logprobs), or the last one with
// finish_reason and the extension, or tool calls. `first` marks a chat stream's first
// chunk, whose delta names the role. With include_usage every chunk carries
// "usage": null, as OpenAI's do.
struct ChunkParts {
  std::string text;
  nlohmann::json logprobs;                    // null if none
  const CompletionSummary* summary = nullptr; // the last chunk
  bool first = false;
  bool include_usage = false;
  // Calls that closed, whole (id, name and all the arguments in one delta),
  // numbered from first_tool_index in delta.tool_calls.
  std::vector<ToolCall> tool_calls;
  size_t first_tool_index = 0;
};
nlohmann::json StreamChunk(const ResponseHeader& header, const ChunkParts& parts);
// The chunk after the last one when stream_options.include_usage: no
// choices, the usage.
nlohmann::json UsageChunk(const ResponseHeader& header, const CompletionSummary& summary);

}  // namespace kakeya
