#include "server/tool_grammar.h"

#include <string>

#include "base/error.h"
#include "grammar/json_schema.h"
#include "server/api_error.h"

namespace kakeya {
namespace {

using nlohmann::ordered_json;

// The rule the call's JSON grammar starts with, renamed from its `root` so
// that the reply's grammar can wrap it.
constexpr const char* kCallRule = "kakeya-tool-call";

// A GBNF string literal of `text`.
std::string Literal(const std::string& text) {
  std::string out = "\"";
  for (const char c : text) {
    if (c == '"' || c == '\\') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out + "\"";
}

// {"<name_key>": "<name>", "<arguments_key>": <parameters>} for each function
// the choice allows, as one schema.
ordered_json CallSchema(const ToolCallSyntax& syntax, const ToolsRequest& tools) {
  ordered_json calls = ordered_json::array();
  for (size_t i = 0; i < tools.tools.size(); ++i) {
    const ordered_json& function = tools.tools[i]["function"];
    const std::string name = function["name"].get<std::string>();
    if (tools.choice == ToolChoice::kFunction && name != tools.function) continue;
    // Without parameters any object goes (the compiler's objects are strict).
    ordered_json parameters = function.value("parameters", ordered_json{{"type", "object"}, {"additionalProperties", true}});
    const std::string field = "tools[" + std::to_string(i) + "].function.parameters";
    try {
      (void)JsonSchemaToGbnf(parameters, field);  // its errors name the tool, not the wrapper below
    } catch (const Error& e) {
      throw BadRequest(field, std::string(e.what()) + " (tool_choice requires a call, so the arguments are constrained "
                                                      "by this schema)");
    }
    ordered_json properties = ordered_json::object();
    properties[syntax.name_key] = {{"const", name}};
    properties[syntax.arguments_key] = std::move(parameters);
    calls.push_back({{"type", "object"},
                     {"properties", std::move(properties)},
                     {"required", {syntax.name_key, syntax.arguments_key}}});
  }
  return calls.size() == 1 ? calls[0] : ordered_json{{"anyOf", calls}};
}

}  // namespace

std::shared_ptr<const Grammar> RequiredToolCallGrammar(const ToolCallSyntax& syntax, const ToolsRequest& tools) {
  if (tools.choice != ToolChoice::kRequired && tools.choice != ToolChoice::kFunction) return nullptr;
  if (syntax.layout != ToolCallLayout::kJsonObject) {
    throw BadRequest("tool_choice", "tool_choice \"required\" or a named function constrains the reply to calls, which "
                                    "kakeya does for JSON-object calls (Qwen2.5/Qwen3, Llama 3.x), not yet for " +
                                        syntax.description + "; send tool_choice \"auto\"");
  }
  std::string call = JsonSchemaToGbnf(CallSchema(syntax, tools), "tools");
  const std::string root = "root ::= ";
  if (call.rfind(root, 0) != 0) Fail("internal: the schema compiler's grammar does not start with its root rule");
  call.replace(0, root.size() - 4, kCallRule);  // "root" -> the call rule, " ::= " kept
  // Qwen's template writes each call as <tool_call>\n{...}\n</tool_call>,
  // one per line; Llama 3's reply is the call's JSON alone.
  std::string block = kCallRule;
  if (!syntax.call_open.empty()) {
    block = Literal(syntax.call_open + "\n") + " " + kCallRule + " " + Literal("\n" + syntax.call_close);
  }
  const bool several = tools.parallel && !syntax.call_open.empty();
  const std::string gbnf =
      "root ::= call-block" + std::string(several ? " (\"\\n\" call-block)*" : "") + "\ncall-block ::= " + block + "\n" + call;
  return ParseGbnf(gbnf, "tools");
}

}  // namespace kakeya
