// Token sampling: repetition controls, then greedy, or top-k, top-p, min-p
// and temperature and a seeded choice that depends only on (seed, position).
//
// Filter order follows llama.cpp's default chain (common/sampling.cpp:
// penalties -> dry -> top_k -> typ_p -> top_p -> min_p -> temp -> dist,
// without typ_p):
//   0. repetition penalties and DRY (penalties.h), from the tokens before.
//   1. top-k   keep the k best logits.
//   2. top-p   keep the smallest prefix, by descending probability, whose mass
//              is >= top_p (at least one token).
//   3. min-p   keep tokens with p >= min_p * p_max.
//   4. temperature, then the choice.
// As in llama.cpp, top-p and min-p see the softmax of the raw logits
// (temperature 1) over the tokens the previous filters kept; temperature only
// reshapes the survivors. Ties are broken by lower token id everywhere.
//
// The choice (Sample) is Gumbel-max: the survivor with the largest
// logit / temperature + g, where g is Gumbel noise computed from (seed,
// position, token id) alone. That draws from the softmax exactly, and the
// token at a position is fixed by the logits, the seed and the position:
// not by how many draws came before. So the speculative verifier can check
// drafts by equality, as in greedy mode, and a seed gives the same bytes
// with and without speculation, at any block size or thread count; a
// drafter that picks with the same noise proposes the token the target
// would sample whenever its distribution is close to the target's.
//
// Rejection sampling (speculative sampling, verifier.h) instead needs the
// filtered distribution (Distribution) and uniform draws from a stream
// (Uniform, DrawFrom; xoshiro256**, the same on every machine).
//
// A grammar (grammar.h), when given, applies before everything else: the
// tokens it forbids next count as -inf logits, so the filters, the
// temperature and the choice see only the tokens it allows. Greedy decoding
// first tries the unconstrained argmax, which stands whenever the grammar
// allows it; only otherwise is the whole vocabulary masked.
//
// Non-finite logits: NaN and -inf tokens get probability 0; if any logit is
// +inf the mass is shared equally by the +inf tokens. If no token has a
// usable logit the distribution is one-hot at Argmax().
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "grammar/grammar.h"
#include "sampling/penalties.h"
#include "sampling/sampling_params.h"
#include "tokenizer/tokenizer.h"

namespace kakeya {

// First index of the maximum; NaN never wins. 0 if every entry is NaN.
int32_t Argmax(std::span<const float> logits);

// What Sample returns when a grammar allows no token at all (it needs a byte
// no token of the vocabulary starts with): the decoder ends the output there.
inline constexpr TokenId kNoTokenAllowed = -1;

// xoshiro256** (Blackman & Vigna 2018) seeded through SplitMix64, as its
// authors recommend: fixed integer arithmetic, so a seed gives the same stream
// everywhere (std:: distributions differ between standard libraries).
class Rng {
 public:
  explicit Rng(uint64_t seed);
  uint64_t Next();
  double Uniform();  // [0, 1) with 53 random bits

 private:
  uint64_t s_[4];
};

// One sampler per sequence. Not thread-safe: it holds scratch buffers and the
// RNG stream of rejection sampling.
class Sampler {
 public:
  // Validates `p` (throws kakeya::Error) and allocates all buffers, once.
  // tokenizer: the token texts DRY's sequence breakers are found in (null:
  // none). max_history: the longest history DRY looks at.
  Sampler(const SamplingParams& p, int n_vocab, const Tokenizer* tokenizer = nullptr, int max_history = 4096);

  // The token at position history.size() (its index in the sequence, the
  // prompt included) from raw logits (n_vocab), after the repetition
  // controls for `history` and the grammar, if any: the penalized argmax
  // when greedy, otherwise the Gumbel-max choice at that position. Consumes
  // no RNG state; no allocation without a grammar.
  int32_t Sample(std::span<const float> logits, std::span<const TokenId> history,
                 const GrammarMatcher* grammar = nullptr);

  // The same choice at `position` without the repetition controls, for
  // drafters, who pick by the target's noise but need not be exact. The
  // logits may cover the first ids of the vocabulary only (a drafter's
  // reduced head, DraftVocabSize): the others are never picked.
  int32_t SampleAt(std::span<const float> logits, int64_t position);

  // The final distribution after the grammar, all filters and the
  // repetition controls for `history` (zeros for filtered tokens; sums to
  // 1), written to `probs` (n_vocab). One-hot at the argmax when greedy; all
  // zeros if the grammar allows nothing.
  void Distribution(std::span<const float> logits, std::span<const TokenId> history, std::span<float> probs,
                    const GrammarMatcher* grammar = nullptr);

  // Draws from an explicit distribution, which need not be normalized: one
  // Uniform() u, then the first token id whose cumulative mass, summed in
  // token-id order, exceeds u * total. Entries that are not > 0 are never
  // drawn; if none is, returns Argmax(probs).
  int32_t DrawFrom(std::span<const float> probs);

  double Uniform() { return rng_.Uniform(); }
  const SamplingParams& params() const { return params_; }

 private:
  struct Candidate {
    float logit;
    int32_t id;
  };

  std::span<const float> Penalized(std::span<const float> logits, std::span<const TokenId> history);
  bool Constrain(std::span<const float>& logits, const GrammarMatcher& grammar);
  int Survivors(std::span<const float> logits, float* max_logit);
  int Filter(std::span<const float> logits);
  int GatherTopK(std::span<const float> logits);
  int TopP(int n, float max_logit);
  int MinP(int n, float max_logit);
  void OrderById(int n, std::span<const float> logits);
  void Finalize(int n, float max_logit);
  int32_t GumbelMax(int n, float max_logit, int64_t position) const;

  SamplingParams params_;
  Rng rng_;
  RepetitionPenalties penalties_;
  std::vector<float> penalized_;  // [n_vocab] logits after the repetition controls, when active
  std::vector<Candidate> cand_;  // [n_vocab] surviving tokens, first n used
  std::vector<float> prob_;      // [n_vocab] final probability of cand_[i]
  std::vector<double> bin_mass_;  // [kBins] top-p mass per logit bin (sampler.cc)
  std::vector<bool> kept_;        // [n_vocab] scratch for OrderById
  std::vector<uint8_t> allowed_;  // [n_vocab] the grammar's mask
  std::optional<GrammarMatcher> allowed_for_;  // the state allowed_ was made for
  std::vector<float> masked_;     // [n_vocab] logits with the grammar's forbidden tokens at -inf
};

}  // namespace kakeya
