#include "grammar/schema_pattern.h"

#include <algorithm>

#include "base/error.h"
#include "grammar/gbnf_text.h"
#include "grammar/utf8_decoder.h"
#include "tokenizer/utf8.h"

namespace kakeya {
namespace {

using Ranges = std::vector<CodePointRange>;
constexpr uint32_t kMaxCodePoint = 0x10FFFF;

Ranges Normalize(Ranges r) {
  std::sort(r.begin(), r.end(), [](const CodePointRange& a, const CodePointRange& b) { return a.first < b.first; });
  Ranges out;
  for (const CodePointRange& x : r) {
    if (!out.empty() && x.first <= out.back().last + 1) {
      out.back().last = std::max(out.back().last, x.last);
    } else {
      out.push_back(x);
    }
  }
  return out;
}

Ranges Complement(const Ranges& normalized) {
  Ranges out;
  uint32_t next = 0;
  for (const CodePointRange& r : normalized) {
    if (r.first > next) out.push_back({next, r.first - 1});
    next = r.last + 1;
  }
  if (next <= kMaxCodePoint) out.push_back({next, kMaxCodePoint});
  return out;
}

Ranges Intersect(const Ranges& a, const Ranges& b) {
  Ranges out;
  for (const CodePointRange& x : a) {
    for (const CodePointRange& y : b) {
      const uint32_t first = std::max(x.first, y.first), last = std::min(x.last, y.last);
      if (first <= last) out.push_back({first, last});
    }
  }
  return Normalize(out);
}

bool Contains(const Ranges& r, uint32_t cp) {
  return std::any_of(r.begin(), r.end(), [&](const CodePointRange& x) { return cp >= x.first && cp <= x.last; });
}

// ECMA-262's \d, \w and \s (WhiteSpace and LineTerminator).
const Ranges kDigit = {{'0', '9'}};
const Ranges kWord = {{'0', '9'}, {'A', 'Z'}, {'_', '_'}, {'a', 'z'}};
const Ranges kSpace = {{0x09, 0x0D}, {0x20, 0x20}, {0xA0, 0xA0}, {0x1680, 0x1680}, {0x2000, 0x200A},
                       {0x2028, 0x2029}, {0x202F, 0x202F}, {0x205F, 0x205F}, {0x3000, 0x3000}, {0xFEFF, 0xFEFF}};
// `.`: anything but a line terminator.
const Ranges kDot = Complement({{0x0A, 0x0A}, {0x0D, 0x0D}, {0x2028, 0x2029}});

class PatternParser {
 public:
  PatternParser(std::string_view pattern, const std::string& path) : path_(path) {
    PartialCodePoint partial;
    uint32_t cp = 0;
    for (char c : pattern) {
      if (DecodeUtf8Byte(partial, uint8_t(c), cp) == Utf8Step::kComplete) cps_.push_back(cp);
    }
  }

  // Anchors belong to the top-level alternatives: in ^a|b$ the first is
  // anchored at the start only, the second at the end only.
  std::string Parse() {
    end_ = cps_.size();
    std::string out = "(";
    while (true) {
      const bool anchored_start = Peek() == '^' && !AtEnd();
      if (anchored_start) ++pos_;
      bool anchored_end = false;
      const std::string body = Sequence(0, &anchored_end);
      out += (anchored_start ? "" : "json-char* ") + body + (anchored_end ? "" : " json-char*");
      if (AtEnd()) break;
      if (Peek() != '|') Unsupported("an unmatched `)`");
      ++pos_;
      out += " | ";
    }
    return out + ")";
  }

  template <typename... Args>
  [[noreturn]] void Unsupported(Args&&... args) const {
    Fail(path_, ": ", std::forward<Args>(args)..., " in the pattern is not supported (docs/formats/json-schema.md)");
  }

  bool AtEnd() const { return pos_ >= end_; }
  uint32_t Peek() const { return AtEnd() ? 0 : cps_[pos_]; }

  std::string Alternatives(int depth) {
    // Half the grammar's nesting limit: the expression's own groups come
    // inside a few of the compiler's.
    constexpr int kMaxDepth = grammar_limits::kMaxNesting / 2;
    if (depth > kMaxDepth) Unsupported("groups nested deeper than ", kMaxDepth);
    std::string out = StrCat("(", Sequence(depth, nullptr));
    bool nullable = nullable_;
    while (!AtEnd() && Peek() == '|') {
      ++pos_;
      out += " | " + Sequence(depth, nullptr);
      nullable = nullable || nullable_;
    }
    nullable_ = nullable;
    return out + ")";
  }

  // `anchored_end`: where a top-level alternative may end in '$'.
  std::string Sequence(int depth, bool* anchored_end) {
    std::string out;
    bool nullable = true;
    while (!AtEnd() && Peek() != '|' && Peek() != ')') {
      if (anchored_end && Peek() == '$' && (pos_ + 1 == end_ || cps_[pos_ + 1] == '|')) {
        ++pos_;
        *anchored_end = true;
        break;
      }
      std::string atom = Atom(depth);
      out += " " + atom + Quantifier();
      nullable = nullable && nullable_;
    }
    nullable_ = nullable;
    return out;
  }

