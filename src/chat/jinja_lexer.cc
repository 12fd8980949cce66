#include "chat/jinja_lexer.h"

#include <algorithm>
#include <cctype>

#include "base/error.h"
#include "chat/jinja_strings.h"

namespace kakeya::jinja {
namespace {

bool IsSpace(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'; }

class Lexer {
 public:
  explicit Lexer(const std::string& source) {
    // jinja2 normalizes \r\n and \r to \n and drops one trailing newline
    // (keep_trailing_newline=False).
    src_.reserve(source.size());
    for (size_t i = 0; i < source.size(); ++i) {
      if (source[i] == '\r') {
        src_.push_back('\n');
        if (i + 1 < source.size() && source[i + 1] == '\n') ++i;
      } else {
        src_.push_back(source[i]);
      }
    }
    if (!src_.empty() && src_.back() == '\n') src_.pop_back();
    line_starts_.push_back(0);
    for (size_t i = 0; i < src_.size(); ++i) {
      if (src_[i] == '\n') line_starts_.push_back(i + 1);
    }
  }

  std::vector<Token> Run() {
    size_t pos = 0;
    bool line_starting = true;  // the previous delimiter ended with a newline
    while (pos < src_.size()) {
      const size_t open = FindOpen(pos);
      std::string text = src_.substr(pos, open - pos);
      if (open == src_.size()) {
        Emit(TokenKind::kText, std::move(text), pos);
        break;
      }
      const char kind = src_[open + 1];  // '{', '%' or '#'
      const char sign = open + 2 < src_.size() ? src_[open + 2] : '\0';
      if (sign == '-') {
        text.erase(std::find_if(text.rbegin(), text.rend(), [](char c) { return !IsSpace(c); }).base(), text.end());
      } else if (sign != '+' && kind != '{') {
        // lstrip_blocks: only spaces between the line start and the tag.
        const size_t line_start = text.rfind('\n') == std::string::npos ? 0 : text.rfind('\n') + 1;
        const bool only_space = line_start < text.size() &&
                                std::all_of(text.begin() + line_start, text.end(), [](char c) { return IsSpace(c); });
        if ((line_start > 0 || line_starting) && only_space) text.resize(line_start);
      }
      Emit(TokenKind::kText, std::move(text), pos);
      size_t inner = open + 2 + (sign == '-' || sign == '+');
      if (kind == '#') {
        const size_t close = src_.find("#}", inner);
        if (close == std::string::npos) Fail(Where(open), "unclosed comment '{#'");
        pos = AfterClose(close, close + 2, true, line_starting);
      } else {
        Emit(kind == '{' ? TokenKind::kVariableBegin : TokenKind::kBlockBegin, "", open);
        pos = LexTag(inner, kind == '{' ? '}' : '%', open, line_starting);
      }
    }
    Emit(TokenKind::kEnd, "", src_.size());
    return std::move(tokens_);
  }

 private:
  size_t FindOpen(size_t from) const {
    for (size_t i = src_.find('{', from); i != std::string::npos; i = src_.find('{', i + 1)) {
      if (i + 1 < src_.size() && (src_[i + 1] == '{' || src_[i + 1] == '%' || src_[i + 1] == '#')) return i;
    }
    return src_.size();
  }

  SourcePos PosAt(size_t offset) const {
    const auto it = std::upper_bound(line_starts_.begin(), line_starts_.end(), offset) - 1;
    return {static_cast<int>(it - line_starts_.begin()) + 1, static_cast<int>(offset - *it) + 1};
  }

  std::string Where(size_t offset) const {
    const SourcePos p = PosAt(offset);
    return StrCat("chat template syntax error at ", p.line, ":", p.column, ": ");
  }

  void Emit(TokenKind kind, std::string text, size_t offset) {
    if (kind == TokenKind::kText && text.empty()) return;
    tokens_.push_back({kind, std::move(text), PosAt(offset)});
  }

  // Handles what follows a closing delimiter at [close, end): "-" strips all
  // whitespace after it, trim_blocks (block tags and comments) one newline.
  size_t AfterClose(size_t close, size_t end, bool is_block, bool& line_starting) {
    const char sign = close > 0 ? src_[close - 1] : '\0';
    size_t pos = end;
    if (sign == '-') {
      while (pos < src_.size() && IsSpace(src_[pos])) ++pos;
    } else if (sign != '+' && is_block && pos < src_.size() && src_[pos] == '\n') {
      ++pos;
    }
    line_starting = pos > 0 && src_[pos - 1] == '\n';
    return pos;
  }

  // Lexes expression tokens up to the closing "}}" or "%}" that is not inside
  // brackets (as jinja2 does: {{ {'a': {'b': 1}} }} closes at the last "}}").
  size_t LexTag(size_t pos, char close_char, size_t open, bool& line_starting) {
    int brackets = 0;
    while (true) {
      while (pos < src_.size() && IsSpace(src_[pos])) ++pos;
      if (pos >= src_.size()) {
        Fail(Where(open), "unclosed '", close_char == '}' ? "{{" : "{%", "': the template ends before '",
             close_char == '}' ? "}}" : "%}", "'");
      }
      const bool strip = src_[pos] == '-' || src_[pos] == '+';
      const size_t at = pos + (strip ? 1 : 0);
      if (brackets == 0 && at + 1 < src_.size() && src_[at] == close_char && src_[at + 1] == '}' &&
          (!strip || src_[pos] == '-' || close_char == '%')) {
        Emit(close_char == '}' ? TokenKind::kVariableEnd : TokenKind::kBlockEnd, "", at);
        return AfterClose(at, at + 2, close_char == '%', line_starting);
      }
      pos = LexToken(pos, brackets);
    }
  }

  size_t LexToken(size_t pos, int& brackets) {
    const char c = src_[pos];
    if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
      size_t end = pos;
      while (end < src_.size() && (std::isalnum(static_cast<unsigned char>(src_[end])) || src_[end] == '_')) ++end;
      Emit(TokenKind::kName, src_.substr(pos, end - pos), pos);
      return end;
    }
    if (std::isdigit(static_cast<unsigned char>(c))) return LexNumber(pos);
    if (c == '\'' || c == '"') return LexString(pos);
    static const char* const kOperators[] = {"**", "//", "==", "!=", "<=", ">=", "+", "-", "*", "/", "%", "~",
                                             "<",  ">",  "=",  "(",  ")",  "[",  "]", "{", "}", ",", ".", ":", "|"};
    for (const char* op : kOperators) {
      const std::string_view view(op);
      if (src_.compare(pos, view.size(), view) == 0) {
        if (view == "(" || view == "[" || view == "{") ++brackets;
        if ((view == ")" || view == "]" || view == "}") && brackets > 0) --brackets;
        Emit(TokenKind::kOperator, std::string(view), pos);
        return pos + view.size();
      }
    }
    Fail(Where(pos), "unexpected character '", std::string(1, c), "'");
  }

  size_t LexNumber(size_t pos) {
    size_t end = pos;
    auto digits = [&] {
      while (end < src_.size() && (std::isdigit(static_cast<unsigned char>(src_[end])) || src_[end] == '_')) ++end;
    };
    digits();
    bool is_float = false;
    if (end + 1 < src_.size() && src_[end] == '.' && std::isdigit(static_cast<unsigned char>(src_[end + 1]))) {
      ++end;
      digits();
      is_float = true;
    }
    if (end < src_.size() && (src_[end] == 'e' || src_[end] == 'E')) {
      size_t exp = end + 1;
      if (exp < src_.size() && (src_[exp] == '+' || src_[exp] == '-')) ++exp;
      if (exp < src_.size() && std::isdigit(static_cast<unsigned char>(src_[exp]))) {
        end = exp;
        digits();
        is_float = true;
      }
    }
    std::string text = src_.substr(pos, end - pos);
    text.erase(std::remove(text.begin(), text.end(), '_'), text.end());
    Emit(is_float ? TokenKind::kFloat : TokenKind::kInteger, std::move(text), pos);
    return end;
  }

  // Python string literal escapes (jinja2 decodes them with unicode-escape);
  // an unknown escape keeps its backslash.
  size_t LexString(size_t pos) {
    const char quote = src_[pos];
    std::string value;
    size_t i = pos + 1;
    auto hex = [&](size_t count) -> char32_t {
      if (i + count > src_.size()) Fail(Where(i), "truncated \\x, \\u or \\U escape");
      char32_t v = 0;
      for (size_t k = 0; k < count; ++k) {
        const char h = src_[i + k];
        if (!std::isxdigit(static_cast<unsigned char>(h))) Fail(Where(i), "invalid hexadecimal escape");
        v = v * 16 + static_cast<char32_t>(std::isdigit(static_cast<unsigned char>(h)) ? h - '0' : (h | 0x20) - 'a' + 10);
      }
      i += count;
      return v;
    };
    while (true) {
      if (i >= src_.size()) Fail(Where(pos), "unclosed string literal");
      const char c = src_[i];
      if (c == quote) break;
      if (c != '\\' || i + 1 >= src_.size()) {
        value.push_back(c);
        ++i;
        continue;
      }
      const char e = src_[i + 1];
      i += 2;
      switch (e) {
        case 'n': value += '\n'; break;
        case 't': value += '\t'; break;
        case 'r': value += '\r'; break;
        case '\\': value += '\\'; break;
        case '\'': value += '\''; break;
        case '"': value += '"'; break;
        case 'a': value += '\a'; break;
        case 'b': value += '\b'; break;
        case 'f': value += '\f'; break;
        case 'v': value += '\v'; break;
        case '\n': break;  // a line continuation
        case 'x': AppendUtf8(hex(2), value); break;
        case 'u': AppendUtf8(hex(4), value); break;
        case 'U': {
          const char32_t v = hex(8);
          if (v > 0x10FFFF) Fail(Where(i), "\\U escape beyond U+10FFFF");
          AppendUtf8(v, value);
          break;
        }
        default:
          if (e >= '0' && e <= '7') {  // octal, up to three digits
            char32_t v = static_cast<char32_t>(e - '0');
            for (int k = 0; k < 2 && i < src_.size() && src_[i] >= '0' && src_[i] <= '7'; ++k, ++i) {
              v = v * 8 + static_cast<char32_t>(src_[i] - '0');
            }
            AppendUtf8(v, value);
          } else {
            value += '\\';
            value += e;
          }
      }
    }
    Emit(TokenKind::kString, std::move(value), pos);
    return i + 1;
  }

  std::string src_;
  std::vector<size_t> line_starts_;
  std::vector<Token> tokens_;
};

}  // namespace

std::vector<Token> Tokenize(const std::string& source) { return Lexer(source).Run(); }

}  // namespace kakeya::jinja
