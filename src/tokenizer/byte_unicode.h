// GPT-2's reversible byte <-> code point map used by byte-level BPE vocabularies
// (docs/formats/tokenizers.md 4.4 step 2): printable bytes map to themselves, the other 68 to
// U+0100.. in byte order, so every byte string becomes printable text.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace kakeya {

// The UTF-8 encoding of the code point that stands for `byte`.
std::string_view ByteToUnicode(uint8_t byte);
// Appends the mapped form of every byte of `bytes`.
void AppendByteEncoded(std::string& out, std::string_view bytes);
// The byte that `code_point` stands for, or -1 if it stands for none.
int UnicodeToByte(uint32_t code_point);

}  // namespace kakeya
