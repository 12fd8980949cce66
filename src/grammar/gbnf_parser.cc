// ParseGbnf (grammar.h): llama.cpp's GBNF (its grammars/README.md) into the
// flat rule layout of grammar_internal.h. Groups become rules of their own and
// repetitions are expanded into right-recursive rules as llama.cpp's
// handle_repetitions does, so the matcher knows only sequences, alternatives,
// rule references and character classes. Unlike llama.cpp, a rule may continue
// over any number of lines: it ends where the next `name ::=` begins.
#include <cstring>
#include <limits>
#include <map>
#include <optional>

#include "base/error.h"
#include "grammar/grammar.h"
#include "grammar/grammar_internal.h"
#include "grammar/left_recursion.h"
#include "grammar/utf8_decoder.h"

namespace kakeya {
namespace {

using grammar_limits::kMaxElements;
using grammar_limits::kMaxNesting;
using grammar_limits::kMaxRepetition;

constexpr uint32_t kUnbounded = std::numeric_limits<uint32_t>::max();

bool IsNameChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-';
}

class GbnfParser {
 public:
  GbnfParser(std::string_view text, std::string_view origin) : text_(text), origin_(origin) {}

  std::shared_ptr<const Grammar> Parse() {
    SkipSpace();
    while (!AtEnd()) ParseRule();
    for (size_t id = 0; id < rules_.size(); ++id) {
      if (!rules_[id].defined) FailAt(rules_[id].offset, "undefined rule `", names_[id], "`");
    }
    const auto root = ids_.find("root");
    if (root == ids_.end()) FailAt(0, "the grammar has no rule `root`, its start symbol");
    return Flatten(root->second);
  }

 private:
  struct RuleDraft {
    std::vector<GrammarElement> elements;
    bool defined = false;
    size_t offset = 0;  // where it is defined, or first referenced while undefined
  };

  template <typename... Args>
  [[noreturn]] void FailAt(size_t offset, Args&&... args) const {
    size_t line = 1, column = 1;
    for (size_t i = 0; i < offset && i < text_.size(); ++i) {
      if (text_[i] == '\n') {
        ++line;
        column = 1;
      } else if ((uint8_t(text_[i]) & 0xC0) != 0x80) {
        ++column;  // columns count code points
      }
    }
    Fail(origin_, ":", line, ":", column, ": ", std::forward<Args>(args)...);
  }

  bool AtEnd() const { return pos_ >= text_.size(); }
  char Peek(size_t ahead = 0) const { return pos_ + ahead < text_.size() ? text_[pos_ + ahead] : '\0'; }

  void SkipSpace() {
    while (!AtEnd()) {
      const char c = Peek();
      if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
        ++pos_;
      } else if (c == '#') {
        while (!AtEnd() && Peek() != '\n') ++pos_;
      } else {
        break;
      }
    }
  }

  std::string_view ParseName() {
    const size_t start = pos_;
    while (!AtEnd() && IsNameChar(Peek())) ++pos_;
    return text_.substr(start, pos_ - start);
  }

  // Whether a `name ::=` starts here: the end of the rule before it.
  bool AtRuleStart() const {
    size_t p = pos_;
    while (p < text_.size() && IsNameChar(text_[p])) ++p;
    if (p == pos_) return false;
    while (p < text_.size() && (text_[p] == ' ' || text_[p] == '\t')) ++p;
    return text_.compare(p, 3, "::=") == 0;
  }

  uint32_t RuleId(std::string_view name, size_t offset) {
    const auto [it, inserted] = ids_.emplace(std::string(name), uint32_t(rules_.size()));
    if (inserted) {
      rules_.push_back({});
      rules_.back().offset = offset;
      names_.emplace_back(name);
    }
    return it->second;
  }

  // A rule for a group or a repetition, named after the rule it serves as
  // llama.cpp names them (root_3 there, root-3 here: `_` is no name character).
  uint32_t NewRule(std::string_view parent, size_t offset) {
    const std::string name = StrCat(parent, "-", rules_.size());
    const uint32_t id = RuleId(name, offset);
    rules_[id].defined = true;
    return id;
  }

  void Push(std::vector<GrammarElement>& out, GrammarElement element) {
    if (++n_elements_ > kMaxElements) {
      FailAt(pos_, "the grammar exceeds ", kMaxElements, " elements once its repetitions are expanded");
    }
    out.push_back(element);
  }

  void SetRule(uint32_t id, std::vector<GrammarElement> elements) {
    Push(elements, {GrammarElement::kEnd, 0});
    rules_[id].elements = std::move(elements);
  }

  void ParseRule() {
    const size_t start = pos_;
    const std::string_view name = ParseName();
    if (name.empty()) FailAt(pos_, "expected a rule name, found `", Peek(), "`");
    SkipSpace();
    if (text_.compare(pos_, 3, "::=") != 0) FailAt(pos_, "expected `::=` after the rule name `", name, "`");
    pos_ += 3;
    const uint32_t id = RuleId(name, start);
    if (rules_[id].defined) FailAt(start, "rule `", name, "` is defined twice");
    rules_[id].defined = true;
    rules_[id].offset = start;
    std::vector<GrammarElement> elements;
    ParseAlternatives(name, elements, 0);
    if (Peek() == ')') FailAt(pos_, "`)` closes no group");
    SetRule(id, std::move(elements));
  }

