#include "tokenizer/pre_tokenizer.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "base/error.h"

namespace kakeya {
namespace {

// The Unicode White_Space set, which is what \s means in llama.cpp (its
// is_whitespace flag, also used for the collapsed std::regex path). PCRE2's
// UCP \s differs (e.g. it includes U+180E), so \s and \S are spelled out.
constexpr std::string_view kWhiteSpace =
    "\\t\\n\\x0B\\f\\r \\x{85}\\x{A0}\\x{1680}\\x{2000}-\\x{200A}\\x{2028}\\x{2029}"
    "\\x{202F}\\x{205F}\\x{3000}";

std::string WithLlamaWhiteSpace(std::string_view pattern, std::string_view key) {
  std::string out;
  bool in_class = false;
  for (size_t i = 0; i < pattern.size(); ++i) {
    const char c = pattern[i];
    if (c == '\\' && i + 1 < pattern.size()) {
      const char next = pattern[++i];
      if (next == 's') {
        out += in_class ? StrCat(kWhiteSpace) : StrCat('[', kWhiteSpace, ']');
      } else if (next == 'S' && !in_class) {
        out += StrCat("[^", kWhiteSpace, ']');
      } else if (next == 'S') {
        Fail(key, ": regex '", pattern, "' uses \\S inside a character class");
      } else {
        out += c;
        out += next;
      }
      continue;
    }
    if (c == '[') in_class = true;
    if (c == ']') in_class = false;
    out += c;
  }
  return out;
}

}  // namespace

// One compiled pattern. Match data is allocated per Split call so that
// concurrent Encode calls never share it.
class PreTokenizer::Regex {
 public:
  Regex(const std::string& original, std::string_view key) {
    const std::string pattern = WithLlamaWhiteSpace(original, key);
    int error = 0;
    PCRE2_SIZE offset = 0;
    code_ = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                          PCRE2_UTF | PCRE2_UCP, &error, &offset, nullptr);
    if (code_ == nullptr) {
      PCRE2_UCHAR message[256];
      pcre2_get_error_message(error, message, sizeof(message));
      Fail(key, ": regex '", pattern, "' does not compile at offset ", offset, ": ",
           reinterpret_cast<const char*>(message));
    }
    // JIT is an optimisation only: without it (or if it fails) the interpreter runs.
    pcre2_jit_compile(code_, PCRE2_JIT_COMPLETE);
  }
  ~Regex() { pcre2_code_free(code_); }
  Regex(const Regex&) = delete;
  Regex& operator=(const Regex&) = delete;

  // Appends the matches of this regex in `piece` and the gaps between them.
  void SplitInto(std::string_view piece, pcre2_match_data* match,
                 std::vector<std::string_view>& out) const {
    const auto* subject = reinterpret_cast<PCRE2_SPTR>(piece.data());
    size_t start = 0;  // end of the previous match
    while (start < piece.size()) {
      const int rc = Match(subject, piece.size(), start, match);
      if (rc == PCRE2_ERROR_NOMATCH) break;
      if (rc < 0) Fail("pre-tokenizer: PCRE2 match failed with error ", rc);
      const PCRE2_SIZE* ovector = pcre2_get_ovector_pointer(match);
      const size_t begin = ovector[0];
      const size_t end = ovector[1];
      if (begin > start) out.push_back(piece.substr(start, begin - start));
      out.push_back(piece.substr(begin, end - begin));
      start = end;
    }
    if (start < piece.size()) out.push_back(piece.substr(start));
  }

  pcre2_match_data* NewMatchData() const {
    return pcre2_match_data_create_from_pattern(code_, nullptr);
  }

 private:
  // The subject was validated once by the caller (utf8::Sanitize), so the
  // per-call UTF check, which would make a long text quadratic, is skipped.
  // PCRE2_NOTEMPTY: an empty match would not advance; none of the patterns
  // of the table has a meaningful one.
  // The JIT stack can overflow on very long whitespace runs; the interpreter
  // (heap-allocated backtracking) then takes over.
  int Match(PCRE2_SPTR subject, size_t size, size_t start, pcre2_match_data* match) const {
    int rc = pcre2_match(code_, subject, size, start, kOptions, match, nullptr);
    if (rc == PCRE2_ERROR_JIT_STACKLIMIT) {
      rc = pcre2_match(code_, subject, size, start, kOptions | PCRE2_NO_JIT, match, nullptr);
    }
    return rc;
  }

  static constexpr uint32_t kOptions = PCRE2_NO_UTF_CHECK | PCRE2_NOTEMPTY;
  pcre2_code* code_ = nullptr;
};

PreTokenizer::PreTokenizer(const std::vector<std::string>& patterns, std::string_view key) {
  for (const std::string& pattern : patterns)
    regexes_.push_back(std::make_unique<Regex>(pattern, key));
}

PreTokenizer::~PreTokenizer() = default;
PreTokenizer::PreTokenizer(PreTokenizer&&) noexcept = default;

std::vector<std::string_view> PreTokenizer::Split(std::string_view text) const {
  std::vector<std::string_view> pieces;
  if (!text.empty()) pieces.push_back(text);
  std::vector<std::string_view> next;
  for (const auto& regex : regexes_) {
    std::unique_ptr<pcre2_match_data, decltype(&pcre2_match_data_free)> match(
        regex->NewMatchData(), &pcre2_match_data_free);
    next.clear();
    for (std::string_view piece : pieces) regex->SplitInto(piece, match.get(), next);
    pieces.swap(next);
  }
  return pieces;
}

}  // namespace kakeya
