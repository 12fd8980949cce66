// The prompt of a chat completion: the messages rendered by the model's chat
// template (the GGUF's tokenizer.chat_template; ChatML when it has none),
// then tokenized.
//
// BOS, as llama.cpp's server does it: the rendered text is tokenized with
// special tokens parsed (so "<|im_start|>" or "<start_of_turn>" become their
// control tokens) and without adding any; BOS is then put in front only if
// the model's add_bos_token asks for it and the template did not already
// write it (most templates start with {{ bos_token }}). The result has one
// BOS either way. EOS is never added: the prompt ends where the assistant's
// answer begins.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "chat/tool_calls.h"
#include "model/model.h"
#include "server/tool_request.h"

namespace kakeya {

class ChatTemplate;  // chat/chat_template.h: only chat_prompt.cc sees the Jinja side

class ChatPrompt {
 public:
  // Throws Error if the model's template does not parse.
  explicit ChatPrompt(const Model& model);
  ~ChatPrompt();

  // `messages`: [{"role", "content"}] as ParseCompletionRequest leaves them.
  // Throws ApiError 400 when the template refuses them (raise_exception,
  // e.g. roles that do not alternate).
  std::vector<TokenId> Tokens(const nlohmann::json& messages) const;
  // The same with the request's tools given to the template (`tools`) and
  // the conversation's earlier calls and results in the form the template
  // reads (PrepareToolMessages). Throws ApiError 400 naming "tools" when
  // there are tools and the template has no tool-call syntax kakeya knows.
  std::vector<TokenId> Tokens(const nlohmann::json& messages, const ToolsRequest& tools) const;

  // The template's tool-call syntax, or null when it has none kakeya knows.
  const ToolCallSyntax* tool_syntax() const { return tool_syntax_ ? &*tool_syntax_ : nullptr; }
  // The syntax's markers that are single tokens of the vocabulary: a reply
  // read for calls shows them even where they are special tokens.
  const std::vector<TokenId>& tool_marker_tokens() const { return tool_marker_tokens_; }

  // "the model's chat template" or "ChatML (the model has no chat template)".
  const std::string& description() const { return description_; }

 private:
  const Tokenizer& tokenizer_;
  std::unique_ptr<const ChatTemplate> template_;
  std::string description_;
  std::string architecture_;
  std::optional<ToolCallSyntax> tool_syntax_;
  std::vector<TokenId> tool_marker_tokens_;
};

}  // namespace kakeya
