// Constrained decoding: a GBNF grammar (llama.cpp's grammar format) that
// masks the sampler, so that the output is a sentence of the grammar. JSON
// mode and JSON schemas (json_schema.h) compile to one. The constraint is a
// function of the committed tokens alone, so the speculative verifier applies
// it row by row and a draft token the grammar forbids is rejected like any
// other mismatch: constrained output stays byte-identical to plain decoding
// with the same constraint (ADR 0018).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/tokenizer.h"

namespace kakeya {

// A parsed grammar: immutable, shared by every request that uses it.
class Grammar;

// Parses GBNF text whose start symbol is `root`. `origin` names where the
// text came from ("--grammar-file g.gbnf", "response_format") and starts
// every error message. Throws kakeya::Error naming line:column and the
// problem: a syntax error, an undefined rule, no root, left recursion, or a
// grammar past the size and nesting limits.
std::shared_ptr<const Grammar> ParseGbnf(std::string_view text, std::string_view origin);

// The bytes each token stands for (Tokenizer::TokenToPiece without special
// rendering) in a trie, built once per model and shared by its matchers.
// Control tokens stand for nothing: the grammar never allows them, except
// that end-of-generation tokens are allowed exactly where the grammar may end.
class TokenTrie {
 public:
  explicit TokenTrie(const Tokenizer& tokenizer);
  ~TokenTrie();
  int32_t n_vocab() const;
  struct Impl;
  const Impl& impl() const { return *impl_; }

 private:
  std::unique_ptr<Impl> impl_;
};

// Where generation stands in the grammar: a value (copy it to keep a state,
// as the verifier does per row), advanced one token at a time.
class GrammarMatcher {
 public:
  GrammarMatcher(std::shared_ptr<const Grammar> grammar, std::shared_ptr<const TokenTrie> tokens);
  GrammarMatcher(const GrammarMatcher&);
  GrammarMatcher& operator=(const GrammarMatcher&);
  ~GrammarMatcher();

  // Whether token `id` may come next (an end-of-generation token: whether
  // the grammar may end here).
  bool Allows(TokenId id) const;
  // allowed[t] = Allows(t) for the whole vocabulary (allowed.size() == n_vocab),
  // walking the trie once rather than testing each token.
  void AllowedTokens(std::span<uint8_t> allowed) const;
  // Moves past token `id`; throws kakeya::Error if the grammar forbids it.
  void Accept(TokenId id);
  // The grammar may end here (an end-of-generation token is allowed).
  bool CanEnd() const;
  // Nothing but the end may follow: generation can stop without sampling.
  bool MustEnd() const;
  // The text every sentence must continue with from here, at most max_bytes
  // of it: the code points the grammar allows one at a time, until it
  // allows a choice or may end (a schema's key names, the punctuation
  // between them). Empty in the middle of a UTF-8 sequence. The speculative
  // loop proposes it as drafts (ADR 0018).
  std::string ForcedText(size_t max_bytes) const;
  // The same grammar at the same parse state: the same tokens are allowed
  // next (what lets a sampler reuse the last mask, as inside a JSON string,
  // where every token leaves the state as it was).
  bool operator==(const GrammarMatcher& other) const;

  struct State;

 private:
  std::shared_ptr<const Grammar> grammar_;
  std::shared_ptr<const TokenTrie> tokens_;
  std::unique_ptr<State> state_;
};

}  // namespace kakeya
