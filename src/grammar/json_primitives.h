// The GBNF rules of JSON's own syntax (RFC 8259) that JSON mode and every
// compiled schema share, and integer ranges as digit patterns.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace kakeya {

// Rules ws, json-value, json-object, json-array, json-string, json-char,
// json-number, json-integer, json-literal (docs/formats/json-schema.md,
// "JSON text"). Whitespace comes after a value only inside a container,
// so a value alone has none around it.
// json-key-char is a character of an undeclared property's name, spelled
// one way only (no \u escapes), so that the names it spells can exclude the
// declared ones.
std::string JsonPrimitiveRules();

// A GBNF expression for the decimal integers in [minimum, maximum] (an
// absent bound: int64's), written as JSON writes them: no leading zeros,
// "-" only before a non-zero magnitude. Requires minimum <= maximum.
std::string IntegerRangeGbnf(std::optional<int64_t> minimum, std::optional<int64_t> maximum);

}  // namespace kakeya
