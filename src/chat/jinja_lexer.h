// Splits a Jinja template into text and the tokens inside {{ }} and {% %},
// dropping {# #} comments and applying whitespace control the way
// transformers configures jinja2 for chat templates: trim_blocks (the newline
// after a block tag goes), lstrip_blocks (indentation before a block tag
// goes), "-" on a delimiter strips all whitespace on that side, "+" keeps it,
// and a single newline at the end of the template is dropped.
#pragma once

#include <string>
#include <vector>

namespace kakeya::jinja {

struct SourcePos {
  int line = 1;
  int column = 1;
};

enum class TokenKind {
  kText,
  kVariableBegin,  // {{
  kVariableEnd,    // }}
  kBlockBegin,     // {%
  kBlockEnd,       // %}
  kName,
  kString,  // text holds the decoded value
  kInteger,
  kFloat,
  kOperator,  // text holds the operator: "==", "(", "|", ...
  kEnd,
};

struct Token {
  TokenKind kind;
  std::string text;
  SourcePos pos;
};

// Throws kakeya::Error naming line:column for an unclosed tag, comment or
// string, or a character that cannot start a token.
std::vector<Token> Tokenize(const std::string& source);

}  // namespace kakeya::jinja
