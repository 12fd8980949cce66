#include "bench_gates.h"

#include <algorithm>

#include "engine/degeneration.h"

namespace kakeya::cli {

std::optional<TokenMismatch> FirstMismatch(std::span<const TokenId> plain, std::span<const TokenId> other) {
  const size_t n = std::min(plain.size(), other.size());
  for (size_t i = 0; i < n; ++i) {
    if (plain[i] != other[i]) return TokenMismatch{i, plain[i], other[i]};
  }
  if (plain.size() == other.size()) return std::nullopt;
  return TokenMismatch{n, n < plain.size() ? plain[n] : -1, n < other.size() ? other[n] : -1};
}

std::string RunName(const std::string& method, int block, const std::string& prompt) {
  if (method == "none") return "plain decoding, prompt " + prompt;
  return "method " + method + ", block " + (block > 0 ? std::to_string(block) : std::string("adaptive")) +
         ", prompt " + prompt;
}

std::string IdentityFailure(const std::string& run, std::span<const TokenId> plain, std::span<const TokenId> other) {
  const std::optional<TokenMismatch> m = FirstMismatch(plain, other);
  if (!m) return "";
  return run + ": output differs from plain decoding at generated token " + std::to_string(m->position) +
         " (plain " + std::to_string(m->plain) + ", speculative " + std::to_string(m->other) + ")";
}

std::string DegenerationFailure(const std::string& run, const std::string& text) {
  const Degeneration d = FindDegeneration(text);
  return d ? run + ": output degenerates (" + d.Describe() + ")" : "";
}

}  // namespace kakeya::cli
