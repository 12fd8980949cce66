// UTF-8 helpers with llama.cpp's (src/unicode.cpp) handling of malformed input,
// so that tokenization of invalid text matches the reference byte for byte.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace kakeya::utf8 {

// Length of the sequence announced by `lead` (1 for continuation or invalid
// bytes), like llama.cpp's unicode_len_utf8; callers clamp it to what is left.
size_t SequenceLength(uint8_t lead);

void Append(std::string& out, uint32_t code_point);

// Code points of `text`; every byte that does not start a well-formed sequence
// becomes U+FFFD (llama.cpp's unicode_cpts_from_utf8). Overlong forms are
// decoded, not rejected, as llama.cpp does.
std::vector<uint32_t> Decode(std::string_view text);

// `text` re-encoded from Decode(text), additionally replacing surrogates and
// values above U+10FFFF by U+FFFD, so the result is valid UTF-8 for PCRE2.
std::string Sanitize(std::string_view text);

}  // namespace kakeya::utf8
