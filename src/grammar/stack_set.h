// The matcher's pushdown state, as in llama.cpp's llama_grammar_advance_stack:
// each stack holds grammar positions (grammar_internal.h), the top at the back
// a character class that the next code point must match, the ones below where
// to resume when a rule finishes. An empty stack has finished the root rule. A
// set holds every parse still alive; it is kept sorted and free of duplicates,
// so equal sets compare equal and the matcher can memoize transitions.
#pragma once

#include <cstdint>
#include <vector>

#include "grammar/grammar_internal.h"

namespace kakeya {

using GrammarStack = std::vector<uint32_t>;

struct StackSet {
  std::vector<GrammarStack> stacks;

  bool operator==(const StackSet&) const = default;
  bool empty() const { return stacks.empty(); }
  // Some parse has finished the root rule.
  bool CanEnd() const;
  // Every parse has finished: no character can follow.
  bool Finished() const;
  // Some parse accepts some code point in [first, last].
  bool AcceptsSome(const Grammar& grammar, uint32_t first, uint32_t last) const;
};

struct StackSetHash {
  size_t operator()(const StackSet& set) const;
};

// The parses at the start of the root rule.
StackSet InitialStacks(const Grammar& grammar);
// The parses after `code_point`; empty if none accepts it.
StackSet AdvanceStacks(const Grammar& grammar, const StackSet& set, uint32_t code_point);

}  // namespace kakeya
