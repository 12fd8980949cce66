// libFuzzer target for the server's request path before the model: the body
// of POST /v1/completions or /v1/chat/completions (the first input byte picks
// the endpoint), parsed and checked (ParseCompletionRequest), and a chat
// request's messages rendered by real chat templates. A body must become a
// request or an ApiError (HTTP 400/404), and rendering may refuse with
// kakeya::Error (400); any other exception, crash or sanitizer report is a
// finding. A chat request's tools are rendered too (with the conversation
// prepared for the template's tool-call syntax), and the body is also read
// as a model's reply in every tool-call syntax, which must never throw.
// Run with scripts/fuzz.sh request.
#include <cstddef>
#include <cstdint>
#include <fstream>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "base/error.h"
#include "chat/chat_template.h"
#include "chat/tool_call_parser.h"
#include "chat/tool_calls.h"
#include "server/api_error.h"
#include "server/openai_request.h"

namespace {

std::vector<kakeya::ChatTemplate> LoadTemplates() {
  // Templates of families that read messages differently: ChatML
  // (qwen2.5), Llama 3.1 (system and tool handling), Gemma 3 (role
  // alternation checks that raise_exception), and the tool-call syntaxes of
  // Gemma 4, GLM-4.5, DeepSeek V3.1 and Qwen3-Coder.
  std::vector<kakeya::ChatTemplate> templates;
  for (const char* name : {"qwen2.5", "llama3.1", "gemma3", "gemma4", "glm4.5", "deepseek-v3.1", "qwen3-coder"}) {
    std::ifstream in(std::string(KAKEYA_CHAT_TEMPLATES) + "/" + name + ".jinja");
    std::stringstream source;
    source << in.rdbuf();
    templates.emplace_back(source.str(), "<s>", "</s>");
  }
  return templates;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::vector<kakeya::ChatTemplate> templates = LoadTemplates();
  if (size == 0) return 0;
  const bool chat = data[0] & 1;
  const std::string_view body(reinterpret_cast<const char*>(data + 1), size - 1);
  for (const kakeya::ChatTemplate& t : templates) {
    if (const auto syntax = kakeya::DetectToolCallSyntax(t.source())) {
      (void)kakeya::ToolCallParser::Parse(body, *syntax, nlohmann::ordered_json::array());
    }
  }
  kakeya::CompletionRequest request;
  try {
    request = kakeya::ParseCompletionRequest(
        body, chat ? kakeya::Endpoint::kChatCompletions : kakeya::Endpoint::kCompletions, "kakeya");
  } catch (const kakeya::ApiError&) {
    return 0;
  }
  if (!chat) return 0;
  const kakeya::ChatTemplate& t = templates[(data[0] >> 1) % templates.size()];
  try {
    nlohmann::ordered_json messages = nlohmann::ordered_json::parse(request.messages.dump());
    nlohmann::ordered_json extra = nlohmann::ordered_json::object();
    if (const auto syntax = kakeya::DetectToolCallSyntax(t.source())) {
      messages = kakeya::PrepareToolMessages(messages, *syntax);
      if (!request.tools.tools.empty()) extra["tools"] = request.tools.tools;
    }
    (void)t.Apply(messages, true, extra);
  } catch (const kakeya::Error&) {
  }
  return 0;
}
