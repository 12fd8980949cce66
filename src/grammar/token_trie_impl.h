// TokenTrie's contents (grammar.h): the pieces of the text tokens in a byte
// trie whose nodes list their children contiguously, so the matcher's walk is
// a loop over an array.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "grammar/grammar.h"

namespace kakeya {

struct TokenTrie::Impl {
  enum Kind : uint8_t { kText, kEndOfGeneration, kNever };
  struct Node {
    uint32_t child_begin = 0, child_end = 0;  // indices in nodes
    uint32_t token_begin = 0, token_end = 0;  // indices in node_tokens: the tokens spelled by this path
    uint8_t byte = 0;                         // the byte leading here from the parent
  };

  std::vector<Node> nodes;  // nodes[0]: the root, the empty prefix
  std::vector<TokenId> node_tokens;
  std::vector<std::string> pieces;  // [n_vocab]
  std::vector<Kind> kinds;          // [n_vocab]
  std::vector<TokenId> end_of_generation;
};

}  // namespace kakeya
