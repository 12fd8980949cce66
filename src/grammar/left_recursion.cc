#include "grammar/left_recursion.h"

#include <utility>
#include <vector>

namespace kakeya {
namespace {

// Rules that can match the empty string: a fixpoint, since an alternative of
// references is empty when each referenced rule can be.
std::vector<bool> NullableRules(const Grammar& g) {
  const size_t n = g.rule_start.size();
  std::vector<bool> nullable(n, false);
  for (bool changed = true; changed;) {
    changed = false;
    for (size_t r = 0; r < n; ++r) {
      if (nullable[r]) continue;
      bool alternative_empty = true;
      for (uint32_t pos = g.rule_start[r];; ++pos) {
        const GrammarElement& e = g.elements[pos];
        if (e.kind == GrammarElement::kAlt || e.kind == GrammarElement::kEnd) {
          if (alternative_empty) {
            nullable[r] = changed = true;
            break;
          }
          if (e.kind == GrammarElement::kEnd) break;
          alternative_empty = true;
        } else if (e.kind == GrammarElement::kChar || !nullable[e.value]) {
          alternative_empty = false;
        }
      }
    }
  }
  return nullable;
}

// For each rule, the rules it may reference before matching a character.
std::vector<std::vector<uint32_t>> LeftEdges(const Grammar& g, const std::vector<bool>& nullable) {
  std::vector<std::vector<uint32_t>> edges(g.rule_start.size());
  for (size_t r = 0; r < edges.size(); ++r) {
    bool at_start = true;  // only nullable references so far in this alternative
    for (uint32_t pos = g.rule_start[r];; ++pos) {
      const GrammarElement& e = g.elements[pos];
      if (e.kind == GrammarElement::kEnd) break;
      if (e.kind == GrammarElement::kAlt) {
        at_start = true;
      } else if (at_start && e.kind == GrammarElement::kRuleRef) {
        edges[r].push_back(e.value);
        at_start = nullable[e.value];
      } else {
        at_start = false;
      }
    }
  }
  return edges;
}

}  // namespace

std::optional<uint32_t> FindLeftRecursion(const Grammar& grammar) {
  const std::vector<std::vector<uint32_t>> edges = LeftEdges(grammar, NullableRules(grammar));
  // Depth-first search for a cycle, iterative: chains of repetition rules run
  // thousands deep.
  enum Color : uint8_t { kUnseen, kOnPath, kDone };
  std::vector<Color> color(edges.size(), kUnseen);
  std::vector<std::pair<uint32_t, size_t>> path;  // (rule, next edge to follow)
  for (uint32_t start = 0; start < edges.size(); ++start) {
    if (color[start] != kUnseen) continue;
    color[start] = kOnPath;
    path.push_back({start, 0});
    while (!path.empty()) {
      auto& [rule, next] = path.back();
      if (next == edges[rule].size()) {
        color[rule] = kDone;
        path.pop_back();
        continue;
      }
      const uint32_t to = edges[rule][next++];
      if (color[to] == kOnPath) return to;
      if (color[to] == kUnseen) {
        color[to] = kOnPath;
        path.push_back({to, 0});
      }
    }
  }
  return std::nullopt;
}

}  // namespace kakeya
