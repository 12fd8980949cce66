// BPE tokenizers (docs/formats/tokenizers.md 4.4): llama.cpp's llm_tokenizer_bpe, used for
// `tokenizer.ggml.model = "gpt2"` and `"gemma4"`. Text is split by the regexes
// of the pre-tokenizer and adjacent symbols are merged lowest merge rank
// first. gpt2 vocabularies merge GPT-2's printable code points for the bytes;
// Gemma 4 merges raw UTF-8 with spaces escaped to "▁" (its BpePreType flag).
// Gemma 4 is a flag here rather than its own class because llama.cpp runs
// both through the same merge loop and differs only in those text conventions.
#pragma once

#include <array>
#include <functional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "tokenizer/bpe_pre_types.h"
#include "tokenizer/pre_tokenizer.h"
#include "tokenizer/tokenizer.h"

namespace kakeya {

class BpeTokenizer final : public Tokenizer {
 public:
  // `model` is tokenizer.ggml.model: "gpt2" or "gemma4".
  BpeTokenizer(const GgufFile& gguf, std::string_view model);

  std::vector<TokenId> Encode(std::string_view text, bool add_special,
                              bool parse_special) const override;
  std::string TokenToPiece(TokenId id, bool render_special) const override;
  std::string Decode(std::span<const TokenId> ids, bool render_special) const override;
  // Byte-level vocabularies only: Gemma 4's ids are not in merge order.
  bool frequent_tokens_first() const override { return !sentencepiece_text_; }

 private:
  using Pair = std::pair<std::string_view, std::string_view>;
  struct PairHash {
    size_t operator()(const Pair& p) const {
      const std::hash<std::string_view> h;
      return h(p.first) * 1000003u ^ h(p.second);
    }
  };

  BpeTokenizer(const GgufFile& gguf, const BpePreType& pre, TokenId default_bos_eos);
  void LoadMerges(const GgufFile& gguf);
  // Appends the tokens of one pre-token, already in the vocabulary's text form.
  void EncodeWord(std::string_view word, std::vector<TokenId>& out) const;

  PreTokenizer pre_;
  bool ignore_merges_ = false;
  bool clean_spaces_ = true;
  bool sentencepiece_text_ = false;
  std::vector<std::string> merges_;                // tokenizer.ggml.merges
  std::unordered_map<Pair, int, PairHash> ranks_;  // views into merges_ -> index
  // The token a byte falls back to when a merged symbol is not in the
  // vocabulary ("<0xXX>" or the 1-byte token), -1 if none.
  std::array<TokenId, 256> byte_fallback_{};
};

}  // namespace kakeya
