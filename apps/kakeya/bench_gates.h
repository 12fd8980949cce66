// The two checks every `kakeya bench spec` run applies to every output:
//  * identity: speculative decoding is lossless, so each configuration's
//    tokens must equal plain decoding's for the same prompt and settings;
//  * degeneration: a looping output (engine/degeneration.h) makes a speed
//    figure meaningless, however identical it is.
#pragma once

#include <optional>
#include <span>
#include <string>

#include "tokenizer/tokenizer.h"

namespace kakeya::cli {

// The first position where two token sequences differ; a sequence that ends
// early differs at its end (its token there is reported as -1).
struct TokenMismatch {
  size_t position = 0;
  TokenId plain = -1;
  TokenId other = -1;
};
std::optional<TokenMismatch> FirstMismatch(std::span<const TokenId> plain, std::span<const TokenId> other);

// Names what ran: "method ngram, block 4, prompt ast.py", or
// "plain decoding, prompt ast.py" for method none.
std::string RunName(const std::string& method, int block, const std::string& prompt);

// "" when the tokens equal plain decoding's, else a message naming the run,
// the first differing position and both token ids.
std::string IdentityFailure(const std::string& run, std::span<const TokenId> plain, std::span<const TokenId> other);

// "" when the text does not degenerate, else a message naming the run and the pattern.
std::string DegenerationFailure(const std::string& run, const std::string& text);

}  // namespace kakeya::cli
