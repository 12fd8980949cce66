// Token sampling: greedy, top-k, top-p, min-p and temperature, with a seeded
// RNG whose output is the same on every machine and standard library.
//
// Filter order follows llama.cpp's default chain (common/sampling.cpp:
// top_k -> typ_p -> top_p -> min_p -> temp -> dist, without typ_p):
//   1. top-k   keep the k best logits.
//   2. top-p   keep the smallest prefix, by descending probability, whose mass
//              is >= top_p (at least one token).
//   3. min-p   keep tokens with p >= min_p * p_max.
//   4. temperature, softmax over the survivors, draw.
// As in llama.cpp, top-p and min-p see the softmax of the raw logits
// (temperature 1) over the tokens the previous filters kept; temperature only
// reshapes the survivors. Ties are broken by lower token id everywhere.
//
// A draw is one Uniform() u against the cumulative distribution summed in
// token-id order, in Sample() and DrawFrom() alike. The order does not depend
// on how the standard library partitions or heaps, and Rng is plain integer
// arithmetic, so a seed gives the same tokens on every machine (as long as
// libm's exp rounds the same: a 1-ulp difference can, very rarely, move a
// draw that falls right on a boundary).
//
// Non-finite logits: NaN and -inf tokens get probability 0; if any logit is
// +inf the mass is shared equally by the +inf tokens. If no token has a
// usable logit the distribution is one-hot at Argmax().
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace kakeya {

struct SamplingParams {
  float temperature = 0.8f;  // <= 0: greedy (Argmax), filters ignored
  int top_k = 40;            // <= 0: off
  float top_p = 0.95f;       // >= 1: off
  float min_p = 0.05f;       // <= 0: off
  uint64_t seed = 0;

  // Throws kakeya::Error naming the flag (--temp, --top-k, --top-p, --min-p)
  // for temperature < 0 or not finite, top_k < 0, top_p not in (0, 1] or
  // min_p not in [0, 1].
  void Validate() const;
};

// First index of the maximum; NaN never wins. 0 if every entry is NaN.
int32_t Argmax(std::span<const float> logits);

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

// One sampler per sequence. Not thread-safe; holds the sequence's RNG state.
class Sampler {
 public:
  // Validates `p` (throws kakeya::Error) and allocates all buffers, once.
  Sampler(const SamplingParams& p, int n_vocab);

  // Picks a token from raw logits (n_vocab of them) without allocating.
  // Bit-for-bit the same token as DrawFrom(Distribution(logits)) from the same
  // RNG state. Consumes one Uniform() unless greedy (temperature <= 0).
  int32_t Sample(std::span<const float> logits);

  // The final distribution after all filters (zeros for filtered tokens; sums
  // to 1), written to `probs` (n_vocab). One-hot at Argmax() when greedy.
  void Distribution(std::span<const float> logits, std::span<float> probs);

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

  int Filter(std::span<const float> logits);
  int GatherTopK(std::span<const float> logits);
  int TopP(int n, float max_logit);
  int MinP(int n, float max_logit);
  void OrderById(int n, std::span<const float> logits);
  void Finalize(int n, float max_logit);

  SamplingParams params_;
  Rng rng_;
  std::vector<Candidate> cand_;  // [n_vocab] surviving tokens, first n used
  std::vector<float> prob_;      // [n_vocab] final probability of cand_[i]
  std::vector<double> bin_mass_;  // [kBins] top-p mass per logit bin (sampler.cc)
  std::vector<bool> kept_;        // [n_vocab] scratch for OrderById
};

}  // namespace kakeya
