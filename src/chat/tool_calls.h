// Tool calls ("function calling") in a model family's own syntax: which
// syntax a chat template uses, the conversation prepared so the template can
// render tools, earlier calls and their results, and the calls parsed back
// out of what the model generates (tool_call_parser.h). ADR 0019.
//
// The families are told apart by what their template writes, not by the
// model's name: a template that renders `<arg_key>` is GLM-4.5's, whatever
// the GGUF calls itself. A template with no syntax kakeya knows (Gemma 2/3,
// Mistral, Phi, DeepSeek R1's fenced form...) gets no tools.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace kakeya {

enum class ToolCallFamily {
  kHermes,       // Qwen2.5, Qwen3: <tool_call>\n{"name": ..., "arguments": {...}}\n</tool_call>
  kLlama3,       // Llama 3.1/3.2/3.3: the reply is {"name": ..., "parameters": {...}}
  kGemma4,       // <|tool_call>call:name{key:value,...}<tool_call|>, strings as <|"|>...<|"|>
  kGlm45,        // <tool_call>name\n<arg_key>k</arg_key>\n<arg_value>v</arg_value>\n</tool_call>
  kDeepSeekV31,  // <｜tool▁calls▁begin｜><｜tool▁call▁begin｜>name<｜tool▁sep｜>{...}<｜tool▁call▁end｜>...<｜tool▁calls▁end｜>
  kQwenXml,      // Qwen3-Coder: <tool_call>\n<function=name>\n<parameter=k>\nv\n</parameter>\n</function>\n</tool_call>
};

// How a family lays out one call between its open and close strings.
enum class ToolCallLayout {
  // One JSON object {"<name_key>": "name", "<arguments_key>": {...}}.
  kJsonObject,
  // The name, `name_end`, then the arguments as one JSON object.
  kNameThenJson,
  // The name, then (key_open key key_close value_open value value_close)*;
  // a value is raw text: a string, or JSON for other types.
  kNameThenKeyValues,
  // `call:` name, then Gemma's object notation {key:value,...}: keys bare,
  // strings between `string_quote`s, numbers, true/false, [..] and {..}.
  kGemmaObject,
  // name_prefix name name_end, then (key_open key key_close \n value \n
  // value_close)*, then function_close; values raw text as for
  // kNameThenKeyValues.
  kXmlFunction,
};

// The literal strings of a family's calls, enough to find them in generated
// text and to write a grammar that produces them: a reply is
//   content? section_open (call_open <call as laid out> call_close)+ section_close
// where the section strings are empty for families without them, and calls
// may be separated by whitespace.
struct ToolCallSyntax {
  ToolCallFamily family = ToolCallFamily::kHermes;
  std::string description;  // "Qwen2.5/Qwen3 (Hermes <tool_call> JSON)", for messages and logs
  std::string section_open;   // before the first call; "" when calls stand alone
  std::string section_close;  // after the last
  std::string call_open;      // before each call ("" for Llama 3: a bare JSON object)
  std::string call_close;
  ToolCallLayout layout = ToolCallLayout::kJsonObject;
  // kJsonObject: the keys of the name and the arguments.
  std::string name_key;
  std::string arguments_key;
  // kNameThenJson: what ends the name. kNameThenKeyValues: the name ends at
  // the first newline or key_open.
  std::string name_end;
  // kNameThenKeyValues.
  std::string key_open, key_close, value_open, value_close;
  // kGemmaObject, kXmlFunction: what precedes the name. kGemmaObject: the
  // string delimiter. kXmlFunction: what ends the parameters.
  std::string name_prefix;
  std::string string_quote;
  std::string function_close;
  // Llama 3: a call may also be led by this token (its ipython mode).
  std::string optional_prefix;
  // Earlier calls' arguments go to the template as an object (it formats
  // them itself) rather than as the JSON string OpenAI clients send.
  bool arguments_as_object = true;

  // Marker strings the tokenizer may hold as special tokens, which must be
  // kept in the generated text for the parser to see them.
  std::vector<std::string> Markers() const;
};

// For messages: the families DetectToolCallSyntax knows.
inline constexpr const char* kSupportedToolFamilies =
    "supported: Qwen2.5/Qwen3, Qwen3-Coder, Llama 3.1/3.2/3.3, Gemma 4, GLM-4.5, DeepSeek V3.1";

// The family whose syntax the template source renders, or nullopt.
std::optional<ToolCallSyntax> DetectToolCallSyntax(std::string_view template_source);

// Whether the template reads the `tools` variable at all: some with a call
// syntax do not (DeepSeek V3.1's renders earlier calls, not definitions),
// and a model told nothing about the tools cannot call them.
bool TemplateRendersTools(std::string_view template_source);

// One call parsed from generated text.
struct ToolCall {
  std::string id;  // left empty by the parser; the server names each call of a reply
  std::string name;
  std::string arguments;  // a JSON object, as a compact string
};

// The messages as the request gave them (OpenAI's shape: assistant
// `tool_calls` with arguments as a JSON string, `tool` messages with
// tool_call_id), made ready for `syntax`'s template: arguments become
// objects where the template formats them itself, and for Gemma 4 the tool
// results join the assistant turn that called them as its `tool_responses`,
// which is where its template renders them.
nlohmann::ordered_json PrepareToolMessages(const nlohmann::ordered_json& messages, const ToolCallSyntax& syntax);

}  // namespace kakeya
