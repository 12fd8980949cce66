// The parsed form of a GBNF grammar (grammar.h) that the parser builds and
// the matcher walks: llama.cpp's layout (llama-grammar.h), every rule a run
// of elements in one flat array, its alternatives separated by kAlt and the
// rule closed by kEnd. A position in the grammar is an index into that array.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace kakeya {

namespace grammar_limits {
// Bounds that keep a hostile grammar (a request's response_format, a fuzzer's
// input) from exhausting stack or memory: group nesting while parsing, the
// elements of all rules after repetitions are expanded, and the count of a
// repetition {m,n}.
inline constexpr int kMaxNesting = 64;
inline constexpr size_t kMaxElements = 1 << 20;
inline constexpr uint32_t kMaxRepetition = 10000;
// Bounds on the matcher's work per code point for ambiguous grammars, whose
// stack sets can grow exponentially (a ::= "x" a "y" | "x" a "z"): past them
// the matcher keeps the first stacks and drops the rest, so it accepts fewer
// sentences, never more.
inline constexpr size_t kMaxStacks = 4096;
inline constexpr size_t kMaxExpansionSteps = 1 << 16;
}  // namespace grammar_limits

struct CodePointRange {
  uint32_t first;
  uint32_t last;  // inclusive
};

// A set of code points: `.`, "a" (one range), [a-z0-9_] or [^"\\].
struct CharClass {
  std::vector<CodePointRange> ranges;
  bool negated = false;

  bool Contains(uint32_t cp) const {
    for (const CodePointRange& r : ranges) {
      if (cp >= r.first && cp <= r.last) return !negated;
    }
    return negated;
  }
  // Whether some code point in [first, last] belongs to the class.
  bool Intersects(uint32_t first, uint32_t last) const;
};

struct GrammarElement {
  enum Kind : uint8_t {
    kEnd,      // closes a rule
    kAlt,      // separates alternatives
    kRuleRef,  // value: rule index
    kChar,     // value: index in Grammar::classes
  };
  Kind kind;
  uint32_t value;
};

class Grammar {
 public:
  std::vector<GrammarElement> elements;
  std::vector<uint32_t> rule_start;  // per rule: position of its first element
  std::vector<std::string> rule_names;
  std::vector<CharClass> classes;
  uint32_t root = 0;

  bool EndsAlternative(uint32_t pos) const {
    return elements[pos].kind == GrammarElement::kEnd || elements[pos].kind == GrammarElement::kAlt;
  }
};

}  // namespace kakeya
