#include <algorithm>
#include <numeric>

#include "grammar/grammar.h"
#include "grammar/token_trie_impl.h"

namespace kakeya {
namespace {

// Builds the subtree of `node` over ids[lo, hi), sorted by piece, whose
// pieces share their first `depth` bytes.
void BuildNode(TokenTrie::Impl& t, const std::vector<TokenId>& ids, uint32_t node, size_t lo, size_t hi,
               size_t depth) {
  t.nodes[node].token_begin = uint32_t(t.node_tokens.size());
  while (lo < hi && t.pieces[ids[lo]].size() == depth) t.node_tokens.push_back(ids[lo++]);
  t.nodes[node].token_end = uint32_t(t.node_tokens.size());
  std::vector<std::pair<size_t, size_t>> groups;  // [lo, hi) per next byte
  for (size_t i = lo; i < hi;) {
    size_t j = i;
    const char byte = t.pieces[ids[i]][depth];
    while (j < hi && t.pieces[ids[j]][depth] == byte) ++j;
    groups.push_back({i, j});
    i = j;
  }
  const uint32_t first_child = uint32_t(t.nodes.size());
  t.nodes[node].child_begin = first_child;
  t.nodes[node].child_end = first_child + uint32_t(groups.size());
  for (const auto& [g_lo, g_hi] : groups) {
    TokenTrie::Impl::Node child;
    child.byte = uint8_t(t.pieces[ids[g_lo]][depth]);
    t.nodes.push_back(child);
  }
  for (size_t g = 0; g < groups.size(); ++g) {
    BuildNode(t, ids, first_child + uint32_t(g), groups[g].first, groups[g].second, depth + 1);
  }
}

}  // namespace

TokenTrie::TokenTrie(const Tokenizer& tokenizer) : impl_(std::make_unique<Impl>()) {
  Impl& t = *impl_;
  const int32_t n = tokenizer.n_vocab();
  t.pieces.resize(size_t(n));
  t.kinds.resize(size_t(n));
  std::vector<TokenId> text_ids;
  for (TokenId id = 0; id < n; ++id) {
    if (tokenizer.IsEndOfGeneration(id)) {
      t.kinds[id] = Impl::kEndOfGeneration;
      t.end_of_generation.push_back(id);
      continue;
    }
    t.pieces[id] = tokenizer.TokenToPiece(id, false);
    t.kinds[id] = t.pieces[id].empty() ? Impl::kNever : Impl::kText;
    if (t.kinds[id] == Impl::kText) text_ids.push_back(id);
  }
  std::sort(text_ids.begin(), text_ids.end(),
            [&](TokenId a, TokenId b) { return t.pieces[a] < t.pieces[b]; });
  t.nodes.emplace_back();
  BuildNode(t, text_ids, 0, 0, text_ids.size(), 0);
}

TokenTrie::~TokenTrie() = default;

int32_t TokenTrie::n_vocab() const { return int32_t(impl_->pieces.size()); }

}  // namespace kakeya
