// Python str semantics over UTF-8 bytes: templates index, slice, measure and
// strip strings by code point, and Python's strip() removes Unicode
// whitespace, not just ASCII.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace kakeya::jinja {

// Code points of `s`. A byte that is not valid UTF-8 becomes U+DC80 + byte
// (Python's "surrogateescape"), so EncodeUtf8 gives the same bytes back.
std::u32string DecodeUtf8(std::string_view s);
std::string EncodeUtf8(std::u32string_view s);
void AppendUtf8(char32_t c, std::string& out);
size_t CodePointCount(std::string_view s);

bool IsPythonSpace(char32_t c);
std::string PythonStrip(std::string_view s, bool left, bool right);
// strip(chars): removes any of the code points in `chars`.
std::string PythonStripChars(std::string_view s, std::string_view chars, bool left, bool right);
// str.split(): on runs of whitespace, or on `separator`; at most max_split splits (< 0: no limit).
std::vector<std::string> PythonSplit(std::string_view s, const std::string* separator, long max_split);
std::string PythonReplace(std::string_view s, std::string_view old, std::string_view replacement, long count);

// Case mapping of ASCII letters only; other scripts pass through unchanged.
std::string AsciiUpper(std::string_view s);
std::string AsciiLower(std::string_view s);
std::string PythonTitle(std::string_view s);       // "hello world" -> "Hello World"
std::string PythonCapitalize(std::string_view s);  // "hELLO" -> "Hello"

}  // namespace kakeya::jinja
