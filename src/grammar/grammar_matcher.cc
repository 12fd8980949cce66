// GrammarMatcher (grammar.h): the parses alive after the committed tokens
// (stack_set.h) and the UTF-8 sequence a token left unfinished. A token is
// allowed when each of its bytes keeps some parse alive; a byte that leaves a
// code point pending is allowed when some parse accepts a code point the
// sequence can still complete to, as llama.cpp's match_partial_char does.
#include <array>
#include <unordered_map>

#include "base/error.h"
#include "grammar/grammar.h"
#include "grammar/grammar_internal.h"
#include "grammar/stack_set.h"
#include "grammar/token_trie_impl.h"
#include "grammar/utf8_decoder.h"
#include "tokenizer/utf8.h"

namespace kakeya {

struct GrammarMatcher::State {
  StackSet stacks;
  PartialCodePoint partial;
};

namespace {

using Trie = TokenTrie::Impl;

// `state` after `byte`; false if no parse survives it.
bool StepByte(const Grammar& grammar, GrammarMatcher::State& state, uint8_t byte) {
  uint32_t cp = 0;
  switch (DecodeUtf8Byte(state.partial, byte, cp)) {
    case Utf8Step::kMalformed: return false;
    case Utf8Step::kPending: return state.stacks.AcceptsSome(grammar, state.partial.first(), state.partial.last());
    case Utf8Step::kComplete: state.stacks = AdvanceStacks(grammar, state.stacks, cp); return !state.stacks.empty();
  }
  return false;
}

bool StepPiece(const Grammar& grammar, GrammarMatcher::State& state, std::string_view piece) {
  for (char c : piece) {
    if (!StepByte(grammar, state, uint8_t(c))) return false;
  }
  return true;
}

// One pass over the trie from the matcher's state. Stack sets met on the way
// are interned and their transitions memoized: inside a JSON string nearly
// every token is allowed and the walk visits most of the trie, but only a
// handful of distinct sets, so most nodes cost a table lookup.
class TrieWalk {
 public:
  TrieWalk(const Grammar& grammar, const Trie& trie, std::span<uint8_t> allowed)
      : grammar_(grammar), trie_(trie), allowed_(allowed) {}

  void Run(const StackSet& stacks, PartialCodePoint partial) {
    const int32_t id = Intern(StackSet(stacks));
    if (id != kDead) Visit(0, id, partial);
  }

 private:
  static constexpr int32_t kUnknown = -2;
  static constexpr int32_t kDead = -1;

  int32_t Intern(StackSet&& set) {
    if (set.empty()) return kDead;
    const auto [it, inserted] = ids_.emplace(std::move(set), int32_t(sets_.size()));
    if (inserted) {
      sets_.push_back(&it->first);
      ascii_.emplace_back();
      ascii_.back().fill(kUnknown);
      by_mask_.emplace_back();
    }
    return it->second;
  }

  int32_t Advance(int32_t id, uint32_t cp) { return Intern(AdvanceStacks(grammar_, *sets_[size_t(id)], cp)); }

  int32_t Next(int32_t id, uint32_t cp) {
    if (cp < 128) {
      if (ascii_[size_t(id)][cp] == kUnknown) {
        const int32_t next = Advance(id, cp);
        ascii_[size_t(id)][cp] = next;
      }
      return ascii_[size_t(id)][cp];
    }
    // Past ASCII the next set depends only on which stacks' top classes hold
    // the code point: a vocabulary's tens of thousands of CJK code points
    // all lead from a JSON string to the same set.
    const StackSet& set = *sets_[size_t(id)];
    if (set.stacks.size() <= 64) {
      uint64_t mask = 0;
      for (size_t i = 0; i < set.stacks.size(); ++i) {
        const GrammarStack& s = set.stacks[i];
        if (!s.empty() && grammar_.classes[grammar_.elements[s.back()].value].Contains(cp)) mask |= 1ull << i;
      }
      if (mask == 0) return kDead;
      for (const auto& [m, next] : by_mask_[size_t(id)]) {
        if (m == mask) return next;
      }
      const int32_t next = Advance(id, cp);
      by_mask_[size_t(id)].push_back({mask, next});
      return next;
    }
    const uint64_t key = (uint64_t(uint32_t(id)) << 32) | cp;
    if (const auto it = other_.find(key); it != other_.end()) return it->second;
    const int32_t next = Advance(id, cp);
    other_[key] = next;
    return next;
  }