  void ParseAlternatives(std::string_view rule, std::vector<GrammarElement>& out, int depth) {
    ParseSequence(rule, out, depth);
    while (Peek() == '|') {
      ++pos_;
      Push(out, {GrammarElement::kAlt, 0});
      ParseSequence(rule, out, depth);
    }
  }

  void ParseSequence(std::string_view rule, std::vector<GrammarElement>& out, int depth) {
    size_t item_start = out.size();  // the item a repetition applies to
    bool have_item = false;
    while (true) {
      SkipSpace();
      if (AtEnd() || Peek() == '|' || Peek() == ')' || AtRuleStart()) return;
      const size_t start = pos_;
      const char c = Peek();
      if (c == '*' || c == '+' || c == '?' || c == '{') {
        if (!have_item) FailAt(start, "`", c, "` has nothing to repeat");
        const auto [min, max] = ParseRepetition();
        Repeat(rule, out, item_start, min, max, start);
        have_item = false;
        continue;
      }
      item_start = out.size();
      have_item = true;
      if (c == '"') {
        ++pos_;
        while (Peek() != '"') {
          if (AtEnd() || Peek() == '\n') FailAt(start, "unterminated string literal");
          const uint32_t cp = ParseChar();
          Push(out, {GrammarElement::kChar, ClassId({{{cp, cp}}, false})});
        }
        ++pos_;
        if (out.size() == item_start) have_item = false;  // "" is nothing to repeat
      } else if (c == '[') {
        Push(out, {GrammarElement::kChar, ClassId(ParseClass())});
      } else if (c == '.') {
        ++pos_;
        Push(out, {GrammarElement::kChar, ClassId({{}, true})});
      } else if (IsNameChar(c)) {
        const std::string_view name = ParseName();
        Push(out, {GrammarElement::kRuleRef, RuleId(name, start)});
      } else if (c == '(') {
        if (depth + 1 > kMaxNesting) FailAt(start, "groups nest deeper than ", kMaxNesting);
        ++pos_;
        const uint32_t id = NewRule(rule, start);
        std::vector<GrammarElement> group;
        ParseAlternatives(rule, group, depth + 1);
        if (Peek() != ')') FailAt(pos_, AtEnd() ? "expected `)`, found the end" : "expected `)`");
        ++pos_;
        SetRule(id, std::move(group));
        Push(out, {GrammarElement::kRuleRef, id});
      } else {
        FailAt(start, "unexpected `", c, "`");
      }
    }
  }

  uint32_t ParseCount() {
    const size_t start = pos_;
    uint64_t n = 0;
    while (Peek() >= '0' && Peek() <= '9') {
      n = std::min<uint64_t>(n * 10 + uint64_t(Peek() - '0'), uint64_t(kMaxRepetition) + 1);
      ++pos_;
    }
    if (pos_ == start) FailAt(pos_, "expected a number in the repetition");
    if (n > kMaxRepetition) FailAt(start, "a repetition count above ", kMaxRepetition);
    return uint32_t(n);
  }

  std::pair<uint32_t, uint32_t> ParseRepetition() {
    const char c = text_[pos_++];
    if (c == '*') return {0, kUnbounded};
    if (c == '+') return {1, kUnbounded};
    if (c == '?') return {0, 1};
    const size_t start = pos_ - 1;
    SkipSpace();
    const uint32_t min = ParseCount();
    uint32_t max = min;
    SkipSpace();
    if (Peek() == ',') {
      ++pos_;
      SkipSpace();
      max = Peek() == '}' ? kUnbounded : ParseCount();
      SkipSpace();
    }
    if (Peek() != '}') FailAt(pos_, "expected `}` closing the repetition");
    ++pos_;
    if (max < min) FailAt(start, "repetition {", min, ",", max, "} has its maximum below its minimum");
    return {min, max};
  }

  // out[item_start..] repeated min to max times, as llama.cpp's handle_repetitions.
  void Repeat(std::string_view rule, std::vector<GrammarElement>& out, size_t item_start, uint32_t min,
              uint32_t max, size_t offset) {
    const std::vector<GrammarElement> item(out.begin() + std::ptrdiff_t(item_start), out.end());
    if (min == 0) {
      n_elements_ -= item.size();
      out.resize(item_start);
    }
    for (uint32_t i = 1; i < min; ++i) {
      for (const GrammarElement& e : item) Push(out, e);
    }
    if (max == min) return;
    std::vector<GrammarElement> body;
    if (max == kUnbounded) {  // rest ::= item rest |
      const uint32_t id = NewRule(rule, offset);
      for (const GrammarElement& e : item) Push(body, e);
      Push(body, {GrammarElement::kRuleRef, id});
      Push(body, {GrammarElement::kAlt, 0});
      SetRule(id, std::move(body));
      Push(out, {GrammarElement::kRuleRef, id});
      return;
    }
    std::optional<uint32_t> inner;  // rest_k ::= item rest_(k-1) |
    for (uint32_t i = 0; i < max - min; ++i) {
      const uint32_t id = NewRule(rule, offset);
      body.clear();
      for (const GrammarElement& e : item) Push(body, e);
      if (inner) Push(body, {GrammarElement::kRuleRef, *inner});
      Push(body, {GrammarElement::kAlt, 0});
      SetRule(id, body);
      inner = id;
    }
    Push(out, {GrammarElement::kRuleRef, *inner});
  }