  uint32_t Count() {
    uint64_t n = 0;
    const size_t start = pos_;
    while (!AtEnd() && Peek() >= '0' && Peek() <= '9') {
      n = std::min<uint64_t>(n * 10 + (Peek() - '0'), grammar_limits::kMaxRepetition + 1ull);
      ++pos_;
    }
    if (pos_ == start) Unsupported("a `{` that starts no repetition");
    if (n > grammar_limits::kMaxRepetition) Unsupported("a repetition count above ", grammar_limits::kMaxRepetition);
    return uint32_t(n);
  }

  // After an atom (nullable_ says whether it can match nothing): its
  // quantifier, which updates nullable_ for the quantified atom.
  std::string Quantifier() {
    if (AtEnd()) return "";
    std::string out;
    const uint32_t c = Peek();
    bool unbounded = false;
    if (c == '*' || c == '+' || c == '?') {
      ++pos_;
      out = std::string(1, char(c));
      unbounded = c != '?';
      nullable_ = nullable_ || c != '+';
    } else if (c == '{') {
      ++pos_;
      const uint32_t min = Count();
      out = StrCat("{", min);
      nullable_ = nullable_ || min == 0;
      if (Peek() == ',') {
        ++pos_;
        out += ",";
        unbounded = Peek() == '}';
        if (!unbounded) {
          const uint32_t max = Count();
          if (max < min) Unsupported("a repetition {", min, ",", max, "}");
          out += std::to_string(max);
        }
      }
      if (Peek() != '}') Unsupported("an unclosed `{`");
      ++pos_;
      out += "}";
    } else {
      return "";
    }
    // The grammar would loop on the empty match (docs/formats/gbnf.md, left recursion).
    if (unbounded && atom_nullable_) Unsupported("an unbounded repetition of what can match nothing, as (a*)*,");
    if (!AtEnd() && Peek() == '?') ++pos_;  // lazy: the same strings
    if (!AtEnd() && (Peek() == '*' || Peek() == '+' || Peek() == '?' || Peek() == '{')) {
      Unsupported("a repeated repetition");
    }
    return out;
  }

  // Sets nullable_ and atom_nullable_: whether the atom can match nothing.
  std::string Atom(int depth) {
    std::string out = AtomText(depth);
    atom_nullable_ = nullable_;
    return out;
  }

  std::string AtomText(int depth) {
    const uint32_t c = Peek();
    ++pos_;
    nullable_ = false;
    switch (c) {
      case '(': {
        if (Peek() == '?') {
          if (pos_ + 1 < end_ && cps_[pos_ + 1] == ':') {
            pos_ += 2;
          } else {
            Unsupported("a lookaround or named group `(?`");
          }
        }
        std::string inner = Alternatives(depth + 1);
        if (AtEnd() || Peek() != ')') Unsupported("an unclosed `(`");
        ++pos_;
        return inner;
      }
      case '[': return JsonCharsGbnf(Class());
      case '.': return JsonCharsGbnf(kDot);
      case '\\': return JsonCharsGbnf(Escape(false));
      case '^': case '$': Unsupported("an anchor `", char(c), "` inside the expression");
      case '*': case '+': case '?': case '{': Unsupported("`", char(c), "` with nothing to repeat");
      default: return JsonCharsGbnf({{c, c}});
    }
  }

  uint32_t Hex(int digits) {
    uint32_t v = 0;
    for (int i = 0; i < digits; ++i) {
      const uint32_t c = Peek();
      uint32_t d;
      if (c >= '0' && c <= '9') {
        d = c - '0';
      } else if ((c | 0x20) >= 'a' && (c | 0x20) <= 'f') {
        d = (c | 0x20) - 'a' + 10;
      } else {
        Unsupported("a malformed hexadecimal escape");
      }
      v = v * 16 + d;
      ++pos_;
    }
    return v;
  }

  // After a backslash: the characters it stands for.
  Ranges Escape(bool in_class) {
    if (AtEnd()) Unsupported("a trailing backslash");
    const uint32_t c = Peek();
    ++pos_;
    switch (c) {
      case 'd': return kDigit;
      case 'w': return kWord;
      case 's': return kSpace;
      case 'D': return Complement(kDigit);
      case 'W': return Complement(kWord);
      case 'S': return Complement(kSpace);
      case 'n': return {{'\n', '\n'}};
      case 'r': return {{'\r', '\r'}};
      case 't': return {{'\t', '\t'}};
      case 'f': return {{'\f', '\f'}};
      case 'v': return {{'\v', '\v'}};
      case '0': return {{0, 0}};
      case 'x': { const uint32_t v = Hex(2); return {{v, v}}; }
      case 'u': {
        const uint32_t v = Hex(4);
        if (v >= 0xD800 && v <= 0xDFFF) Unsupported("a surrogate escape \\u", std::hex, v);
        return {{v, v}};
      }
      case 'b':
        if (in_class) return {{0x08, 0x08}};
        Unsupported("the word boundary \\b");
      default:
        if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '1' && c <= '9')) {
          Unsupported("the escape \\", char(c));
        }
        return {{c, c}};  // an escaped punctuation character or any other: itself
    }
  }

