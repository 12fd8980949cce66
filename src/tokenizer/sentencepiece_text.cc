#include "tokenizer/sentencepiece_text.h"

#include <cctype>
#include <cstdio>

namespace kakeya {
namespace {

constexpr std::string_view kEscapedSpace = "\xE2\x96\x81";  // U+2581 "▁"

}  // namespace

std::string EscapeSpaces(std::string_view text) {
  std::string out;
  out.reserve(text.size() + text.size() / 4);
  for (char c : text) {
    if (c == ' ') {
      out += kEscapedSpace;
    } else {
      out += c;
    }
  }
  return out;
}

std::string UnescapeSpaces(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t pos = 0; pos < text.size();) {
    if (text.substr(pos, kEscapedSpace.size()) == kEscapedSpace) {
      out += ' ';
      pos += kEscapedSpace.size();
    } else {
      out += text[pos++];
    }
  }
  return out;
}

std::string ByteTokenText(uint8_t byte) {
  char hex[8];
  std::snprintf(hex, sizeof(hex), "<0x%02X>", byte);
  return hex;
}

int ParseByteToken(std::string_view text) {
  if (text.size() != 6 || text.substr(0, 3) != "<0x" || text[5] != '>') return -1;
  int value = 0;
  for (char c : text.substr(3, 2)) {
    const int digit = std::isdigit(static_cast<unsigned char>(c)) ? c - '0'
                      : (c >= 'A' && c <= 'F')                    ? c - 'A' + 10
                      : (c >= 'a' && c <= 'f')                    ? c - 'a' + 10
                                                                  : -1;
    if (digit < 0) return -1;
    value = value * 16 + digit;
  }
  return value;
}

}  // namespace kakeya
