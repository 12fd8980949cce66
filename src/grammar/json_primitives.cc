#include "grammar/json_primitives.h"

#include <limits>
#include <vector>

#include "base/error.h"

namespace kakeya {
namespace {

// Whitespace between tokens, bounded as llama.cpp's json-schema-to-grammar
// bounds it so that a model cannot loop on it forever: nothing, a space, or
// a newline and an indent of up to 20. None before the first token or after
// the last, so that generation stops at the closing bracket (MustEnd).
constexpr const char* kPrimitives = R"(ws ::= | " " | "\n" [ \t]{0,20}
json-value ::= json-object | json-array | json-string | json-number | json-literal
json-object ::= "{" ws ( json-member ( "," ws json-member )* )? "}"
json-member ::= json-string ws ":" ws json-value ws
json-array ::= "[" ws ( json-value ws ( "," ws json-value ws )* )? "]"
json-string ::= "\"" json-char* "\""
json-char ::= [^"\\\x00-\x1F] | "\\" ( ["\\/bfnrt] | "u" [0-9a-fA-F]{4} )
json-key-char ::= [^"\\\x00-\x1F] | "\\" ["\\bfnrt]
json-number ::= "-"? ( "0" | [1-9] [0-9]{0,19} ) ( "." [0-9]{1,20} )? ( [eE] [-+]? [0-9]{1,3} )?
json-integer ::= "-"? ( "0" | [1-9] [0-9]{0,18} )
json-literal ::= "true" | "false" | "null"
)";

std::string Digits(char first, char last) {
  if (first == last) return StrCat("\"", first, "\"");
  return StrCat("[", first, "-", last, "]");
}

// The decimal strings from a to b, both of n digits (leading zeros kept), a <= b.
std::string SameLength(const std::string& a, const std::string& b) {
  const size_t n = a.size();
  if (n == 0) return "";
  if (a[0] == b[0]) {
    const std::string rest = SameLength(a.substr(1), b.substr(1));
    return Digits(a[0], a[0]) + (rest.empty() ? "" : " " + rest);
  }
  const std::string low_rest = a.substr(1), high_rest = b.substr(1);
  const bool low_full = low_rest.find_first_not_of('0') == std::string::npos;
  const bool high_full = high_rest.find_first_not_of('9') == std::string::npos;
  const std::string any_rest = n > 1 ? " [0-9]{" + std::to_string(n - 1) + "}" : "";
  std::vector<std::string> alternatives;
  char mid_first = a[0], mid_last = b[0];
  if (!low_full) {
    alternatives.push_back(Digits(a[0], a[0]) + " " + SameLength(low_rest, std::string(n - 1, '9')));
    ++mid_first;
  }
  if (!high_full) --mid_last;
  if (mid_first <= mid_last) alternatives.push_back(Digits(mid_first, mid_last) + any_rest);
  if (!high_full) alternatives.push_back(Digits(b[0], b[0]) + " " + SameLength(std::string(n - 1, '0'), high_rest));
  std::string out = "(";
  for (size_t i = 0; i < alternatives.size(); ++i) out += (i ? " | " : "") + alternatives[i];
  return out + ")";
}

// The magnitudes in [lo, hi] without leading zeros, as alternatives.
void Magnitudes(uint64_t lo, uint64_t hi, std::vector<std::string>& out) {
  uint64_t length_start = 0;  // smallest number of the current digit count
  for (uint64_t length = 1, ten_pow = 10; length <= 20; ++length) {
    const uint64_t length_end = length == 20 ? std::numeric_limits<uint64_t>::max() : ten_pow - 1;
    const uint64_t a = std::max(lo, length_start), b = std::min(hi, length_end);
    if (a <= b) out.push_back(SameLength(std::to_string(a), std::to_string(b)));
    if (length_end >= hi) break;
    length_start = ten_pow;
    ten_pow *= 10;
  }
}

}  // namespace

std::string JsonPrimitiveRules() { return kPrimitives; }

std::string IntegerRangeGbnf(std::optional<int64_t> minimum, std::optional<int64_t> maximum) {
  const int64_t lo = minimum.value_or(std::numeric_limits<int64_t>::min());
  const int64_t hi = maximum.value_or(std::numeric_limits<int64_t>::max());
  std::vector<std::string> alternatives;
  if (lo < 0) {  // "-" and a magnitude in [max(1, -hi), -lo]
    const uint64_t mag_lo = hi < 0 ? uint64_t(-(hi + 1)) + 1 : 1;
    const uint64_t mag_hi = uint64_t(-(lo + 1)) + 1;
    std::vector<std::string> negative;
    Magnitudes(mag_lo, mag_hi, negative);
    std::string group = "(";
    for (size_t i = 0; i < negative.size(); ++i) group += (i ? " | " : "") + negative[i];
    alternatives.push_back("\"-\" " + group + ")");
  }
  if (hi >= 0) Magnitudes(uint64_t(std::max<int64_t>(lo, 0)), uint64_t(hi), alternatives);
  std::string out = "(";
  for (size_t i = 0; i < alternatives.size(); ++i) out += (i ? " | " : "") + alternatives[i];
  return out + ")";
}

}  // namespace kakeya
