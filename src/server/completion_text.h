// What the client sees of a generation: token bytes become UTF-8 text
// (text_stream.h), the text goes through the stop strings (stop_strings.h),
// and each token's logprobs go out with the chunk that completes its text.
// The same for streamed and whole responses, so both carry the same bytes.
#pragma once

#include <string>
#include <vector>

#include "chat/tool_calls.h"
#include "server/logprobs.h"
#include "server/stop_strings.h"
#include "server/text_stream.h"
#include "server/token_channel.h"

namespace kakeya {

class CompletionText {
 public:
  struct Logprob {
    TokenLogprob value;
    size_t text_offset;  // bytes of text handed out before this token's
  };
  struct Delta {
    std::string text;
    std::vector<Logprob> logprobs;
    std::vector<ToolCall> tool_calls;  // calls that closed (CompletionJob reads them out of the text)
  };

  // `shown_special`: special tokens whose text is kept (a tool-call
  // syntax's markers); other special tokens add no text.
  CompletionText(const Tokenizer& tokenizer, std::vector<std::string> stops, std::vector<TokenId> shown_special = {});

  // A generated token. End-of-generation tokens add no text (as in
  // `kakeya run`) and no logprobs entry.
  Delta Push(const TokenChannel::Token& token);
  // At the end of the generation: the text held back for a stop string that
  // did not come, and an unfinished UTF-8 sequence.
  Delta Finish();
  // A stop string matched: the generation should stop, nothing more is sent.
  bool stopped() const { return stops_.matched(); }

 private:
  Delta Release(std::string text);

  const Tokenizer& tokenizer_;
  std::vector<TokenId> shown_special_;
  Utf8Stream utf8_;
  StopStringMatcher stops_;
  size_t decoded_ = 0;   // bytes of text out of utf8_
  size_t released_ = 0;  // of which past the stop strings
  // While a token's last character is unfinished its end is not known yet.
  static constexpr size_t kEndUnknown = static_cast<size_t>(-1);
  struct Held {
    Logprob logprob;
    size_t text_end;  // decoded_ once the token's characters are complete, or kEndUnknown
  };
  std::vector<Held> held_;  // logprobs of tokens whose text is not all released
};

}  // namespace kakeya
