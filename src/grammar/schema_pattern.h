// JSON Schema's `pattern` (an ECMA-262 regular expression) as GBNF over the
// JSON text of a string: each character the expression matches becomes the
// way JSON writes it (docs/formats/json-schema.md, "pattern").
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "grammar/grammar_internal.h"

namespace kakeya {

// The characters `ranges` (sorted, disjoint) as they appear inside a JSON
// string: as themselves, or as escapes ("\"", "\\", "\n", "\u001f") where
// JSON requires them.
std::string JsonCharsGbnf(const std::vector<CodePointRange>& ranges);

// A GBNF expression for the contents (between the quotes) of the JSON
// strings that `pattern` matches; unanchored ends match anything, as JSON
// Schema's patterns search rather than match. `path` names the pattern in
// errors: constructs past the supported subset (lookaround, backreferences,
// word boundaries, \p classes, anchors inside the expression) throw Error.
std::string PatternToGbnf(std::string_view pattern, const std::string& path);

}  // namespace kakeya