  // After '[': the class up to its ']'.
  Ranges Class() {
    bool negated = false;
    if (Peek() == '^') {
      negated = true;
      ++pos_;
    }
    Ranges set;  // ECMA-262: [] matches nothing, [^] anything
    while (true) {
      if (AtEnd()) Unsupported("an unclosed `[`");
      if (Peek() == ']') break;
      Ranges item = ClassItem();
      if (item.size() == 1 && item[0].first == item[0].last && Peek() == '-' && pos_ + 1 < end_ &&
          cps_[pos_ + 1] != ']') {
        ++pos_;
        Ranges upper = ClassItem();
        if (upper.size() != 1 || upper[0].first != upper[0].last || upper[0].first < item[0].first) {
          Unsupported("a malformed class range");
        }
        item[0].last = upper[0].first;
      }
      set.insert(set.end(), item.begin(), item.end());
    }
    ++pos_;
    set = Normalize(set);
    return negated ? Complement(set) : set;
  }

  Ranges ClassItem() {
    const uint32_t c = Peek();
    ++pos_;
    if (c == '\\') return Escape(true);
    if (c == '[' && Peek() == ':') Unsupported("a POSIX class `[:`");
    return {{c, c}};
  }

  std::vector<uint32_t> cps_;
  bool nullable_ = false;       // the last sequence, alternatives or (quantified) atom can match nothing
  bool atom_nullable_ = false;  // the last atom, before its quantifier
  size_t pos_ = 0;
  size_t end_ = 0;
  const std::string& path_;
};

std::string HexDigitsClass(const Ranges& set, uint32_t high) {
  std::string letters;
  for (uint32_t low = 0; low < 16; ++low) {
    if (!Contains(set, high * 16 + low)) continue;
    if (low < 10) {
      letters += char('0' + low);
    } else {
      letters += char('a' + low - 10);
      letters += char('A' + low - 10);
    }
  }
  return letters.empty() ? "" : "[" + letters + "]";
}

}  // namespace

std::string JsonCharsGbnf(const Ranges& ranges) {
  const Ranges set = Normalize(ranges);
  // What JSON writes as itself: not a control character, quote or backslash.
  const Ranges plain = Intersect(set, Complement({{0x00, 0x1F}, {'"', '"'}, {'\\', '\\'}}));
  std::vector<std::string> alternatives;
  if (plain.size() == 1 && plain[0].first == plain[0].last) {
    std::string one;
    utf8::Append(one, plain[0].first);
    alternatives.push_back(GbnfLiteral(one));
  } else if (!plain.empty()) {
    alternatives.push_back(GbnfClass(plain));
  }
  // The escapes, as nlohmann::json and most encoders write them: the short
  // forms where JSON has one, else \u00XX.
  std::string short_forms;
  const std::pair<uint32_t, char> kShort[] = {{'"', '"'}, {'\\', '\\'}, {0x08, 'b'}, {0x0C, 'f'},
                                             {0x0A, 'n'}, {0x0D, 'r'}, {0x09, 't'}};
  Ranges long_forms;
  for (const auto& [cp, letter] : kShort) {
    if (Contains(set, cp)) short_forms += letter == '"' || letter == '\\' ? std::string("\\") + letter : std::string(1, letter);
  }
  for (uint32_t cp = 0; cp < 0x20; ++cp) {
    const bool has_short = cp == 0x08 || cp == 0x0C || cp == 0x0A || cp == 0x0D || cp == 0x09;
    if (!has_short && Contains(set, cp)) long_forms.push_back({cp, cp});
  }
  std::vector<std::string> escapes;
  if (!short_forms.empty()) escapes.push_back("[" + short_forms + "]");
  std::vector<std::string> hex;
  for (uint32_t high = 0; high < 2; ++high) {
    const std::string lows = HexDigitsClass(long_forms, high);
    if (!lows.empty()) hex.push_back(StrCat("\"", high, "\" ", lows));
  }
  if (!hex.empty()) {
    std::string joined;
    for (const std::string& h : hex) joined += (joined.empty() ? "" : " | ") + h;
    escapes.push_back("\"u00\" (" + joined + ")");
  }
  if (!escapes.empty()) {
    std::string joined;
    for (const std::string& e : escapes) joined += (joined.empty() ? "" : " | ") + e;
    alternatives.push_back("\"\\\\\" (" + joined + ")");
  }
  if (alternatives.empty()) return "[^\\x00-\\U0010FFFF]";  // matches nothing, e.g. [^\s\S]
  if (alternatives.size() == 1) return alternatives[0];
  return "(" + alternatives[0] + " | " + alternatives[1] + ")";
}

std::string PatternToGbnf(std::string_view pattern, const std::string& path) {
  return PatternParser(pattern, path).Parse();
}

}  // namespace kakeya
