#include "server/chat_prompt.h"

#include <cstdio>

#include "base/error.h"
#include "chat/chat_template.h"
#include "gguf/gguf.h"
#include "server/api_error.h"

namespace kakeya {
namespace {

std::string TokenTextOr(const Tokenizer& tok, TokenId id) {
  return id >= 0 ? std::string(tok.TokenText(id)) : std::string();
}

}  // namespace

ChatPrompt::ChatPrompt(const Model& model) : tokenizer_(model.tokenizer()) {
  const std::string bos = TokenTextOr(tokenizer_, tokenizer_.bos());
  const std::string eos = TokenTextOr(tokenizer_, tokenizer_.eos());
  if (const auto source = model.gguf().FindString("tokenizer.chat_template")) {
    try {
      template_ = std::make_unique<ChatTemplate>(std::string(*source), bos, eos);
    } catch (const Error& e) {
      Fail("the model's tokenizer.chat_template does not parse: ", e.what());
    }
    description_ = "the model's chat template";
  } else {
    template_ = std::make_unique<ChatTemplate>(ChatTemplate::ChatMl(bos, eos));
    description_ = "ChatML (the model has no tokenizer.chat_template)";
  }
  architecture_ = std::string(model.gguf().FindString("general.architecture").value_or("unknown"));
  tool_syntax_ = DetectToolCallSyntax(template_->source());
  if (tool_syntax_) {
    for (const std::string& marker : tool_syntax_->Markers()) {
      const std::vector<TokenId> ids = tokenizer_.Encode(marker, /*add_special=*/false, /*parse_special=*/true);
      if (ids.size() == 1) tool_marker_tokens_.push_back(ids[0]);
    }
  }
}

ChatPrompt::~ChatPrompt() = default;

std::vector<TokenId> ChatPrompt::Tokens(const nlohmann::json& messages) const { return Tokens(messages, ToolsRequest{}); }

std::vector<TokenId> ChatPrompt::Tokens(const nlohmann::json& messages, const ToolsRequest& tools) const {
  using nlohmann::ordered_json;
  if (!tools.tools.empty() && !tool_syntax_) {
    throw BadRequest("tools", "tools: the model's chat template (" + description_ + ", architecture " + architecture_ +
                                  ") has no tool-call format kakeya supports (" + kSupportedToolFamilies + ")");
  }
  if (!tools.tools.empty() && !TemplateRendersTools(template_->source())) {
    throw BadRequest("tools", "tools: the model's chat template (" + tool_syntax_->description +
                                  ") does not render tool definitions, so the model would not learn of them");
  }
  ordered_json conversation = ordered_json::parse(messages.dump());
  if (tool_syntax_) conversation = PrepareToolMessages(conversation, *tool_syntax_);
  ordered_json extra = ordered_json::object();
  if (!tools.tools.empty()) extra["tools"] = tools.tools;
  std::string text;
  try {
    text = template_->Apply(conversation, /*add_generation_prompt=*/true, extra);
  } catch (const Error& e) {
    throw BadRequest("messages", std::string("the chat template refused the messages: ") + e.what());
  }
  std::vector<TokenId> tokens = tokenizer_.Encode(text, /*add_special=*/false, /*parse_special=*/true);
  const TokenId bos = tokenizer_.bos();
  if (tokenizer_.add_bos() && bos >= 0 && (tokens.empty() || tokens.front() != bos)) tokens.insert(tokens.begin(), bos);
  return tokens;
}

}  // namespace kakeya