  void Visit(uint32_t node, int32_t id, PartialCodePoint partial) {
    const Trie::Node& n = trie_.nodes[node];
    for (uint32_t c = n.child_begin; c < n.child_end; ++c) {
      const Trie::Node& child = trie_.nodes[c];
      PartialCodePoint p = partial;
      uint32_t cp = 0;
      int32_t next = id;
      switch (DecodeUtf8Byte(p, child.byte, cp)) {
        case Utf8Step::kMalformed: continue;
        case Utf8Step::kPending:
          if (!sets_[size_t(id)]->AcceptsSome(grammar_, p.first(), p.last())) continue;
          break;
        case Utf8Step::kComplete:
          next = Next(id, cp);
          if (next == kDead) continue;
          break;
      }
      for (uint32_t t = child.token_begin; t < child.token_end; ++t) allowed_[size_t(trie_.node_tokens[t])] = 1;
      Visit(c, next, p);
    }
  }

  const Grammar& grammar_;
  const Trie& trie_;
  std::span<uint8_t> allowed_;
  std::unordered_map<StackSet, int32_t, StackSetHash> ids_;
  std::vector<const StackSet*> sets_;  // by id; node-based map keys do not move
  // Transitions by id: a table per state for ASCII; past it, by the mask of
  // stacks that accept the code point, or for sets of over 64 stacks by code point.
  std::vector<std::array<int32_t, 128>> ascii_;
  std::vector<std::vector<std::pair<uint64_t, int32_t>>> by_mask_;
  std::unordered_map<uint64_t, int32_t> other_;  // (id << 32 | code point) -> next id
};

}  // namespace

GrammarMatcher::GrammarMatcher(std::shared_ptr<const Grammar> grammar, std::shared_ptr<const TokenTrie> tokens)
    : grammar_(std::move(grammar)), tokens_(std::move(tokens)), state_(std::make_unique<State>()) {
  state_->stacks = InitialStacks(*grammar_);
}

GrammarMatcher::GrammarMatcher(const GrammarMatcher& other)
    : grammar_(other.grammar_), tokens_(other.tokens_), state_(std::make_unique<State>(*other.state_)) {}

GrammarMatcher& GrammarMatcher::operator=(const GrammarMatcher& other) {
  if (this != &other) {
    grammar_ = other.grammar_;
    tokens_ = other.tokens_;
    state_ = std::make_unique<State>(*other.state_);
  }
  return *this;
}

GrammarMatcher::~GrammarMatcher() = default;

std::string GrammarMatcher::ForcedText(size_t max_bytes) const {
  std::string text;
  if (state_->partial.pending()) return text;
  StackSet stacks = state_->stacks;
  while (!stacks.empty() && !stacks.CanEnd()) {
    // Every parse's next element is a character class; forced when they
    // all are the same single code point.
    uint32_t only = 0;
    for (size_t i = 0; i < stacks.stacks.size(); ++i) {
      const CharClass& c = grammar_->classes[grammar_->elements[stacks.stacks[i].back()].value];
      if (c.negated || c.ranges.size() != 1 || c.ranges[0].first != c.ranges[0].last) return text;
      if (i > 0 && c.ranges[0].first != only) return text;
      only = c.ranges[0].first;
    }
    std::string bytes;
    utf8::Append(bytes, only);
    if (text.size() + bytes.size() > max_bytes) break;
    text += bytes;
    stacks = AdvanceStacks(*grammar_, stacks, only);
  }
  return text;
}

bool GrammarMatcher::operator==(const GrammarMatcher& other) const {
  return grammar_ == other.grammar_ && tokens_ == other.tokens_ && state_->partial == other.state_->partial &&
         state_->stacks == other.state_->stacks;
}

bool GrammarMatcher::CanEnd() const { return !state_->partial.pending() && state_->stacks.CanEnd(); }

bool GrammarMatcher::MustEnd() const { return !state_->partial.pending() && state_->stacks.Finished(); }

bool GrammarMatcher::Allows(TokenId id) const {
  const Trie& trie = tokens_->impl();
  if (id < 0 || size_t(id) >= trie.kinds.size()) return false;
  switch (trie.kinds[size_t(id)]) {
    case Trie::kEndOfGeneration: return CanEnd();
    case Trie::kNever: return false;
    case Trie::kText: break;
  }
  State state = *state_;
  return StepPiece(*grammar_, state, trie.pieces[size_t(id)]);
}

void GrammarMatcher::AllowedTokens(std::span<uint8_t> allowed) const {
  const Trie& trie = tokens_->impl();
  std::fill(allowed.begin(), allowed.end(), uint8_t(0));
  const bool can_end = CanEnd();
  for (TokenId id : trie.end_of_generation) allowed[size_t(id)] = can_end;
  TrieWalk(*grammar_, trie, allowed).Run(state_->stacks, state_->partial);
}

void GrammarMatcher::Accept(TokenId id) {
  const Trie& trie = tokens_->impl();
  if (!Allows(id)) Fail("the grammar does not allow token ", id, " here");
  if (trie.kinds[size_t(id)] == Trie::kEndOfGeneration) {
    state_->stacks = StackSet{{GrammarStack{}}};  // finished: only the end may follow
    return;
  }
  StepPiece(*grammar_, *state_, trie.pieces[size_t(id)]);
}

}  // namespace kakeya
