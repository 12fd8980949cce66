// Byte-level BPE tokenizer (`tokenizer.ggml.model = "gpt2"`), FORMATS.md 4.4:
// llama.cpp's llm_tokenizer_bpe. Text is split by the regexes of
// `tokenizer.ggml.pre`, each piece's bytes are mapped to GPT-2's printable
// code points, and adjacent symbols are merged lowest merge rank first.
#pragma once

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
  explicit BpeTokenizer(const GgufFile& gguf);

  std::vector<TokenId> Encode(std::string_view text, bool add_special,
                              bool parse_special) const override;
  std::string TokenToPiece(TokenId id, bool render_special) const override;
  std::string Decode(std::span<const TokenId> ids, bool render_special) const override;

 private:
  using Pair = std::pair<std::string_view, std::string_view>;
  struct PairHash {
    size_t operator()(const Pair& p) const {
      const std::hash<std::string_view> h;
      return h(p.first) * 1000003u ^ h(p.second);
    }
  };

  BpeTokenizer(const GgufFile& gguf, const BpePreType& pre);
  void LoadMerges(const GgufFile& gguf);
  // Appends the tokens of one byte-mapped pre-token.
  void EncodeWord(std::string_view word, std::vector<TokenId>& out) const;

  PreTokenizer pre_;
  bool ignore_merges_ = false;
  bool clean_spaces_ = true;
  std::vector<std::string> merges_;                // tokenizer.ggml.merges
  std::unordered_map<Pair, int, PairHash> ranks_;  // views into merges_ -> index
};

}  // namespace kakeya
