// The body of POST /v1/completions and /v1/chat/completions, parsed and
// checked. Anything a client can send either becomes a CompletionRequest or
// an ApiError naming the field (400), or the model (404).
//
// Defaults where a field is absent or null (llama.cpp's server and
// `kakeya run` use the same ones, so a request that leaves them out samples
// like `kakeya run` does): temperature 0.8, top_k 40, top_p 0.95, min_p 0.05,
// a random seed, and no token limit but the context (max_tokens absent: stop
// at end of generation or when prompt + output fill the slot's context).
// OpenAI's own default is temperature 1 and top_p 1 without the other two
// filters; a client that wants it sends those values.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "grammar/grammar.h"
#include "sampling/sampler.h"
#include "server/tool_request.h"
#include "tokenizer/tokenizer.h"

namespace kakeya {

enum class Endpoint { kCompletions, kChatCompletions };

struct CompletionRequest {
  Endpoint endpoint = Endpoint::kCompletions;
  // /v1/completions: the prompt as text, or as token ids when prompt_is_ids.
  std::string prompt_text;
  std::vector<TokenId> prompt_ids;
  bool prompt_is_ids = false;
  // /v1/chat/completions: [{"role", "content"}], content always a string
  // (text parts joined by newlines) and role "developer" renamed "system",
  // which is what chat templates know. An assistant message may carry
  // "tool_calls" (tool_request.h) and a tool message "tool_call_id".
  nlohmann::json messages;
  ToolsRequest tools;  // /v1/chat/completions only

  int max_tokens = 0;  // 0: until end of generation or a full context
  SamplingParams sampling;
  bool seed_given = false;
  std::vector<std::string> stop;
  bool stream = false;
  bool include_usage = false;  // stream_options.include_usage
  bool logprobs = false;
  int top_logprobs = 0;        // alternatives per token, with logprobs
  // response_format json_object / json_schema, or llama.cpp's grammar and
  // json_schema fields, compiled (response_format.h); null: unconstrained.
  std::shared_ptr<const Grammar> grammar;
};

// Largest nesting of arrays and objects a body may have: deep enough for any
// real request, shallow enough that no recursive walk of it can exhaust the stack.
constexpr int kMaxJsonDepth = 64;

// `model_id`: the one model served; a request naming another gets 404.
// Throws ApiError.
CompletionRequest ParseCompletionRequest(std::string_view body, Endpoint endpoint, const std::string& model_id);

// The body as a JSON object, or ApiError 400 (malformed JSON with the parser's
// byte position, nesting deeper than kMaxJsonDepth, or not an object).
nlohmann::json ParseJsonObject(std::string_view body);

}  // namespace kakeya
