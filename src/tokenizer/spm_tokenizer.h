// SentencePiece-style tokenizer (`tokenizer.ggml.model = "llama"`),
// docs/formats/tokenizers.md 4.3: llama.cpp's llm_tokenizer_spm, i.e.
// score-driven merging of adjacent symbols with byte fallback, on text whose
// spaces are escaped to U+2581.
#pragma once

#include <array>
#include <vector>

#include "tokenizer/tokenizer.h"

namespace kakeya {

class SpmTokenizer final : public Tokenizer {
 public:
  explicit SpmTokenizer(const GgufFile& gguf);

  std::vector<TokenId> Encode(std::string_view text, bool add_special,
                              bool parse_special) const override;
  std::string TokenToPiece(TokenId id, bool render_special) const override;
  std::string Decode(std::span<const TokenId> ids, bool render_special) const override;

 private:
  // Appends the tokens of `text` (already escaped) to `out`.
  void Merge(std::string_view text, std::vector<TokenId>& out) const;
  void AppendBytes(std::string_view symbol, std::vector<TokenId>& out) const;

  std::vector<float> scores_;               // tokenizer.ggml.scores
  std::array<TokenId, 256> byte_tokens_{};  // <0xXX> (or the 1-byte token), -1 if none
};

}  // namespace kakeya
