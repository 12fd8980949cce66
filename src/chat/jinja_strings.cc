#include "chat/jinja_strings.h"

#include <algorithm>

namespace kakeya::jinja {

std::u32string DecodeUtf8(std::string_view s) {
  std::u32string out;
  out.reserve(s.size());
  size_t i = 0;
  while (i < s.size()) {
    const auto b0 = static_cast<unsigned char>(s[i]);
    int length = b0 < 0x80 ? 1 : (b0 >> 5) == 0x6 ? 2 : (b0 >> 4) == 0xE ? 3 : (b0 >> 3) == 0x1E ? 4 : 0;
    char32_t c = length == 1 ? b0 : length == 2 ? (b0 & 0x1F) : length == 3 ? (b0 & 0x0F) : (b0 & 0x07);
    bool valid = length > 0 && i + length <= s.size();
    for (int k = 1; valid && k < length; ++k) {
      const auto b = static_cast<unsigned char>(s[i + k]);
      valid = (b & 0xC0) == 0x80;
      c = (c << 6) | (b & 0x3F);
    }
    // Overlong forms and surrogates are invalid too.
    static constexpr char32_t kMin[] = {0, 0, 0x80, 0x800, 0x10000};
    valid = valid && c >= kMin[length] && c <= 0x10FFFF && !(c >= 0xD800 && c <= 0xDFFF);
    if (valid) {
      out.push_back(c);
      i += length;
    } else {
      out.push_back(0xDC00 + b0);
      i += 1;
    }
  }
  return out;
}

void AppendUtf8(char32_t c, std::string& out) {
  if (c >= 0xDC80 && c <= 0xDCFF) {
    out.push_back(static_cast<char>(c - 0xDC00));  // an escaped invalid byte
  } else if (c < 0x80) {
    out.push_back(static_cast<char>(c));
  } else if (c < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (c >> 6)));
    out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
  } else if (c < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (c >> 12)));
    out.push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (c >> 18)));
    out.push_back(static_cast<char>(0x80 | ((c >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
  }
}

std::string EncodeUtf8(std::u32string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char32_t c : s) AppendUtf8(c, out);
  return out;
}

size_t CodePointCount(std::string_view s) {
  const bool ascii = std::all_of(s.begin(), s.end(), [](char c) { return static_cast<unsigned char>(c) < 0x80; });
  return ascii ? s.size() : DecodeUtf8(s).size();
}

bool IsPythonSpace(char32_t c) {
  // str.isspace(): Unicode White_Space plus the ASCII separators 0x1C-0x1F.
  return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20) || c == 0x85 || c == 0xA0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

namespace {

template <typename Predicate>
std::string StripIf(std::string_view s, bool left, bool right, Predicate strip) {
  const std::u32string text = DecodeUtf8(s);
  size_t begin = 0, end = text.size();
  while (left && begin < end && strip(text[begin])) ++begin;
  while (right && end > begin && strip(text[end - 1])) --end;
  return EncodeUtf8(std::u32string_view(text).substr(begin, end - begin));
}

}  // namespace

std::string PythonStrip(std::string_view s, bool left, bool right) {
  return StripIf(s, left, right, IsPythonSpace);
}

std::string PythonStripChars(std::string_view s, std::string_view chars, bool left, bool right) {
  const std::u32string set = DecodeUtf8(chars);
  return StripIf(s, left, right, [&](char32_t c) { return set.find(c) != std::u32string::npos; });
}

std::vector<std::string> PythonSplit(std::string_view s, const std::string* separator, long max_split) {
  std::vector<std::string> parts;
  if (separator != nullptr) {
    size_t start = 0;
    while (max_split < 0 || static_cast<long>(parts.size()) < max_split) {
      const size_t at = s.find(*separator, start);
      if (at == std::string_view::npos) break;
      parts.emplace_back(s.substr(start, at - start));
      start = at + separator->size();
    }
    parts.emplace_back(s.substr(start));
    return parts;
  }
  const std::u32string text = DecodeUtf8(s);
  size_t i = 0;
  while (true) {
    while (i < text.size() && IsPythonSpace(text[i])) ++i;
    if (i == text.size()) break;
    if (max_split >= 0 && static_cast<long>(parts.size()) == max_split) {
      // The rest, with trailing whitespace removed, is the last part.
      size_t end = text.size();
      while (end > i && IsPythonSpace(text[end - 1])) --end;
      parts.push_back(EncodeUtf8(std::u32string_view(text).substr(i, end - i)));
      break;
    }
    const size_t start = i;
    while (i < text.size() && !IsPythonSpace(text[i])) ++i;
    parts.push_back(EncodeUtf8(std::u32string_view(text).substr(start, i - start)));
  }
  return parts;
}

std::string PythonReplace(std::string_view s, std::string_view old, std::string_view replacement, long count) {
  std::string out;
  if (old.empty()) {
    // Python inserts the replacement before every code point and at the end.
    const std::u32string text = DecodeUtf8(s);
    long done = 0;
    for (char32_t c : text) {
      if (count < 0 || done < count) out.append(replacement), ++done;
      AppendUtf8(c, out);
    }
    if (count < 0 || done < count) out.append(replacement);
    return out;
  }
  size_t start = 0;
  long done = 0;
  while (count < 0 || done < count) {
    const size_t at = s.find(old, start);
    if (at == std::string_view::npos) break;
    out.append(s.substr(start, at - start)).append(replacement);
    start = at + old.size();
    ++done;
  }
  out.append(s.substr(start));
  return out;
}

std::string AsciiUpper(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = (c >= 'a' && c <= 'z') ? static_cast<char>(c - 32) : c;
  return out;
}

std::string AsciiLower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = (c >= 'A' && c <= 'Z') ? static_cast<char>(c + 32) : c;
  return out;
}

namespace {

bool IsAsciiLetter(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }

}  // namespace

std::string PythonTitle(std::string_view s) {
  // A letter after a non-letter starts a word (Python: "they're" -> "They'Re").
  std::string out(s);
  bool previous_is_letter = false;
  for (char& c : out) {
    const bool letter = IsAsciiLetter(c) || static_cast<unsigned char>(c) >= 0x80;
    if (IsAsciiLetter(c)) c = previous_is_letter ? AsciiLower(std::string(1, c))[0] : AsciiUpper(std::string(1, c))[0];
    previous_is_letter = letter;
  }
  return out;
}

std::string PythonCapitalize(std::string_view s) {
  std::string out = AsciiLower(s);
  if (!out.empty()) out[0] = AsciiUpper(out.substr(0, 1))[0];
  return out;
}

}  // namespace kakeya::jinja
