// The tool-calling fields of a chat completion request (OpenAI's `tools`,
// `tool_choice`, `parallel_tool_calls`, and the assistant `tool_calls` and
// `tool` messages of the conversation), parsed and checked: a bad value is
// an ApiError 400 naming the field. ADR 0019.
#pragma once

#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace kakeya {

enum class ToolChoice {
  kAuto,      // the model decides (the default)
  kNone,      // tools are rendered, as OpenAI does, but the reply is not parsed for calls
  kRequired,  // at least one call, enforced by a grammar (tool_grammar.h)
  kFunction,  // a call of `function`, likewise
};

struct ToolsRequest {
  // [{"type": "function", "function": {"name", "description"?, "parameters"?}}]
  // as the client sent them, key order kept: templates dump them with
  // tojson and should see what transformers would. Empty: no tools.
  nlohmann::ordered_json tools = nlohmann::ordered_json::array();
  ToolChoice choice = ToolChoice::kAuto;
  std::string function;  // the named function of kFunction
  bool parallel = true;  // parallel_tool_calls

  // Whether the reply is read for calls.
  bool parse_calls() const { return !tools.empty() && choice != ToolChoice::kNone; }
};

// tools, tool_choice and parallel_tool_calls of `request`; `body` is the
// request text again, read with key order kept for the tools.
ToolsRequest ParseToolsRequest(const nlohmann::json& request, std::string_view body);

// An assistant message's `tool_calls` (at `path`) as the templates read
// them: [{"id"?, "type": "function", "function": {"name", "arguments"}}],
// arguments a string (a client's object is written as JSON). Null or
// absent: an empty array.
nlohmann::json ParseMessageToolCalls(const nlohmann::json& tool_calls, const std::string& path);

// What a function name may be: [a-zA-Z0-9_-]{1,64}, as OpenAI requires.
bool IsValidFunctionName(std::string_view name);

}  // namespace kakeya
