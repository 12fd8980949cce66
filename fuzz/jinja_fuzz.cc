// libFuzzer target for the chat-template engine (Jinja lexer, parser and
// interpreter): a GGUF's tokenizer.chat_template is untrusted text that the
// server renders for every chat request. Any input must render or throw
// kakeya::Error (a syntax error, a runtime error, raise_exception, a step or
// recursion limit): no crash, no sanitizer report, no hang. Run with
// scripts/fuzz.sh jinja.
#include <cstddef>
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "base/error.h"
#include "chat/chat_template.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // What real templates read: roles, string and list contents, a tool call.
  static const nlohmann::json messages = nlohmann::json::parse(R"([
    {"role": "system", "content": "Be brief."},
    {"role": "user", "content": [{"type": "text", "text": "Hi"}, {"type": "text", "text": "there"}]},
    {"role": "assistant", "content": "", "tool_calls": [{"type": "function",
      "function": {"name": "f", "arguments": {"x": 1}}}]},
    {"role": "tool", "content": "42", "name": "f"},
    {"role": "user", "content": "and?"}])");
  try {
    const kakeya::ChatTemplate chat(std::string(reinterpret_cast<const char*>(data), size), "<s>", "</s>");
    chat.Apply(messages, true);
  } catch (const kakeya::Error&) {
  }
  return 0;
}
