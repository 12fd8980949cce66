// Parses Jinja tokens into a Program, with jinja2's grammar and operator
// precedence (filters and tests bind tighter than arithmetic: a + b | trim is
// a + (b | trim)).
#pragma once

#include <string>

#include "chat/jinja_ast.h"

namespace kakeya::jinja {

// Brackets, expressions and blocks nested deeper than this are refused, so a
// hostile template cannot exhaust the stack.
inline constexpr int kMaxParseDepth = 128;

// Throws kakeya::Error "chat template syntax error at LINE:COLUMN: ..." for
// a syntax error, an unknown tag, filter or test, or nesting too deep.
Program Parse(const std::string& source);

}  // namespace kakeya::jinja
