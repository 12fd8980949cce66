// The verifiers of the speculative loop: given the target's logits for the
// block [bonus, d0, ..., d(m-1)] (m + 1 rows), decide how many drafts are
// accepted and which token the target contributes after them (docs/design.md,
// invariant 2: that token is always committed, so every step gains >= 1).
#pragma once

#include <span>

#include "sampling/sampler.h"
#include "tokenizer/tokenizer.h"

namespace kakeya {

// How drafts are checked when sampling (greedy decoding always matches).
enum class SampledVerify {
  kMatch,      // VerifyMatch: output identical to plain decoding with the same seed
  kRejection,  // VerifyRejection: the same distribution, other bytes
};

struct Verdict {
  int accepted = 0;  // leading drafts kept
  TokenId next = 0;  // the target's token after them: the new bonus (kNoTokenAllowed: the grammar ends the output)
  bool resampled = false;  // next came from the residual of a rejection
};

// Rows of target logits: row i (F32 [n_vocab]) is the prediction after the
// i-th token of the block; rows.size() == (drafts.size() + 1) * n_vocab.
struct BlockLogits {
  std::span<const float> rows;
  int n_vocab = 0;
  std::span<const float> row(int i) const { return rows.subspan(size_t(i) * n_vocab, n_vocab); }
};

// Accepts drafts while each equals the token the target itself picks at its
// row: Sampler::Sample with the row's own history (the committed tokens and
// the drafts before it), so the argmax when greedy and the seeded Gumbel-max
// choice at that position when sampling, after the repetition controls. The
// next token is the target's pick after the last accepted draft. Rows are
// batch-invariant, so this is byte-identical to plain decoding with the same
// settings. history: the committed tokens (ending with the bonus), then the
// drafts. grammar (null: none): the constraint at the first row, advanced
// past each accepted draft; a draft it forbids can never equal the target's
// pick, so it is rejected like any other mismatch.
Verdict VerifyMatch(const BlockLogits& logits, std::span<const TokenId> drafts, Sampler& sampler,
                    std::span<const TokenId> history, GrammarMatcher* grammar = nullptr);

// Speculative sampling (Leviathan et al. 2023, Algorithm 1; Chen et al. 2023):
// draft i is accepted with probability min(1, p(d_i) / q(d_i)), where p is the
// target's filtered distribution (Sampler::Distribution with the row's
// history) and q the drafter's; on the first rejection the next token is
// drawn from the normalised residual max(0, p - q); if all are accepted it is
// drawn from p of the last row. The output distribution is exactly the
// target's, but the draws come from the sampler's stream, so the bytes
// depend on the drafts. draft_probs: q rows [drafts.size(), n_vocab], or
// empty for a deterministic drafter (q one-hot at the draft). history as
// and grammar as for VerifyMatch (p is then the constrained distribution,
// zero on forbidden drafts). p and residual: scratch of n_vocab floats.
Verdict VerifyRejection(const BlockLogits& logits, std::span<const TokenId> drafts,
                        std::span<const float> draft_probs, Sampler& sampler, std::span<const TokenId> history,
                        std::span<float> p, std::span<float> residual, GrammarMatcher* grammar = nullptr);

}  // namespace kakeya
