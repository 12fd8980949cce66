#include "server/completion_text.h"

#include <algorithm>

namespace kakeya {

CompletionText::CompletionText(const Tokenizer& tokenizer, std::vector<std::string> stops,
                               std::vector<TokenId> shown_special)
    : tokenizer_(tokenizer), shown_special_(std::move(shown_special)), stops_(std::move(stops)) {}

CompletionText::Delta CompletionText::Push(const TokenChannel::Token& token) {
  if (stopped() || tokenizer_.IsEndOfGeneration(token.id)) return {};
  const bool shown = std::find(shown_special_.begin(), shown_special_.end(), token.id) != shown_special_.end();
  const std::string text = utf8_.Push(tokenizer_.TokenToPiece(token.id, shown));
  const size_t start = decoded_;
  decoded_ += text.size();
  if (token.logprob) held_.push_back({{*token.logprob, start}, kEndUnknown});
  // Every character begun so far is complete: the tokens that were waiting
  // for theirs (this one too) end here.
  if (!utf8_.holding()) {
    for (Held& h : held_) h.text_end = std::min(h.text_end, decoded_);
  }
  return Release(stops_.Push(text));
}

CompletionText::Delta CompletionText::Finish() {
  if (stopped()) return {};
  const std::string tail = utf8_.Finish();
  decoded_ += tail.size();
  std::string text = stops_.Push(tail);
  text += stops_.Finish();
  Delta delta = Release(std::move(text));
  if (!stopped()) {
    for (Held& h : held_) delta.logprobs.push_back(std::move(h.logprob));
  }
  held_.clear();
  return delta;
}

CompletionText::Delta CompletionText::Release(std::string text) {
  released_ += text.size();
  Delta delta{std::move(text), {}, {}};
  size_t n = 0;
  while (n < held_.size() && held_[n].text_end <= released_) delta.logprobs.push_back(std::move(held_[n++].logprob));
  held_.erase(held_.begin(), held_.begin() + n);
  // Tokens after a matched stop string belong to it; their logprobs go with it.
  if (stopped()) held_.clear();
  return delta;
}

}  // namespace kakeya
