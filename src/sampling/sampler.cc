#include "sampling/sampler.h"

#include <algorithm>
#include <bit>
#include <cassert>
#include <cmath>
#include <cstdint>
#include <limits>

#include "base/error.h"
#include "base/portable_math.h"

namespace kakeya {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// Top-p bins: 1/16 logit wide, so one bin spans a weight ratio of e^(1/16)
// and only near-ties share a bin; the last bin collects everything more than
// 64 logits below the max (weights under e^-64, too light to matter).
constexpr int kBinsPerLogit = 16;
constexpr int kBins = 64 * kBinsPerLogit;

uint64_t SplitMix64(uint64_t& x) {
  uint64_t z = (x += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

// exp(logit - max) as a softmax weight. Written so that a +inf max gives the
// +inf tokens weight 1 and all others 0, where inf - inf would give NaN.
double Weight(float logit, double max_logit, double temperature) {
  if (logit == max_logit) return 1.0;
  return PortableExp((logit - max_logit) / temperature);
}

// Index of the entry drawn by `u` in [0, 1): the first whose running sum
// (double, in span order) exceeds u * total. -1 if no entry is > 0.
int DrawIndex(std::span<const float> probs, double u) {
  double total = 0;
  for (float p : probs) {
    if (p > 0) total += p;
  }
  const double target = u * total;
  double cum = 0;
  int last = -1;
  for (size_t i = 0; i < probs.size(); ++i) {
    if (!(probs[i] > 0)) continue;
    cum += probs[i];
    if (cum > target) return static_cast<int>(i);
    last = static_cast<int>(i);
  }
  return last;  // u * total rounded up to total: the last drawable entry
}

// Descending logit, then ascending id: the order top-k and top-p select in.
constexpr auto kBetter = [](const auto& a, const auto& b) {
  return a.logit > b.logit || (a.logit == b.logit && a.id < b.id);
};

constexpr auto kLowerId = [](const auto& a, const auto& b) { return a.id < b.id; };

}  // namespace

int32_t Argmax(std::span<const float> logits) {
  int32_t best = -1;
  for (size_t i = 0; i < logits.size(); ++i) {
    if (std::isnan(logits[i])) continue;
    if (best < 0 || logits[i] > logits[best]) best = static_cast<int32_t>(i);
  }
  return best < 0 ? 0 : best;
}

Rng::Rng(uint64_t seed) {
  for (uint64_t& s : s_) s = SplitMix64(seed);
}

uint64_t Rng::Next() {
  const uint64_t result = std::rotl(s_[1] * 5, 7) * 9;
  const uint64_t t = s_[1] << 17;
  s_[2] ^= s_[0];
  s_[3] ^= s_[1];
  s_[1] ^= s_[2];
  s_[0] ^= s_[3];
  s_[2] ^= t;
  s_[3] = std::rotl(s_[3], 45);
  return result;
}

double Rng::Uniform() { return static_cast<double>(Next() >> 11) * 0x1.0p-53; }

// A uniform in (0, 1) that depends only on (seed, position, token): three
// rounds of SplitMix64's finalizer, each folding in one key.
double KeyedUniform(uint64_t seed, int64_t position, int32_t token) {
  uint64_t x = seed;
  uint64_t h = SplitMix64(x);
  x = h ^ static_cast<uint64_t>(position);
  h = SplitMix64(x);
  x = h ^ static_cast<uint32_t>(token);
  h = SplitMix64(x);
  return (static_cast<double>(h >> 11) + 0.5) * 0x1.0p-53;
}

Sampler::Sampler(const SamplingParams& p, int n_vocab, const Tokenizer* tokenizer, int max_history)
    : params_((p.Validate(), p)),  // validated before the penalties are built from it
      rng_(p.seed),
      penalties_(p, std::max(n_vocab, 0), tokenizer, max_history) {
  if (n_vocab <= 0) Fail("the sampler needs a vocabulary, got n_vocab ", n_vocab);
  if (penalties_.active()) penalized_.resize(n_vocab);
  cand_.resize(n_vocab);
  prob_.resize(n_vocab);
  bin_mass_.resize(kBins);
  kept_.resize(n_vocab);
  allowed_.resize(n_vocab);
  masked_.resize(n_vocab);
}

std::span<const float> Sampler::Penalized(std::span<const float> logits, std::span<const TokenId> history) {
  if (!penalties_.active()) return logits;
  penalties_.Apply(history, logits, penalized_);
  return penalized_;
}

// Points `logits` at a copy in which the tokens the grammar forbids are
// -inf; false if it allows none.
bool Sampler::Constrain(std::span<const float>& logits, const GrammarMatcher& grammar) {
  // The verifier's rows and consecutive tokens often share a state (inside a
  // JSON string every token does), and a mask over a 150k vocabulary costs
  // milliseconds there: reuse the last one when the state is the same.
  if (!allowed_for_ || !(*allowed_for_ == grammar)) {
    grammar.AllowedTokens(allowed_);
    allowed_for_ = grammar;
  }
  bool any = false;
  for (size_t i = 0; i < logits.size(); ++i) {
    masked_[i] = allowed_[i] ? logits[i] : kNegInf;
    any |= allowed_[i] != 0;
  }
  logits = masked_;
  return any;
}

// Runs top-k, top-p and min-p; leaves the n survivors (returned) in
// cand_[0, n), in no particular order, and their max logit in *max_logit.
// With no usable logit: the argmax alone, at logit 0.
int Sampler::Survivors(std::span<const float> logits, float* max_logit) {
  assert(logits.size() <= cand_.size());
  int n = GatherTopK(logits);
  if (n == 0) {
    cand_[0] = {0.0f, Argmax(logits)};
    *max_logit = 0.0f;
    return 1;
  }
  // Every filter keeps the best token, so this stays the survivors' max.
  *max_logit = kNegInf;
  for (int i = 0; i < n; ++i) *max_logit = std::max(*max_logit, cand_[i].logit);
  if (params_.top_p < 1) n = TopP(n, *max_logit);
  if (params_.min_p > 0) n = MinP(n, *max_logit);
  return n;
}

// The survivors in token-id order with their final probabilities in prob_[0, n).
int Sampler::Filter(std::span<const float> logits) {
  float max_logit = 0;
  const int n = Survivors(logits, &max_logit);
  OrderById(n, logits);
  Finalize(n, max_logit);
  return n;
}

// Collects the usable tokens (not NaN, not -inf: those are never drawn), only
// the top_k best of them when top-k is on. For top-k the first k fill a heap
// whose root is the worst kept token, so most later tokens cost one
// comparison: ~10x faster than nth_element for k = 40 of 150k.
int Sampler::GatherTopK(std::span<const float> logits) {
  const size_t k = params_.top_k > 0 ? static_cast<size_t>(params_.top_k) : SIZE_MAX;
  const auto first = cand_.begin();
  size_t n = 0;
  for (size_t i = 0; i < logits.size(); ++i) {
    if (!(logits[i] > kNegInf)) continue;
    const Candidate c{logits[i], static_cast<int32_t>(i)};
    if (n < k) {
      cand_[n++] = c;
      if (n == k) std::make_heap(first, first + n, kBetter);
    } else if (kBetter(c, cand_[0])) {
      std::pop_heap(first, first + n, kBetter);
      cand_[n - 1] = c;
      std::push_heap(first, first + n, kBetter);
    }
  }
  return static_cast<int>(n);
}

// Keeps the smallest prefix, in kBetter order, with mass >= top_p. Sorting a
// whole 150k vocabulary costs ~20 ms, so (like llama.cpp's bucket sort for
// top-k) candidates are first binned by distance below the max logit; only the
// bin where the cumulative mass crosses top_p is sorted. Bins are monotone in
// the logit, so the prefix found is the one a full sort would give.
int Sampler::TopP(int n, float max_logit) {
  const auto bin = [max_logit](float logit) {
    if (logit == max_logit) return 0;  // also for a +inf max, where inf - inf is NaN
    const double x = (static_cast<double>(max_logit) - logit) * kBinsPerLogit;
    return x < kBins - 1 ? static_cast<int>(x) : kBins - 1;
  };
  std::fill(bin_mass_.begin(), bin_mass_.end(), 0.0);
  double total = 0;
  for (int i = 0; i < n; ++i) {
    const double w = Weight(cand_[i].logit, max_logit, 1.0);
    bin_mass_[bin(cand_[i].logit)] += w;
    total += w;
  }
  const double target = params_.top_p * total;
  double cum = 0;
  int crossing = 0;
  while (crossing < kBins - 1 && cum + bin_mass_[crossing] < target) cum += bin_mass_[crossing++];

  const auto first = cand_.begin();
  const auto mid = std::partition(first, first + n, [&](const Candidate& c) { return bin(c.logit) < crossing; });
  const auto end = std::partition(mid, first + n, [&](const Candidate& c) { return bin(c.logit) == crossing; });
  std::sort(mid, end, kBetter);
  for (auto it = mid; it != end; ++it) {
    cum += Weight(it->logit, max_logit, 1.0);
    if (cum >= target) return static_cast<int>(it - first) + 1;
  }
  return static_cast<int>(end - first);  // only if rounding kept cum a hair below target
}

// Keeps tokens with p >= min_p * p_max, i.e. logit >= max + log(min_p), the
// form llama.cpp uses: no exp per token.
int Sampler::MinP(int n, float max_logit) {
  const double threshold = max_logit + PortableLog(static_cast<double>(params_.min_p));
  const auto end = std::remove_if(cand_.begin(), cand_.begin() + n,
                                  [&](const Candidate& c) { return c.logit < threshold; });
  return static_cast<int>(end - cand_.begin());
}

// Puts the survivors in token-id order, the order draws are made in: it does
// not depend on the standard library's sort or partition, so a seed draws the
// same tokens everywhere. Few survivors are sorted; many (a top-p set can be
// 100k tokens) are marked and collected in one pass over the vocabulary.
void Sampler::OrderById(int n, std::span<const float> logits) {
  const auto end = cand_.begin() + n;
  if (std::is_sorted(cand_.begin(), end, kLowerId)) return;
  if (n <= static_cast<int>(logits.size()) / 64) {
    std::sort(cand_.begin(), end, kLowerId);
    return;
  }
  std::fill(kept_.begin(), kept_.end(), false);
  for (int i = 0; i < n; ++i) kept_[cand_[i].id] = true;
  int j = 0;
  for (size_t id = 0; id < logits.size(); ++id) {
    if (kept_[id]) cand_[j++] = {logits[id], static_cast<int32_t>(id)};
  }
}

// Softmax at the sampling temperature over the survivors, in id order.
void Sampler::Finalize(int n, float max_logit) {
  double total = 0;
  for (int i = 0; i < n; ++i) {
    prob_[i] = static_cast<float>(Weight(cand_[i].logit, max_logit, params_.temperature));
    total += prob_[i];
  }
  for (int i = 0; i < n; ++i) prob_[i] = static_cast<float>(prob_[i] / total);
}

// argmax over the survivors of (logit - max) / temperature + Gumbel noise
// -log(-log u), u keyed by (seed, position, token); ties to the lower id.
int32_t Sampler::GumbelMax(int n, float max_logit, int64_t position) const {
  int32_t best = -1;
  double best_score = -std::numeric_limits<double>::infinity();
  for (int i = 0; i < n; ++i) {
    const Candidate& c = cand_[i];
    // Written so that a +inf max gives the +inf tokens 0 and all others -inf.
    const double scaled = c.logit == max_logit ? 0.0 : (static_cast<double>(c.logit) - max_logit) / params_.temperature;
    const double score = scaled - PortableLog(-PortableLog(KeyedUniform(params_.seed, position, c.id)));
    if (best < 0 || score > best_score || (score == best_score && c.id < best)) best = c.id, best_score = score;
  }
  return best;
}

int32_t Sampler::Sample(std::span<const float> logits, std::span<const TokenId> history,
                        const GrammarMatcher* grammar) {
  logits = Penalized(logits, history);
  if (grammar != nullptr) {
    // Masking only removes tokens, so an allowed argmax is also the masked
    // argmax (the first maximum either way).
    if (params_.temperature <= 0) {
      const int32_t best = Argmax(logits);
      if (grammar->Allows(best)) return best;
    }
    if (!Constrain(logits, *grammar)) return kNoTokenAllowed;
  }
  return SampleAt(logits, static_cast<int64_t>(history.size()));
}

int32_t Sampler::SampleAt(std::span<const float> logits, int64_t position) {
  if (params_.temperature <= 0) return Argmax(logits);
  float max_logit = 0;
  const int n = Survivors(logits, &max_logit);
  return GumbelMax(n, max_logit, position);
}

void Sampler::Distribution(std::span<const float> logits, std::span<const TokenId> history, std::span<float> probs,
                           const GrammarMatcher* grammar) {
  assert(probs.size() == cand_.size());
  logits = Penalized(logits, history);
  std::fill(probs.begin(), probs.end(), 0.0f);
  if (grammar != nullptr && !Constrain(logits, *grammar)) return;
  if (params_.temperature <= 0) {
    probs[Argmax(logits)] = 1.0f;
    return;
  }
  const int n = Filter(logits);
  for (int i = 0; i < n; ++i) probs[cand_[i].id] = prob_[i];
}

int32_t Sampler::DrawFrom(std::span<const float> probs) {
  const int i = DrawIndex(probs, rng_.Uniform());
  return i >= 0 ? i : Argmax(probs);
}

}  // namespace kakeya
