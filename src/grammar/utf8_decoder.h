// Strict UTF-8 decoding one byte at a time, for the grammar's parser and its
// matcher: a token of a byte-level vocabulary may end inside a sequence, so
// the matcher carries the partial code point to the next token. Overlong
// forms, surrogates and values past U+10FFFF are malformed (RFC 3629), so a
// constrained output is always valid UTF-8.
#pragma once

#include <algorithm>
#include <cstdint>

namespace kakeya {

struct PartialCodePoint {
  uint32_t value = 0;     // the bits read so far
  uint8_t remaining = 0;  // continuation bytes still to come; 0: none pending
  uint8_t length = 0;     // bytes of the whole sequence

  bool pending() const { return remaining != 0; }
  // The code points that the pending sequence can still become.
  uint32_t first() const {
    constexpr uint32_t kMinForLength[5] = {0, 0, 0x80, 0x800, 0x10000};
    return std::max(value << (6 * remaining), kMinForLength[length]);
  }
  uint32_t last() const {
    return std::min((value << (6 * remaining)) | ((1u << (6 * remaining)) - 1), 0x10FFFFu);
  }
  bool operator==(const PartialCodePoint&) const = default;
};

enum class Utf8Step { kMalformed, kPending, kComplete };

// Feeds `byte` to `partial`; on kComplete, `code_point` is set and `partial`
// is empty again.
inline Utf8Step DecodeUtf8Byte(PartialCodePoint& partial, uint8_t byte, uint32_t& code_point) {
  if (!partial.pending()) {
    if (byte < 0x80) {
      code_point = byte;
      return Utf8Step::kComplete;
    }
    if (byte >= 0xC0 && byte < 0xE0) {
      partial = {uint32_t(byte & 0x1F), 1, 2};
    } else if (byte >= 0xE0 && byte < 0xF0) {
      partial = {uint32_t(byte & 0x0F), 2, 3};
    } else if (byte >= 0xF0 && byte < 0xF8) {
      partial = {uint32_t(byte & 0x07), 3, 4};
    } else {
      return Utf8Step::kMalformed;  // a continuation byte or 0xF8..0xFF
    }
  } else {
    if ((byte & 0xC0) != 0x80) return Utf8Step::kMalformed;
    partial.value = (partial.value << 6) | (byte & 0x3F);
    --partial.remaining;
  }
  if (partial.first() > partial.last()) return Utf8Step::kMalformed;  // overlong or past U+10FFFF
  if (partial.pending()) return Utf8Step::kPending;
  code_point = partial.value;
  partial = {};
  if (code_point >= 0xD800 && code_point <= 0xDFFF) return Utf8Step::kMalformed;
  return Utf8Step::kComplete;
}

}  // namespace kakeya
