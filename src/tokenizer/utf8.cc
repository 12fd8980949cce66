#include "tokenizer/utf8.h"

namespace kakeya::utf8 {
namespace {

constexpr uint32_t kReplacement = 0xFFFD;

bool IsContinuation(std::string_view text, size_t pos) {
  return pos < text.size() && (static_cast<uint8_t>(text[pos]) & 0xC0) == 0x80;
}

// Decodes the sequence at `pos`, advancing it; returns kReplacement and skips
// one byte when the sequence is malformed (mirrors unicode_cpt_from_utf8 plus
// the catch in unicode_cpts_from_utf8).
uint32_t DecodeOne(std::string_view text, size_t& pos) {
  const uint8_t lead = static_cast<uint8_t>(text[pos]);
  size_t n = 0;
  uint32_t cp = 0;
  if (lead < 0x80) {
    ++pos;
    return lead;
  } else if ((lead & 0xE0) == 0xC0) {
    n = 2, cp = lead & 0x1F;
  } else if ((lead & 0xF0) == 0xE0) {
    n = 3, cp = lead & 0x0F;
  } else if ((lead & 0xF8) == 0xF0) {
    n = 4, cp = lead & 0x07;
  } else {
    ++pos;
    return kReplacement;
  }
  for (size_t k = 1; k < n; ++k) {
    if (!IsContinuation(text, pos + k)) {
      ++pos;
      return kReplacement;
    }
    cp = (cp << 6) | (static_cast<uint8_t>(text[pos + k]) & 0x3F);
  }
  pos += n;
  return cp;
}

}  // namespace

size_t SequenceLength(uint8_t lead) {
  static constexpr size_t kByHighNibble[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
  return kByHighNibble[lead >> 4];
}

void Append(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

std::vector<uint32_t> Decode(std::string_view text) {
  std::vector<uint32_t> out;
  out.reserve(text.size());
  for (size_t pos = 0; pos < text.size();) out.push_back(DecodeOne(text, pos));
  return out;
}

std::string Sanitize(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t pos = 0; pos < text.size();) {
    uint32_t cp = DecodeOne(text, pos);
    if ((cp >= 0xD800 && cp <= 0xDFFF) || cp > 0x10FFFF) cp = kReplacement;
    Append(out, cp);
  }
  return out;
}

}  // namespace kakeya::utf8
