// The pre-tokenizers named by `tokenizer.ggml.pre` (FORMATS.md 4.5) and the
// per-type flags llama.cpp's llama_vocab::impl::load sets with them.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace kakeya {

struct BpePreType {
  std::vector<std::string> regexes;  // applied in order
  bool ignore_merges = false;        // a pre-token found whole in the vocab is used as is
  bool add_bos = false;              // default of add_bos_token
  bool clean_spaces = true;          // detokenizer's clean-up pass (FORMATS.md 4.4)
};

// `name` is the value of tokenizer.ggml.pre ("default" when the key is
// missing). Throws Error naming the key and listing the supported names.
BpePreType FindBpePreType(std::string_view name);

}  // namespace kakeya
