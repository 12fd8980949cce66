// A model's chat template (GGUF tokenizer.chat_template, Jinja) turned into
// the prompt text for an OpenAI-style messages array, rendered the way
// HuggingFace transformers renders it (trim_blocks, lstrip_blocks, its
// tojson, raise_exception and strftime_now), since that is what template
// authors test against.
#pragma once

#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "chat/jinja_ast.h"

namespace kakeya {

class ChatTemplate {
 public:
  // Parses a Jinja chat template; throws kakeya::Error naming line:column and
  // the problem on a syntax error.
  ChatTemplate(std::string source, std::string bos_token, std::string eos_token);

  // The ChatML template used for models without one (the server says so in
  // its log). It accepts content as a string or a list of text parts.
  static ChatTemplate ChatMl(std::string bos_token = "", std::string eos_token = "");

  // Renders `messages` (the OpenAI messages array: objects with role and
  // content, where content is a string or a list of {"type":"text","text":...}
  // parts, possibly tool_calls/name fields, passed through as given), with the
  // variables real templates read: messages, add_generation_prompt,
  // bos_token, eos_token, tools and documents (none unless given), and any
  // extra variables in `extra` (e.g. tools, enable_thinking). Throws
  // kakeya::Error for a template runtime error or raise_exception(...) (the
  // message is the template's message) — the server turns it into HTTP 400.
  std::string Apply(const nlohmann::json& messages, bool add_generation_prompt,
                    const nlohmann::json& extra = nlohmann::json::object()) const;

  // The same for JSON parsed as ordered_json: objects keep the request's key
  // order, as Python dicts do, so `tool | tojson` and `for k, v in d.items()`
  // match transformers byte for byte. (nlohmann::json sorts keys.)
  std::string Apply(const nlohmann::ordered_json& messages, bool add_generation_prompt,
                    const nlohmann::ordered_json& extra = nlohmann::ordered_json::object()) const;

  const std::string& source() const { return source_; }

 private:
  std::string Render(jinja::Value messages, bool add_generation_prompt, const jinja::Value& extra) const;

  std::string source_;
  std::string bos_token_;
  std::string eos_token_;
  std::shared_ptr<const jinja::Program> program_;
};

}  // namespace kakeya
