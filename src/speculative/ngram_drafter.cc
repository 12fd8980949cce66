#include "speculative/ngram_drafter.h"

#include <algorithm>
#include <bit>

#include "base/error.h"
#include "model/context.h"

namespace kakeya {
namespace {

// One more token (walking backwards) into a running n-gram hash.
uint64_t Extend(uint64_t h, TokenId token) {
  return (h ^ static_cast<uint32_t>(token)) * 0x9E3779B97F4A7C15ull;
}

// The table key of an n-gram: its running hash and n through SplitMix64's
// finalizer, so that nearby hashes spread over the table; never 0 (= empty).
uint64_t KeyOf(uint64_t h, int n) {
  uint64_t z = h + static_cast<uint64_t>(n) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  return z == 0 ? 1 : z;
}

}  // namespace

NgramDrafter::NgramDrafter(const NgramOptions& options) : options_(options) {
  if (options_.n_min < 1) Fail("ngram drafter: n_min ", options_.n_min, " must be >= 1");
  if (options_.n_max < options_.n_min) {
    Fail("ngram drafter: n_max ", options_.n_max, " must be >= n_min ", options_.n_min);
  }
  if (options_.n_max > kMaxN) Fail("ngram drafter: n_max ", options_.n_max, " exceeds ", kMaxN);
  if (options_.n_ctx < 1) Fail("ngram drafter: n_ctx ", options_.n_ctx, " must be >= 1");
  // At most one key per n per position; keep the table at most half full.
  const size_t keys = size_t(options_.n_ctx) * (options_.n_max - options_.n_min + 1);
  table_.resize(std::bit_ceil(2 * keys));
}

void NgramDrafter::Begin(std::span<const TokenId> prompt) {
  std::fill(table_.begin(), table_.end(), Slot{});
  n_used_ = 0;
  indexed_ = 0;
  Index(prompt);
}

void NgramDrafter::Accept(std::span<const TokenId> history, int drafted, int accepted) {
  Index(history);
}

int NgramDrafter::Draft(const DraftRequest& request, std::span<TokenId> out) {
  Index(request.history);  // a no-op when Accept saw this history
  const std::span<const TokenId> history = request.history;
  const int h = static_cast<int>(history.size());
  const int max_tokens = std::min<int>(request.max_tokens, static_cast<int>(out.size()));
  // An earlier occurrence ends at h - 1 at the latest, so n <= h - 1.
  const int n_top = std::min(options_.n_max, h - 1);
  if (max_tokens < 1 || n_top < options_.n_min) return 0;

  uint64_t keys[kMaxN + 1];
  SuffixKeys(history, h, keys);
  for (int n = n_top; n >= options_.n_min; --n) {
    const int32_t end = Find(keys[n]);
    if (end < 0 || !std::equal(history.begin() + (end - n), history.begin() + end, history.end() - n)) {
      continue;
    }
    const int count = std::min(max_tokens, h - end);
    std::copy_n(history.begin() + end, count, out.begin());
    return count;
  }
  return 0;
}

void NgramDrafter::Index(std::span<const TokenId> history) {
  const int h = static_cast<int>(history.size());
  uint64_t keys[kMaxN + 1];
  for (int end = indexed_; end < h; ++end) {
    SuffixKeys(history, end, keys);
    for (int n = options_.n_min; n <= std::min(options_.n_max, end); ++n) Insert(keys[n], end);
  }
  indexed_ = std::max(indexed_, h);
}

void NgramDrafter::SuffixKeys(std::span<const TokenId> history, int end, uint64_t* keys) const {
  uint64_t h = 0;
  for (int n = 1; n <= std::min(options_.n_max, end); ++n) {
    h = Extend(h, history[end - n]);
    if (n >= options_.n_min) keys[n] = KeyOf(h, n);
  }
}

void NgramDrafter::Insert(uint64_t key, int32_t end) {
  if (2 * (n_used_ + 1) > table_.size()) Grow();
  const size_t mask = table_.size() - 1;
  for (size_t i = key & mask;; i = (i + 1) & mask) {
    if (table_[i].key == 0) {
      table_[i].key = key;
      ++n_used_;
    }
    if (table_[i].key == key) {
      table_[i].end = end;  // later positions overwrite: the most recent occurrence wins
      return;
    }
  }
}

int32_t NgramDrafter::Find(uint64_t key) const {
  const size_t mask = table_.size() - 1;
  for (size_t i = key & mask; table_[i].key != 0; i = (i + 1) & mask) {
    if (table_[i].key == key) return table_[i].end;
  }
  return -1;
}

// Past the reserved n_ctx: doubles the table (amortized O(1) per insert).
void NgramDrafter::Grow() {
  std::vector<Slot> old(table_.size() * 2);
  old.swap(table_);
  n_used_ = 0;
  for (const Slot& s : old) {
    if (s.key != 0) Insert(s.key, s.end);
  }
}

std::unique_ptr<Drafter> MakeNgramDrafter(const DrafterSetup& setup) {
  return std::make_unique<NgramDrafter>(NgramOptions{.n_ctx = setup.target_context.options().n_ctx});
}

}  // namespace kakeya
