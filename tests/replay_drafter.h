// A drafter for the lossless tests: it proposes a known output (the plain
// decoding's), every seventh proposal spoiled, so that a run mixes long
// accepted blocks with rejections and rollbacks.
#pragma once

#include <string>
#include <vector>

#include "speculative/drafter.h"

namespace kakeya {

class ReplayDrafter : public Drafter {
 public:
  explicit ReplayDrafter(std::vector<TokenId> full) : full_(std::move(full)) {}
  std::string name() const override { return "replay"; }
  void Begin(std::span<const TokenId>) override {}
  int Draft(const DraftRequest& r, std::span<TokenId> out) override {
    int n = 0;
    for (size_t pos = r.history.size(); n < r.max_tokens && pos < full_.size(); ++n, ++pos) {
      out[n] = ++proposals_ % 7 == 0 ? (full_[pos] + 1) % 50 + 3 : full_[pos];
    }
    return n;
  }
  void Accept(std::span<const TokenId>, int, int) override {}

 private:
  std::vector<TokenId> full_;
  int proposals_ = 0;
};

}  // namespace kakeya
