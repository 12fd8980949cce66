// Writing GBNF text (docs/formats/gbnf.md) from code: the JSON Schema
// compiler's literals and character classes.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "grammar/grammar_internal.h"

namespace kakeya {

// "text" with GBNF escapes; `text` is UTF-8.
std::string GbnfLiteral(std::string_view text);
// [...] over `ranges` (sorted, disjoint).
std::string GbnfClass(const std::vector<CodePointRange>& ranges);
// A rule name made of `hint`'s letters and digits, for readable generated grammars.
std::string GbnfName(std::string_view hint);

}  // namespace kakeya