  uint32_t ParseHex(int digits) {
    uint32_t value = 0;
    for (int i = 0; i < digits; ++i) {
      const char c = Peek();
      uint32_t d;
      if (c >= '0' && c <= '9') {
        d = uint32_t(c - '0');
      } else if (c >= 'a' && c <= 'f') {
        d = uint32_t(c - 'a' + 10);
      } else if (c >= 'A' && c <= 'F') {
        d = uint32_t(c - 'A' + 10);
      } else {
        FailAt(pos_, "expected ", digits, " hexadecimal digits in the escape");
      }
      value = value * 16 + d;
      ++pos_;
    }
    if (value > 0x10FFFF) FailAt(pos_, "the escape's value is past U+10FFFF");
    return value;
  }

  // One character of a literal or class: an escape or a UTF-8 sequence.
  uint32_t ParseChar() {
    const size_t start = pos_;
    if (Peek() == '\\') {
      ++pos_;
      const char e = Peek();
      ++pos_;
      switch (e) {
        case 'n': return '\n';
        case 'r': return '\r';
        case 't': return '\t';
        case '\\': case '"': case '[': case ']': case '-': case '^': return uint32_t(uint8_t(e));
        case 'x': return ParseHex(2);
        case 'u': return ParseHex(4);
        case 'U': return ParseHex(8);
        default: FailAt(start, "unknown escape `\\", e, "`");
      }
    }
    PartialCodePoint partial;
    uint32_t cp = 0;
    while (true) {
      if (AtEnd()) FailAt(start, "malformed UTF-8");
      switch (DecodeUtf8Byte(partial, uint8_t(text_[pos_++]), cp)) {
        case Utf8Step::kComplete: return cp;
        case Utf8Step::kMalformed: FailAt(start, "malformed UTF-8");
        case Utf8Step::kPending: break;
      }
    }
  }

  CharClass ParseClass() {
    const size_t start = pos_++;
    CharClass cls;
    if (Peek() == '^') {
      cls.negated = true;
      ++pos_;
    }
    while (Peek() != ']') {
      if (AtEnd()) FailAt(start, "unterminated character class");
      const size_t at = pos_;
      const uint32_t first = ParseChar();
      uint32_t last = first;
      if (Peek() == '-' && Peek(1) != ']' && pos_ + 1 < text_.size()) {
        ++pos_;
        last = ParseChar();
        if (last < first) FailAt(at, "the range's end is below its start");
      }
      cls.ranges.push_back({first, last});
    }
    ++pos_;
    return cls;
  }

  uint32_t ClassId(CharClass cls) {
    std::vector<uint32_t> key{cls.negated ? 1u : 0u};
    for (const CodePointRange& r : cls.ranges) key.insert(key.end(), {r.first, r.last});
    const auto [it, inserted] = class_ids_.emplace(std::move(key), uint32_t(classes_.size()));
    if (inserted) classes_.push_back(std::move(cls));
    return it->second;
  }

  std::shared_ptr<const Grammar> Flatten(uint32_t root) {
    auto grammar = std::make_shared<Grammar>();
    grammar->root = root;
    grammar->rule_names = std::move(names_);
    grammar->classes = std::move(classes_);
    grammar->elements.reserve(n_elements_);
    for (const RuleDraft& rule : rules_) {
      grammar->rule_start.push_back(uint32_t(grammar->elements.size()));
      grammar->elements.insert(grammar->elements.end(), rule.elements.begin(), rule.elements.end());
    }
    if (const std::optional<uint32_t> rule = FindLeftRecursion(*grammar)) {
      FailAt(rules_[*rule].offset, "left recursion through rule `", grammar->rule_names[*rule],
             "` (a rule reached again before any character: rewrite it right-recursive)");
    }
    return grammar;
  }

  std::string_view text_;
  std::string_view origin_;
  size_t pos_ = 0;
  size_t n_elements_ = 0;
  std::vector<RuleDraft> rules_;
  std::vector<std::string> names_;
  std::map<std::string, uint32_t, std::less<>> ids_;
  std::vector<CharClass> classes_;
  std::map<std::vector<uint32_t>, uint32_t> class_ids_;
};

}  // namespace

std::shared_ptr<const Grammar> ParseGbnf(std::string_view text, std::string_view origin) {
  return GbnfParser(text, origin).Parse();
}

}  // namespace kakeya
