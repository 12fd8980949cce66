#include "grammar/gbnf_text.h"

#include <cstdio>

namespace kakeya {
namespace {

bool IsPlain(uint32_t cp) {
  return (cp >= 'a' && cp <= 'z') || (cp >= 'A' && cp <= 'Z') || (cp >= '0' && cp <= '9') || cp == ' ' ||
         cp == '_' || cp == ':' || cp == ',' || cp == '.' || cp == '{' || cp == '}' || cp == '(' ||
         cp == ')' || cp == '+' || cp == '*' || cp == '?' || cp == '!' || cp == '=' || cp == '@' ||
         cp == '/' || cp == '\'' || cp == '<' || cp == '>' || cp == '|' || cp == ';' || cp == '#' ||
         cp == '$' || cp == '%' || cp == '&' || cp == '~' || cp == '`';
}

// One code point in a literal or class: itself where that is unambiguous,
// else an escape (quotes, backslashes, brackets, '-', '^', controls,
// everything past ASCII).
std::string Escaped(uint32_t cp) {
  if (IsPlain(cp)) return std::string(1, char(cp));
  char buf[16];
  if (cp < 0x100) {
    std::snprintf(buf, sizeof buf, "\\x%02X", unsigned(cp));
  } else if (cp < 0x10000) {
    std::snprintf(buf, sizeof buf, "\\u%04X", unsigned(cp));
  } else {
    std::snprintf(buf, sizeof buf, "\\U%08X", unsigned(cp));
  }
  return buf;
}

}  // namespace

std::string GbnfLiteral(std::string_view text) {
  std::string out = "\"";
  for (size_t i = 0; i < text.size();) {
    const uint8_t b = uint8_t(text[i]);
    if (b >= 0x80) {  // a UTF-8 sequence stays as it is
      size_t n = b >= 0xF0 ? 4 : b >= 0xE0 ? 3 : 2;
      out.append(text.substr(i, n));
      i += n;
      continue;
    }
    out += Escaped(b);
    ++i;
  }
  return out + "\"";
}

std::string GbnfClass(const std::vector<CodePointRange>& ranges) {
  std::string out = "[";
  for (const CodePointRange& r : ranges) {
    out += Escaped(r.first);
    if (r.last != r.first) {
      out += '-';
      out += Escaped(r.last);
    }
  }
  return out + "]";
}

std::string GbnfName(std::string_view hint) {
  std::string out;
  for (char c : hint) {
    const bool keep = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
    if (keep) {
      out += c;
    } else if (!out.empty() && out.back() != '-') {
      out += '-';
    }
    if (out.size() >= 32) break;
  }
  while (!out.empty() && out.back() == '-') out.pop_back();
  return out;
}

}  // namespace kakeya
