#include "chat/tool_calls.h"

#include <utility>

namespace kakeya {
namespace {

using nlohmann::ordered_json;

bool Contains(std::string_view haystack, std::string_view needle) { return haystack.find(needle) != std::string_view::npos; }

ToolCallSyntax Syntax(ToolCallFamily family, std::string description, ToolCallLayout layout, std::string call_open,
                      std::string call_close) {
  ToolCallSyntax s;
  s.family = family;
  s.description = std::move(description);
  s.layout = layout;
  s.call_open = std::move(call_open);
  s.call_close = std::move(call_close);
  return s;
}

ToolCallSyntax Hermes() {
  ToolCallSyntax s = Syntax(ToolCallFamily::kHermes, "Qwen2.5/Qwen3 (<tool_call> JSON)", ToolCallLayout::kJsonObject,
                            "<tool_call>", "</tool_call>");
  s.name_key = "name";
  s.arguments_key = "arguments";
  return s;
}

ToolCallSyntax Llama3() {
  ToolCallSyntax s = Syntax(ToolCallFamily::kLlama3, "Llama 3.x (JSON reply)", ToolCallLayout::kJsonObject, "", "");
  s.name_key = "name";
  s.arguments_key = "parameters";
  s.optional_prefix = "<|python_tag|>";
  return s;
}

ToolCallSyntax Gemma4() {
  ToolCallSyntax s = Syntax(ToolCallFamily::kGemma4, "Gemma 4 (<|tool_call>call:...)", ToolCallLayout::kGemmaObject,
                            "<|tool_call>", "<tool_call|>");
  s.name_prefix = "call:";
  s.string_quote = "<|\"|>";
  return s;
}

ToolCallSyntax Glm45() {
  ToolCallSyntax s = Syntax(ToolCallFamily::kGlm45, "GLM-4.5 (<tool_call> with <arg_key>/<arg_value>)",
                            ToolCallLayout::kNameThenKeyValues, "<tool_call>", "</tool_call>");
  s.key_open = "<arg_key>";
  s.key_close = "</arg_key>";
  s.value_open = "<arg_value>";
  s.value_close = "</arg_value>";
  return s;
}

ToolCallSyntax DeepSeekV31() {
  ToolCallSyntax s = Syntax(ToolCallFamily::kDeepSeekV31, "DeepSeek V3.1 (<｜tool▁calls▁begin｜>)",
                            ToolCallLayout::kNameThenJson, "<｜tool▁call▁begin｜>", "<｜tool▁call▁end｜>");
  s.section_open = "<｜tool▁calls▁begin｜>";
  s.section_close = "<｜tool▁calls▁end｜>";
  s.name_end = "<｜tool▁sep｜>";
  // Its template concatenates the arguments as a string.
  s.arguments_as_object = false;
  return s;
}

ToolCallSyntax QwenXml() {
  ToolCallSyntax s = Syntax(ToolCallFamily::kQwenXml, "Qwen3-Coder (<tool_call> with <function=...>)",
                            ToolCallLayout::kXmlFunction, "<tool_call>", "</tool_call>");
  s.name_prefix = "<function=";
  s.name_end = ">";
  s.key_open = "<parameter=";
  s.key_close = ">";
  s.value_close = "</parameter>";
  s.function_close = "</function>";
  return s;
}

// The arguments of an earlier call as the template wants them: an object
// when the client's string is a JSON object, else the string as sent.
ordered_json ArgumentsForTemplate(const ordered_json& arguments) {
  if (!arguments.is_string()) return arguments;
  ordered_json parsed = ordered_json::parse(arguments.get<std::string>(), nullptr, /*allow_exceptions=*/false);
  return parsed.is_object() ? parsed : arguments;
}

std::string FunctionNameOf(const ordered_json& tool_calls, const ordered_json& tool_message, size_t position) {
  const auto id = tool_message.find("tool_call_id");
  for (const ordered_json& call : tool_calls) {
    if (id != tool_message.end() && call.value("id", ordered_json()) == *id) return call["function"].value("name", "");
  }
  // No id to match: the results come in the order of the calls.
  if (position < tool_calls.size()) return tool_calls[position]["function"].value("name", "");
  return "";
}

// Gemma 4 renders a call's results in the calling turn (`tool_responses`,
// {name, response}), and leaves that turn open so the model goes on after them.
ordered_json MergeGemmaToolResults(const ordered_json& messages) {
  ordered_json out = ordered_json::array();
  for (const ordered_json& m : messages) {
    const bool result = m.value("role", "") == "tool";
    if (result && !out.empty() && out.back().value("role", "") == "assistant" && out.back().contains("tool_calls")) {
      ordered_json& caller = out.back();
      if (!caller.contains("tool_responses")) caller["tool_responses"] = ordered_json::array();
      const std::string content = m.value("content", "");
      ordered_json response = ordered_json::parse(content, nullptr, /*allow_exceptions=*/false);
      if (response.is_discarded()) response = content;
      caller["tool_responses"].push_back(
          {{"name", FunctionNameOf(caller["tool_calls"], m, caller["tool_responses"].size())}, {"response", response}});
      continue;
    }
    out.push_back(m);
  }
  return out;
}

}  // namespace

std::vector<std::string> ToolCallSyntax::Markers() const {
  std::vector<std::string> markers;
  for (const std::string* s : {&section_open, &section_close, &call_open, &call_close, &name_end, &key_open,
                               &key_close, &value_open, &value_close, &string_quote, &optional_prefix}) {
    // Single characters (Qwen3-Coder's ">") are no special tokens.
    if (s->size() > 1) markers.push_back(*s);
  }
  return markers;
}

std::optional<ToolCallSyntax> DetectToolCallSyntax(std::string_view source) {
  if (Contains(source, "<|tool_call>call:")) return Gemma4();
  if (Contains(source, "<arg_key>") && Contains(source, "<tool_call>")) return Glm45();
  // V3.1 writes the arguments right after the separator; R1 and V3 write
  // the type there and the arguments in a ```json fence, a form kakeya does
  // not parse.
  if (Contains(source, "<｜tool▁calls▁begin｜>") && Contains(source, "<｜tool▁sep｜>' + tool['function']['arguments']")) {
    return DeepSeekV31();
  }
  // Qwen3-Coder (and by its published description Qwen3.5) write
  // <tool_call> around <function=...> blocks rather than JSON.
  if (Contains(source, "<tool_call>") && Contains(source, "<function=") && Contains(source, "<parameter=")) {
    return QwenXml();
  }
  if (Contains(source, "<tool_call>")) return Hermes();
  if (Contains(source, "<|start_header_id|>") && Contains(source, "\"parameters\": ")) return Llama3();
  return std::nullopt;
}

bool TemplateRendersTools(std::string_view source) { return Contains(source, "tools"); }

ordered_json PrepareToolMessages(const ordered_json& messages, const ToolCallSyntax& syntax) {
  ordered_json out = messages;
  if (syntax.arguments_as_object) {
    for (ordered_json& m : out) {
      if (!m.contains("tool_calls")) continue;
      for (ordered_json& call : m["tool_calls"]) {
        ordered_json& function = call["function"];
        function["arguments"] = ArgumentsForTemplate(function["arguments"]);
      }
    }
  }
  return syntax.family == ToolCallFamily::kGemma4 ? MergeGemmaToolResults(out) : out;
}

}  // namespace kakeya
