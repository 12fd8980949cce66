#include "grammar/stack_set.h"

#include <algorithm>

namespace kakeya {
namespace {

// Replaces rule references on top of `stack` by the first element of each of
// their alternatives until every stack in `out` has a character class or
// nothing on top. Terminates because the parser refuses left recursion; the
// step budget bounds the work for grammars whose alternatives multiply.
void Expand(const Grammar& g, GrammarStack stack, std::vector<GrammarStack>& out, size_t& budget) {
  std::vector<GrammarStack> work;
  work.push_back(std::move(stack));
  while (!work.empty() && budget > 0) {
    --budget;
    GrammarStack s = std::move(work.back());
    work.pop_back();
    if (s.empty() || g.elements[s.back()].kind == GrammarElement::kChar) {
      out.push_back(std::move(s));
      continue;
    }
    const uint32_t pos = s.back();
    const uint32_t rule = g.elements[pos].value;
    s.pop_back();
    if (!g.EndsAlternative(pos + 1)) s.push_back(pos + 1);
    uint32_t alt = g.rule_start[rule];
    while (true) {
      GrammarStack next = s;
      if (!g.EndsAlternative(alt)) next.push_back(alt);
      work.push_back(std::move(next));
      while (!g.EndsAlternative(alt)) ++alt;
      if (g.elements[alt].kind == GrammarElement::kEnd) break;
      ++alt;
    }
  }
}

StackSet Canonical(std::vector<GrammarStack> stacks) {
  std::sort(stacks.begin(), stacks.end());
  stacks.erase(std::unique(stacks.begin(), stacks.end()), stacks.end());
  if (stacks.size() > grammar_limits::kMaxStacks) stacks.resize(grammar_limits::kMaxStacks);
  return StackSet{std::move(stacks)};
}

}  // namespace

bool CharClass::Intersects(uint32_t first, uint32_t last) const {
  if (!negated) {
    for (const CodePointRange& r : ranges) {
      if (r.first <= last && first <= r.last) return true;
    }
    return false;
  }
  // Some code point of [first, last] lies outside every range: step past
  // the ranges that cover the candidate until one does not.
  uint32_t candidate = first;
  for (bool moved = true; moved;) {
    moved = false;
    for (const CodePointRange& r : ranges) {
      if (candidate >= r.first && candidate <= r.last) {
        if (r.last >= last) return false;
        candidate = r.last + 1;
        moved = true;
      }
    }
  }
  return true;
}

bool StackSet::CanEnd() const {
  return std::any_of(stacks.begin(), stacks.end(), [](const GrammarStack& s) { return s.empty(); });
}

bool StackSet::Finished() const {
  return !stacks.empty() &&
         std::all_of(stacks.begin(), stacks.end(), [](const GrammarStack& s) { return s.empty(); });
}

bool StackSet::AcceptsSome(const Grammar& grammar, uint32_t first, uint32_t last) const {
  for (const GrammarStack& s : stacks) {
    if (!s.empty() && grammar.classes[grammar.elements[s.back()].value].Intersects(first, last)) return true;
  }
  return false;
}

size_t StackSetHash::operator()(const StackSet& set) const {
  uint64_t h = 0x9E3779B97F4A7C15ull;
  for (const GrammarStack& s : set.stacks) {
    h = (h ^ s.size()) * 0x100000001B3ull;
    for (uint32_t pos : s) h = (h ^ pos) * 0x100000001B3ull;
  }
  return size_t(h);
}

StackSet InitialStacks(const Grammar& grammar) {
  std::vector<GrammarStack> out;
  size_t budget = grammar_limits::kMaxExpansionSteps;
  uint32_t alt = grammar.rule_start[grammar.root];
  while (true) {
    GrammarStack s;
    if (!grammar.EndsAlternative(alt)) s.push_back(alt);
    Expand(grammar, std::move(s), out, budget);
    while (!grammar.EndsAlternative(alt)) ++alt;
    if (grammar.elements[alt].kind == GrammarElement::kEnd) break;
    ++alt;
  }
  return Canonical(std::move(out));
}

StackSet AdvanceStacks(const Grammar& grammar, const StackSet& set, uint32_t code_point) {
  std::vector<GrammarStack> out;
  size_t budget = grammar_limits::kMaxExpansionSteps;
  for (const GrammarStack& s : set.stacks) {
    if (s.empty()) continue;
    const uint32_t pos = s.back();
    if (!grammar.classes[grammar.elements[pos].value].Contains(code_point)) continue;
    GrammarStack next(s.begin(), s.end() - 1);
    if (!grammar.EndsAlternative(pos + 1)) next.push_back(pos + 1);
    Expand(grammar, std::move(next), out, budget);
  }
  return Canonical(std::move(out));
}

}  // namespace kakeya
