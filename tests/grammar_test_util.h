// A vocabulary of one token per byte, for driving grammar matchers byte by
// byte in tests and the fuzzer: token b (0..255) is the byte b, token 256 ends
// generation, token 257 is a control token with no text.
#pragma once

#include <algorithm>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "grammar/grammar.h"
#include "tokenizer/tokenizer.h"

namespace kakeya::testing {

inline constexpr TokenId kByteEos = 256;
inline constexpr TokenId kByteControl = 257;

class PieceTokenizer : public Tokenizer {
 public:
  // pieces[id] is token id's text; the ids in `end_of_generation` end generation.
  PieceTokenizer(std::vector<std::string> pieces, std::vector<TokenId> end_of_generation) {
    texts_ = std::move(pieces);
    types_.assign(texts_.size(), kTokenNormal);
    end_of_generation_ = std::move(end_of_generation);
    std::sort(end_of_generation_.begin(), end_of_generation_.end());
  }
  std::vector<TokenId> Encode(std::string_view, bool, bool) const override { return {}; }
  std::string TokenToPiece(TokenId id, bool) const override {
    return IsEndOfGeneration(id) ? "" : texts_[size_t(id)];
  }
  std::string Decode(std::span<const TokenId>, bool) const override { return ""; }
};

inline std::shared_ptr<const TokenTrie> ByteTrie() {
  static const std::shared_ptr<const TokenTrie> trie = [] {
    std::vector<std::string> pieces;
    for (int b = 0; b < 256; ++b) pieces.emplace_back(1, char(b));
    pieces.emplace_back("</s>");  // kByteEos
    pieces.emplace_back("");      // kByteControl
    return std::make_shared<const TokenTrie>(PieceTokenizer(std::move(pieces), {kByteEos}));
  }();
  return trie;
}

// Feeds `bytes` one byte token at a time; false at the first one forbidden.
inline bool FeedBytes(GrammarMatcher& matcher, std::string_view bytes) {
  for (char c : bytes) {
    const TokenId id = uint8_t(c);
    if (!matcher.Allows(id)) return false;
    matcher.Accept(id);
  }
  return true;
}

// Whether `text` is a whole sentence of the grammar.
inline bool IsSentence(const std::shared_ptr<const Grammar>& grammar, std::string_view text) {
  GrammarMatcher matcher(grammar, ByteTrie());
  return FeedBytes(matcher, text) && matcher.CanEnd();
}

}  // namespace kakeya::testing
