// The pair-merge loop shared by SPM and BPE (llama.cpp's llm_tokenizer_spm
// and llm_tokenizer_bpe sessions): start from one symbol per UTF-8 character
// and repeatedly merge the best adjacent pair, using a priority queue with
// lazy deletion so that a long text costs O(n log n).
#pragma once

#include <algorithm>
#include <optional>
#include <queue>
#include <string_view>
#include <vector>

#include "tokenizer/utf8.h"

namespace kakeya {

// A run of the text; merged symbols stay contiguous, so a symbol is a view.
struct MergeSymbol {
  int prev;
  int next;
  size_t start;
  size_t size;  // 0 once merged into its left neighbour
};

// `priority(left, right)` gives the priority of merging two adjacent symbol
// texts (higher first; ties go to the leftmost pair), or nullopt if they do
// not merge. Returns the symbols; follow `next` from index 0 for the result.
template <typename Priority>
std::vector<MergeSymbol> MergeSymbols(std::string_view text, Priority&& priority) {
  std::vector<MergeSymbol> symbols;
  for (size_t pos = 0; pos < text.size();) {
    // A truncated sequence at the end is one symbol, as in llama.cpp.
    const size_t size = std::min(utf8::SequenceLength(text[pos]), text.size() - pos);
    const int index = static_cast<int>(symbols.size());
    symbols.push_back({index - 1, pos + size == text.size() ? -1 : index + 1, pos, size});
    pos += size;
  }

  struct Pair {
    double priority;
    int left;
    int right;
    size_t size;  // merged byte size when pushed; a stale entry no longer matches
  };
  auto lower = [](const Pair& a, const Pair& b) {
    return a.priority < b.priority || (a.priority == b.priority && a.left > b.left);
  };
  std::priority_queue<Pair, std::vector<Pair>, decltype(lower)> queue(lower);
  auto try_add = [&](int left, int right) {
    if (left < 0 || right < 0) return;
    const MergeSymbol& l = symbols[left];
    const MergeSymbol& r = symbols[right];
    const std::optional<double> p =
        priority(text.substr(l.start, l.size), text.substr(r.start, r.size));
    if (p) queue.push({*p, left, right, l.size + r.size});
  };
  for (int i = 1; i < static_cast<int>(symbols.size()); ++i) try_add(i - 1, i);

  while (!queue.empty()) {
    const Pair pair = queue.top();
    queue.pop();
    MergeSymbol& left = symbols[pair.left];
    MergeSymbol& right = symbols[pair.right];
    // Symbols only grow, so the pair is current iff both still exist with the sizes it had.
    if (left.size == 0 || right.size == 0 || left.size + right.size != pair.size) continue;
    left.size += right.size;
    right.size = 0;
    left.next = right.next;
    if (right.next >= 0) symbols[right.next].prev = pair.left;
    try_add(left.prev, pair.left);
    try_add(pair.left, left.next);
  }
  return symbols;
}

}  // namespace kakeya
