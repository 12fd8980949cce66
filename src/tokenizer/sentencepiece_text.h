// How SentencePiece-style vocabularies write text, shared by the SPM tokenizer
// and Gemma 4's BPE (docs/formats/tokenizers.md 4.3, 4.4): a space is the piece U+2581 "▁", and
// a raw byte that has no piece of its own is the token "<0xXX>".
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace kakeya {

// Every " " replaced by "▁" (llama.cpp's llama_escape_whitespace).
std::string EscapeSpaces(std::string_view text);
// Every "▁" replaced by " " (llama.cpp's llama_unescape_whitespace).
std::string UnescapeSpaces(std::string_view text);

// "<0xXX>" with uppercase hex, the form llama.cpp looks up for byte fallback.
std::string ByteTokenText(uint8_t byte);
// The byte of a "<0xXX>" token (either hex case), or -1 if the text has another form.
int ParseByteToken(std::string_view text);

}  // namespace kakeya
