// The pre-tokenizers named by `tokenizer.ggml.pre` (docs/formats/tokenizers.md 4.5) and the
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
  bool clean_spaces = true;          // detokenizer's clean-up pass (docs/formats/tokenizers.md 4.4)
  // Gemma 4 (llama.cpp's LLAMA_VOCAB_PRE_TYPE_GEMMA4): merges run on raw UTF-8
  // with spaces escaped to "▁" instead of on GPT-2's byte map, a byte without
  // a token falls back to "<0xXX>", and a pre-token made only of newlines that
  // is a token is used whole.
  bool sentencepiece_text = false;
  bool force_add_bos = false;  // add_bos_token is overridden to true
};

// `name` is the value of tokenizer.ggml.pre ("default" when the key is
// missing). Throws Error naming the key and listing the supported names.
BpePreType FindBpePreType(std::string_view name);

}  // namespace kakeya
