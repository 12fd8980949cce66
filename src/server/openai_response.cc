#include "server/openai_response.h"

#include <cstdio>
#include <random>

#include "server/text_stream.h"

namespace kakeya {
namespace {

using nlohmann::json;

json Base(const ResponseHeader& h, bool chunk) {
  const char* object = h.endpoint == Endpoint::kCompletions ? "text_completion"
                       : chunk                              ? "chat.completion.chunk"
                                                            : "chat.completion";
  return {{"id", h.id}, {"object", object}, {"created", h.created}, {"model", h.model}};
}

json Bytes(const std::string& piece) {
  json bytes = json::array();
  for (unsigned char c : piece) bytes.push_back(static_cast<int>(c));
  return bytes;
}

json ToolCallJson(const ToolCall& call) {
  return {{"id", call.id}, {"type", "function"}, {"function", {{"name", call.name}, {"arguments", call.arguments}}}};
}

}  // namespace

std::string RandomId(const std::string& prefix) {
  thread_local std::mt19937_64 rng(std::random_device{}());
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(rng()));
  return prefix + hex;
}

std::string FinishReason(const GenerationOutcome& outcome, bool stop_string_matched) {
  return stop_string_matched || outcome.stop == StopReason::kEndOfGeneration ? "stop" : "length";
}

json UsageJson(const GenerationOutcome& o) {
  return {{"prompt_tokens", o.prompt_tokens},
          {"completion_tokens", o.completion_tokens},
          {"total_tokens", o.prompt_tokens + o.completion_tokens}};
}

json ExtensionJson(const CompletionSummary& s) {
  const GenerationOutcome& o = s.outcome;
  return {{"seed", s.seed},
          {"speculative",
           {{"drafter", s.drafter},
            {"steps", o.steps},
            {"drafted", o.drafted},
            {"accepted", o.accepted},
            {"mean_accept_len", o.mean_accept_len()}}},
          {"timings", {{"queue_ms", o.queue_ms}, {"ttft_ms", o.ttft_ms}, {"total_ms", o.total_ms}}}};
}

json LogprobsJson(Endpoint endpoint, const std::vector<CompletionText::Logprob>& logprobs, const Tokenizer& tokenizer) {
  auto piece = [&](TokenId id) { return tokenizer.TokenToPiece(id, false); };
  if (endpoint == Endpoint::kCompletions) {
    json tokens = json::array(), token_logprobs = json::array(), top = json::array(), offsets = json::array();
    for (const CompletionText::Logprob& lp : logprobs) {
      tokens.push_back(Utf8Stream::Sanitize(piece(lp.value.token)));
      token_logprobs.push_back(lp.value.logprob);
      json alternatives = json::object();
      for (const auto& a : lp.value.top) alternatives[Utf8Stream::Sanitize(piece(a.token))] = a.logprob;
      top.push_back(std::move(alternatives));
      offsets.push_back(lp.text_offset);
    }
    return {{"tokens", tokens}, {"token_logprobs", token_logprobs}, {"top_logprobs", top}, {"text_offset", offsets}};
  }
  json content = json::array();
  for (const CompletionText::Logprob& lp : logprobs) {
    json top = json::array();
    for (const auto& a : lp.value.top) {
      const std::string p = piece(a.token);
      top.push_back({{"token", Utf8Stream::Sanitize(p)}, {"logprob", a.logprob}, {"bytes", Bytes(p)}});
    }
    const std::string p = piece(lp.value.token);
    content.push_back({{"token", Utf8Stream::Sanitize(p)}, {"logprob", lp.value.logprob}, {"bytes", Bytes(p)}, {"top_logprobs", top}});
  }
  return {{"content", content}, {"refusal", nullptr}};
}

json CompletionResponse(const ResponseHeader& h, const std::string& text, const json& logprobs,
                        const CompletionSummary& s, const std::vector<ToolCall>& tool_calls) {
  json choice = {{"index", 0}, {"logprobs", logprobs}, {"finish_reason", s.finish_reason}};
  if (h.endpoint == Endpoint::kCompletions) {
    choice["text"] = text;
  } else {
    choice["message"] = {{"role", "assistant"}, {"content", text}};
    if (!tool_calls.empty()) {
      if (text.empty()) choice["message"]["content"] = nullptr;
      json calls = json::array();
      for (const ToolCall& call : tool_calls) calls.push_back(ToolCallJson(call));
      choice["message"]["tool_calls"] = std::move(calls);
    }
  }
  json out = Base(h, false);
  out["choices"] = json::array({choice});
  out["usage"] = UsageJson(s.outcome);
  out["kakeya"] = ExtensionJson(s);
  return out;
}

json StreamChunk(const ResponseHeader& h, const ChunkParts& parts) {
  json choice = {{"index", 0},
                 {"logprobs", parts.logprobs},
                 {"finish_reason", parts.summary ? json(parts.summary->finish_reason) : json(nullptr)}};
  if (h.endpoint == Endpoint::kCompletions) {
    choice["text"] = parts.text;
  } else {
    json delta = json::object();
    if (parts.first) delta["role"] = "assistant";
    if (!parts.text.empty() || parts.first) delta["content"] = parts.text;
    if (!parts.tool_calls.empty()) {
      json calls = json::array();
      for (size_t i = 0; i < parts.tool_calls.size(); ++i) {
        json call = ToolCallJson(parts.tool_calls[i]);
        call["index"] = parts.first_tool_index + i;
        calls.push_back(std::move(call));
      }
      delta["tool_calls"] = std::move(calls);
    }
    choice["delta"] = std::move(delta);
  }
  json out = Base(h, true);
  out["choices"] = json::array({choice});
  if (parts.include_usage) out["usage"] = nullptr;
  if (parts.summary) out["kakeya"] = ExtensionJson(*parts.summary);
  return out;
}

json UsageChunk(const ResponseHeader& h, const CompletionSummary& s) {
  json out = Base(h, true);
  out["choices"] = json::array();
  out["usage"] = UsageJson(s.outcome);
  return out;
}

}  // namespace kakeya
