#include "chat/chat_template.h"

#include "base/error.h"
#include "chat/jinja_interpreter.h"
#include "chat/jinja_parser.h"

namespace kakeya {
namespace {

// ChatML as OpenHermes and Qwen write it, extended to content given as a
// list of text parts (other parts have no text form and are skipped).
constexpr const char* kChatMl =
    "{%- for message in messages -%}\n"
    "{{- '<|im_start|>' + message['role'] + '\\n' -}}\n"
    "{%- if message['content'] is string -%}\n"
    "{{- message['content'] -}}\n"
    "{%- elif message['content'] is sequence -%}\n"
    "{%- for part in message['content'] if part['type'] == 'text' -%}{{- part['text'] -}}{%- endfor -%}\n"
    "{%- endif -%}\n"
    "{{- '<|im_end|>\\n' -}}\n"
    "{%- endfor -%}\n"
    "{%- if add_generation_prompt -%}{{- '<|im_start|>assistant\\n' -}}{%- endif -%}\n";

}  // namespace

ChatTemplate::ChatTemplate(std::string source, std::string bos_token, std::string eos_token)
    : source_(std::move(source)),
      bos_token_(std::move(bos_token)),
      eos_token_(std::move(eos_token)),
      program_(std::make_shared<const jinja::Program>(jinja::Parse(source_))) {}

ChatTemplate ChatTemplate::ChatMl(std::string bos_token, std::string eos_token) {
  return ChatTemplate(kChatMl, std::move(bos_token), std::move(eos_token));
}

std::string ChatTemplate::Apply(const nlohmann::json& messages, bool add_generation_prompt,
                                const nlohmann::json& extra) const {
  return Render(jinja::Value::FromJson(messages), add_generation_prompt, jinja::Value::FromJson(extra));
}

std::string ChatTemplate::Apply(const nlohmann::ordered_json& messages, bool add_generation_prompt,
                                const nlohmann::ordered_json& extra) const {
  return Render(jinja::Value::FromJson(messages), add_generation_prompt, jinja::Value::FromJson(extra));
}

std::string ChatTemplate::Render(jinja::Value messages, bool add_generation_prompt, const jinja::Value& extra) const {
  if (!messages.IsList()) Fail("chat template input: messages must be an array, got ", messages.TypeName());
  if (!extra.IsDict()) Fail("chat template input: extra variables must be an object, got ", extra.TypeName());
  // What transformers' apply_chat_template passes: tools and documents are
  // always defined (None when absent), special tokens by name.
  jinja::Dict globals;
  globals.Set("messages", std::move(messages));
  globals.Set("tools", jinja::Value::None());
  globals.Set("documents", jinja::Value::None());
  globals.Set("add_generation_prompt", add_generation_prompt);
  globals.Set("bos_token", bos_token_);
  globals.Set("eos_token", eos_token_);
  for (const auto& [name, value] : extra.AsDict().entries()) globals.Set(name, value);
  return jinja::Render(*program_, globals);
}

}  // namespace kakeya
