#include "server/text_stream.h"

#include <cstdint>

namespace kakeya {
namespace {

constexpr std::string_view kReplacement = "\xEF\xBF\xBD";

// The well-formed sequences (Unicode 15, table 3-7): length by lead byte, and
// the range of the second byte, which is narrower than 80..BF after E0, ED,
// F0 and F4 (no overlong forms, surrogates or code points above U+10FFFF).
struct Lead {
  int length;  // 0: the byte cannot start a sequence
  uint8_t second_lo;
  uint8_t second_hi;
};

Lead LeadOf(uint8_t b) {
  if (b < 0x80) return {1, 0, 0};
  if (b >= 0xC2 && b <= 0xDF) return {2, 0x80, 0xBF};
  if (b == 0xE0) return {3, 0xA0, 0xBF};
  if (b == 0xED) return {3, 0x80, 0x9F};
  if (b >= 0xE1 && b <= 0xEF) return {3, 0x80, 0xBF};
  if (b == 0xF0) return {4, 0x90, 0xBF};
  if (b >= 0xF1 && b <= 0xF3) return {4, 0x80, 0xBF};
  if (b == 0xF4) return {4, 0x80, 0x8F};
  return {0, 0, 0};
}

}  // namespace

std::string Utf8Stream::Push(std::string_view bytes) {
  held_.append(bytes);
  std::string out;
  out.reserve(held_.size());
  const std::string_view s = held_;
  size_t i = 0;
  while (i < s.size()) {
    const Lead lead = LeadOf(static_cast<uint8_t>(s[i]));
    if (lead.length == 0) {
      out += kReplacement;
      ++i;
      continue;
    }
    // Bytes of the sequence that are present and valid so far.
    int valid = 1;
    for (; valid < lead.length && i + valid < s.size(); ++valid) {
      const auto b = static_cast<uint8_t>(s[i + valid]);
      const uint8_t lo = valid == 1 ? lead.second_lo : 0x80;
      const uint8_t hi = valid == 1 ? lead.second_hi : 0xBF;
      if (b < lo || b > hi) break;
    }
    if (valid == lead.length) {
      out.append(s.substr(i, valid));
      i += valid;
    } else if (i + valid == s.size()) {
      break;  // unfinished: hold it for the next token's bytes
    } else {
      // A maximal subpart: one replacement, and the byte that broke it is
      // read again as a possible lead.
      out += kReplacement;
      i += valid;
    }
  }
  held_.erase(0, i);
  return out;
}

std::string Utf8Stream::Finish() {
  const bool incomplete = !held_.empty();
  held_.clear();
  return incomplete ? std::string(kReplacement) : std::string();
}

std::string Utf8Stream::Sanitize(std::string_view bytes) {
  Utf8Stream stream;
  std::string out = stream.Push(bytes);
  return out + stream.Finish();
}

}  // namespace kakeya
