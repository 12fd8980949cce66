// Regex pre-tokenization for byte-level BPE (docs/formats/tokenizers.md 4.4
// step 1), on PCRE2
// with Unicode properties and llama.cpp's whitespace set. The regexes are
// compiled (and JIT-compiled when available) once; Split is const and
// thread-safe.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace kakeya {

class PreTokenizer {
 public:
  // Compiles `patterns`; throws Error naming `key` if one does not compile.
  PreTokenizer(const std::vector<std::string>& patterns, std::string_view key);
  ~PreTokenizer();
  PreTokenizer(PreTokenizer&&) noexcept;

  // Applies the regexes in order, like llama.cpp's unicode_regex_split: each
  // one cuts every current piece into its matches and the unmatched gaps
  // between them (both kept, in order). `text` must be valid UTF-8.
  std::vector<std::string_view> Split(std::string_view text) const;

 private:
  class Regex;
  std::vector<std::unique_ptr<Regex>> regexes_;
};

}  // namespace kakeya
