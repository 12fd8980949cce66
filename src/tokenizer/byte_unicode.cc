#include "tokenizer/byte_unicode.h"

#include <array>

#include "tokenizer/utf8.h"

namespace kakeya {
namespace {

bool IsPrintable(int b) {
  return (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
}

struct ByteMap {
  std::array<std::string, 256> to_utf8;
  std::array<int16_t, 0x100 + 256> to_byte;  // indexed by code point; all mapped ones are < 0x200

  ByteMap() {
    to_byte.fill(-1);
    uint32_t next = 0x100;
    for (int b = 0; b < 256; ++b) {
      const uint32_t cp = IsPrintable(b) ? b : next++;
      utf8::Append(to_utf8[b], cp);
      to_byte[cp] = static_cast<int16_t>(b);
    }
  }
};

const ByteMap& Map() {
  static const ByteMap map;
  return map;
}

}  // namespace

std::string_view ByteToUnicode(uint8_t byte) { return Map().to_utf8[byte]; }

void AppendByteEncoded(std::string& out, std::string_view bytes) {
  const ByteMap& map = Map();
  for (char c : bytes) out += map.to_utf8[static_cast<uint8_t>(c)];
}

int UnicodeToByte(uint32_t code_point) {
  return code_point < Map().to_byte.size() ? Map().to_byte[code_point] : -1;
}

}  // namespace kakeya
