// Prompt-lookup drafter: proposes what followed the most recent earlier
// occurrence of the history's current suffix (Saxena 2023, "prompt lookup
// decoding"; llama.cpp's ngram-simple). Longest n-gram first, n from n_max down
// to n_min; no model, so drafting costs microseconds and pays off on
// summaries, code edits and anything else that repeats its input.
//
// An index makes lookup independent of the history's length: one open-
// addressing hash table maps (n, hash of n tokens) to the most recent position
// where that n-gram ended. Each token is indexed once, when it is first seen
// (Begin, Accept or Draft), for every n at once, by hashing backwards from it.
// A hit is checked against the tokens themselves, so a hash collision can only
// hide an occurrence, never propose a wrong one.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "speculative/drafter.h"

namespace kakeya {

struct NgramOptions {
  // Defaults follow prompt lookup decoding (n-grams of 3 down to 1): a short
  // match still proposes something, and the loop's adaptive block size stops
  // paying for drafts that are not accepted.
  int n_min = 1;
  int n_max = 3;  // at most kMaxN
  int n_ctx = kDefaultContextSize;  // history length to size the index for (it grows past it if needed)
};

class NgramDrafter final : public Drafter {
 public:
  static constexpr int kMaxN = 64;

  // Throws Error on n_min < 1, n_max < n_min, n_max > kMaxN or n_ctx < 1.
  explicit NgramDrafter(const NgramOptions& options);

  std::string name() const override { return "ngram"; }
  void Begin(std::span<const TokenId> prompt) override;
  int Draft(const DraftRequest& request, std::span<TokenId> out) override;
  void Accept(std::span<const TokenId> history, int drafted, int accepted) override;

 private:
  struct Slot {
    uint64_t key = 0;  // 0: empty
    int32_t end = 0;   // the n-gram is history[end - n, end)
  };

  // Indexes the n-grams ending at positions indexed_ .. history.size() - 1:
  // all but the current suffix, so a lookup never finds the suffix itself.
  void Index(std::span<const TokenId> history);
  // keys[n] = Key(n, history[end - n, end)) for n in [n_min, min(n_max, end)].
  void SuffixKeys(std::span<const TokenId> history, int end, uint64_t* keys) const;
  void Insert(uint64_t key, int32_t end);
  // End of the most recent indexed n-gram with this key, or -1.
  int32_t Find(uint64_t key) const;
  void Grow();

  NgramOptions options_;
  std::vector<Slot> table_;  // [power of two], at most half full
  size_t n_used_ = 0;
  int indexed_ = 0;  // n-grams ending before this position are in the table
};

// The registry's row (drafter_registry.cc): an index sized for the target's context.
std::unique_ptr<Drafter> MakeNgramDrafter(const DrafterSetup& setup);

}  // namespace kakeya
