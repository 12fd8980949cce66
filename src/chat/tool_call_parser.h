// Generated text → content and tool calls, in one family's syntax
// (tool_calls.h), whole or as the tokens arrive.
//
// Content is the text outside calls; whitespace between content and a call,
// and between calls, is dropped. A call whose body does not parse (bad
// JSON, missing name) stays in the content as the model wrote it, as does a
// call the generation cut off before its body was whole: the client sees
// what the model said rather than a call it cannot run. (A whole body whose
// closing marker never came, the reply having ended, is still a call.)
//
// Streaming holds back only what may still become part of a call: a tail
// that could be the start of an opening marker (with the whitespace before
// it), and an open call until it closes. Everything else goes out at once.
// Fed the same text in any pieces, it hands out the same content and calls
// as the whole-text parse (the parse is one scanner either way).
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "chat/tool_calls.h"

namespace kakeya {

struct ParsedToolReply {
  std::string content;
  std::vector<ToolCall> calls;
};

class ToolCallParser {
 public:
  // `tools`: the request's tools ([{"type":"function","function":{...}}]);
  // families whose argument values are bare text (GLM-4.5) read a value as
  // a string where the parameter's schema says "string", and as JSON
  // otherwise (when it parses).
  ToolCallParser(ToolCallSyntax syntax, nlohmann::ordered_json tools);

  // The content that is certain now, and the calls that closed.
  ParsedToolReply Push(std::string_view text);
  // At the end of the generation: everything still held.
  ParsedToolReply Finish();

  // The whole text at once.
  static ParsedToolReply Parse(std::string_view text, const ToolCallSyntax& syntax,
                               const nlohmann::ordered_json& tools);

 private:
  void Scan(bool final, ParsedToolReply& out);
  bool ScanSection(bool final, ParsedToolReply& out);
  bool ScanContent(bool final, ParsedToolReply& out);
  // Parses the call whose body starts at `at` (after its opening marker)
  // and adds it, or its text from pos_ as content when it is malformed.
  // False when the call has not closed yet.
  bool TakeCall(size_t at, bool final, ParsedToolReply& out);

  ToolCallSyntax syntax_;
  nlohmann::ordered_json tools_;
  std::string text_;
  size_t pos_ = 0;           // text_ before this is handed out
  bool in_section_ = false;  // between section_open and section_close
  bool after_call_ = false;  // whitespace here follows a call: dropped
  bool at_start_ = true;     // Llama 3: only whitespace since the start or the last call
  // (body start of an open call, where the search for its close resumes)
  std::pair<size_t, size_t> close_search_{std::string::npos, 0};
};

}  // namespace kakeya
