// Sampler tests: greedy and non-finite logits, every filter against a naive
// float64 reference, a chi-square check that the seeded choice draws from
// Distribution() over positions and over seeds, that it depends on (seed,
// position) alone, parameter validation and the no-allocation promise of the
// hot loop.
#include "sampling/sampler.h"
#include "stats_util.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <new>
#include <numeric>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "base/error.h"

// Counts heap allocations so a test can check that Sample() makes none
// (docs/design.md, invariant 4). Only operator new is replaced: libstdc++'s
// operator delete releases with free(). ASan supplies its own; skipped there.
#if !defined(__SANITIZE_ADDRESS__)
namespace {
std::atomic<long> g_allocations{0};
}  // namespace
void* operator new(std::size_t size) {
  ++g_allocations;
  if (void* p = std::malloc(size ? size : 1)) return p;
  throw std::bad_alloc();
}
#endif

namespace kakeya {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

SamplingParams Params(float temperature, int top_k, float top_p, float min_p, uint64_t seed = 0) {
  SamplingParams p;
  p.temperature = temperature;
  p.top_k = top_k;
  p.top_p = top_p;
  p.min_p = min_p;
  p.seed = seed;
  return p;
}

SamplingParams NoFilters(float temperature, uint64_t seed = 0) {
  return Params(temperature, 0, 1.0f, 0.0f, seed);
}

std::vector<float> Probs(const SamplingParams& p, const std::vector<float>& logits) {
  Sampler sampler(p, static_cast<int>(logits.size()));
  std::vector<float> probs(logits.size());
  sampler.Distribution(logits, {}, probs);
  return probs;
}

// ---- Naive float64 reference: sort everything, filter, softmax. ----

// Softmax at temperature t of `logits` over `ids`.
std::vector<double> RefSoftmax(const std::vector<float>& logits, const std::vector<int>& ids, double t) {
  double max_logit = -std::numeric_limits<double>::infinity();
  for (int id : ids) max_logit = std::max<double>(max_logit, logits[id]);
  std::vector<double> p;
  for (int id : ids) p.push_back(std::exp(logits[id] / t - max_logit / t));
  const double total = std::accumulate(p.begin(), p.end(), 0.0);
  for (double& x : p) x /= total;
  return p;
}

std::vector<double> RefDistribution(const std::vector<float>& logits, const SamplingParams& sp) {
  std::vector<int> ids;
  for (int i = 0; i < static_cast<int>(logits.size()); ++i) {
    if (std::isfinite(logits[i])) ids.push_back(i);
  }
  std::stable_sort(ids.begin(), ids.end(), [&](int a, int b) { return logits[a] > logits[b]; });
  if (sp.top_k > 0 && sp.top_k < static_cast<int>(ids.size())) ids.resize(sp.top_k);
  if (sp.top_p < 1) {
    const std::vector<double> p = RefSoftmax(logits, ids, 1.0);
    double cum = 0;
    size_t keep = 0;
    while (keep < ids.size()) {
      cum += p[keep++];
      if (cum >= sp.top_p) break;
    }
    ids.resize(keep);
  }
  if (sp.min_p > 0) {
    const std::vector<double> p = RefSoftmax(logits, ids, 1.0);
    const double p_max = *std::max_element(p.begin(), p.end());
    std::vector<int> kept;
    for (size_t i = 0; i < ids.size(); ++i) {
      if (p[i] >= sp.min_p * p_max) kept.push_back(ids[i]);
    }
    ids = kept;
  }
  const std::vector<double> p = RefSoftmax(logits, ids, sp.temperature);
  std::vector<double> out(logits.size(), 0.0);
  for (size_t i = 0; i < ids.size(); ++i) out[ids[i]] = p[i];
  return out;
}

void ExpectMatchesReference(const std::vector<float>& logits, const SamplingParams& p) {
  const std::vector<float> got = Probs(p, logits);
  const std::vector<double> want = RefDistribution(logits, p);
  double sum = 0;
  for (size_t i = 0; i < logits.size(); ++i) {
    sum += got[i];
    ASSERT_NEAR(got[i], want[i], 1e-6) << "token " << i;
    // Same support, and each kept probability accurate to float precision
    // (the 1e-6 bound alone would not notice a wrongly kept tiny token).
    // Below 1e-30 a weight may underflow in float.
    if (want[i] == 0) {
      ASSERT_EQ(got[i], 0.0f) << "token " << i << " should be filtered";
    } else if (want[i] > 1e-30) {
      ASSERT_NEAR(got[i] / want[i], 1.0, 1e-5) << "token " << i;
    }
  }
  ASSERT_NEAR(sum, 1.0, 1e-5);
}

std::vector<float> NormalLogits(int n, float sigma, uint32_t seed) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> normal(0.0f, sigma);
  std::vector<float> logits(n);
  for (float& x : logits) x = normal(gen);
  return logits;
}

// ---- Greedy and non-finite logits ----

TEST(ArgmaxTest, FirstIndexOfTheMaximum) {
  EXPECT_EQ(Argmax(std::vector<float>{1, 3, 2, 3}), 1);
  EXPECT_EQ(Argmax(std::vector<float>{-5}), 0);
  EXPECT_EQ(Argmax(std::vector<float>{-kInf, -kInf}), 0);
  EXPECT_EQ(Argmax(std::vector<float>{-kInf, -kInf, 0.5f, -kInf}), 2);
  EXPECT_EQ(Argmax(std::vector<float>{1, kInf, 2, kInf}), 1);
}

TEST(ArgmaxTest, NaNNeverWins) {
  EXPECT_EQ(Argmax(std::vector<float>{kNaN, 1, 2}), 2);
  EXPECT_EQ(Argmax(std::vector<float>{1, kNaN, 0}), 0);
  EXPECT_EQ(Argmax(std::vector<float>{kNaN, -kInf, kNaN}), 1);
  EXPECT_EQ(Argmax(std::vector<float>{kNaN, kNaN}), 0);
}

TEST(SamplerTest, GreedyIgnoresFiltersAndRng) {
  const std::vector<float> logits = {0.5f, 2.0f, kNaN, 2.0f, -1.0f};
  for (const SamplingParams& p : {Params(0, 0, 1, 0), Params(0, 1, 0.1f, 1), Params(0, 40, 0.95f, 0.05f)}) {
    Sampler sampler(p, 5);
    for (int i = 0; i < 10; ++i) EXPECT_EQ(sampler.SampleAt(logits, i), 1);
    EXPECT_EQ(Probs(p, logits), (std::vector<float>{0, 1, 0, 0, 0}));
  }
}

TEST(SamplerTest, NegativeInfinityAndNaNAreNeverDrawn) {
  std::vector<float> logits(64);
  for (int i = 0; i < 64; ++i) logits[i] = i % 2 ? -kInf : (i % 4 ? kNaN : 0.01f * i);
  Sampler sampler(NoFilters(2.0f, 3), 64);
  for (int i = 0; i < 20000; ++i) {
    const int32_t t = sampler.SampleAt(logits, i);
    ASSERT_TRUE(std::isfinite(logits[t])) << "drew token " << t;
  }
}

TEST(SamplerTest, OnlyOneUsableLogitIsAlwaysDrawn) {
  std::vector<float> logits(100, -kInf);
  logits[37] = -1000.0f;
  logits[5] = kNaN;
  for (const SamplingParams& p : {NoFilters(0.0f), NoFilters(1.5f), Params(0.8f, 40, 0.95f, 0.05f)}) {
    Sampler sampler(p, 100);
    for (int i = 0; i < 100; ++i) ASSERT_EQ(sampler.SampleAt(logits, i), 37);
    EXPECT_EQ(Probs(p, logits)[37], 1.0f);
  }
}

TEST(SamplerTest, NoUsableLogitFallsBackToArgmax) {
  const std::vector<float> logits = {kNaN, -kInf, -kInf};
  Sampler sampler(NoFilters(1.0f), 3);
  EXPECT_EQ(sampler.SampleAt(logits, 0), 1);
  EXPECT_EQ(Probs(NoFilters(1.0f), logits), (std::vector<float>{0, 1, 0}));
}

TEST(SamplerTest, PositiveInfinitySharesTheMass) {
  const std::vector<float> logits = {3, kInf, 1e30f, kInf};
  EXPECT_EQ(Probs(NoFilters(0.7f), logits), (std::vector<float>{0, 0.5f, 0, 0.5f}));
  EXPECT_EQ(Probs(Params(0.7f, 1, 1, 0), logits), (std::vector<float>{0, 1, 0, 0}));
  EXPECT_EQ(Probs(Params(2.0f, 0, 0.3f, 0), logits), (std::vector<float>{0, 1, 0, 0}));
}

// ---- Each filter against the float64 reference ----

// Exact boundaries, where random logits never land: equal logits make the
// masses exact, so these pin ">=" in top-p and min-p and the lower-id rule.
TEST(SamplerTest, TiesAndExactBoundaries) {
  const std::vector<float> equal = {1, 1, 1, 1};
  EXPECT_EQ(Probs(Params(1, 0, 0.5f, 0), equal), (std::vector<float>{0.5f, 0.5f, 0, 0}));
  EXPECT_EQ(Probs(Params(1, 3, 1, 0), equal), (std::vector<float>{1 / 3.0f, 1 / 3.0f, 1 / 3.0f, 0}));
  EXPECT_EQ(Probs(Params(1, 0, 1, 1), std::vector<float>{2, 5, 0, 5}), (std::vector<float>{0, 0.5f, 0, 0.5f}));
  EXPECT_EQ(Probs(Params(1, 2, 1, 0), std::vector<float>{2, 5, 5, 5}), (std::vector<float>{0, 0.5f, 0.5f, 0}));
}

TEST(SamplerTest, DistributionMatchesReference) {
  std::vector<std::vector<float>> logit_sets = {NormalLogits(1000, 3.0f, 1), NormalLogits(1000, 0.5f, 2)};
  // Ties: logits on a 0.5 grid, so top-k and top-p cut through runs of equal
  // logits and must keep the lower ids.
  std::vector<float> tied = NormalLogits(1000, 2.0f, 3);
  for (float& x : tied) x = std::round(x * 2) / 2;
  logit_sets.push_back(tied);
  std::vector<float> holes = NormalLogits(1000, 2.0f, 4);
  for (int i = 0; i < 1000; i += 7) holes[i] = i % 2 ? -kInf : kNaN;
  logit_sets.push_back(holes);

  int combos = 0;
  for (const std::vector<float>& logits : logit_sets) {
    for (float t : {0.25f, 0.8f, 2.0f}) {
      for (int k : {0, 1, 7, 40, 5000}) {
        for (float top_p : {0.05f, 0.5f, 0.9f, 0.95f, 1.0f}) {
          for (float min_p : {0.0f, 0.01f, 0.05f, 0.3f, 1.0f}) {
            SCOPED_TRACE(testing::Message() << "set " << &logits - logit_sets.data() << " temp " << t
                                            << " top_k " << k << " top_p " << top_p << " min_p " << min_p);
            ExpectMatchesReference(logits, Params(t, k, top_p, min_p));
            ++combos;
          }
        }
      }
    }
  }
  EXPECT_EQ(combos, 4 * 3 * 5 * 5 * 5);
}

// A 150k vocabulary with top-k off: top-p's prefix spans several of the
// growing sort chunks (64, 512, 4096, ...), or just one when peaked.
TEST(SamplerTest, LargeVocabularyTopPMatchesReference) {
  const std::vector<float> flat = NormalLogits(150000, 1.0f, 5);
  const std::vector<float> peaked = NormalLogits(150000, 4.0f, 6);
  for (const std::vector<float>* logits : {&flat, &peaked}) {
    ExpectMatchesReference(*logits, Params(1.0f, 0, 0.95f, 0.0f));
    ExpectMatchesReference(*logits, Params(0.8f, 0, 0.5f, 0.05f));
    ExpectMatchesReference(*logits, Params(1.3f, 0, 1.0f, 0.01f));
  }
}

// ---- The seeded choice ----

// The token at a position depends on the logits, the seed and the position
// alone: not on the calls before it, nor on the sampler object; and Sample()
// with a history of n tokens is the choice at position n.
TEST(SamplerTest, TheChoiceIsAFunctionOfSeedAndPosition) {
  const int n = 300;
  const SamplingParams p = Params(0.8f, 40, 0.95f, 0.05f, 11);
  Sampler a(p, n), b(p, n);
  std::vector<int32_t> forward, backward(200);
  const std::vector<float> logits = NormalLogits(n, 1.5f, 3);
  for (int pos = 0; pos < 200; ++pos) forward.push_back(a.SampleAt(logits, pos));
  for (int pos = 199; pos >= 0; --pos) {
    backward[pos] = b.SampleAt(logits, pos);
    b.Uniform();  // the rejection stream is another matter
  }
  EXPECT_EQ(forward, backward);
  EXPECT_GT(std::set<int32_t>(forward.begin(), forward.end()).size(), 5u) << "positions must draw afresh";
  const std::vector<TokenId> history(57, 4);
  EXPECT_EQ(a.Sample(logits, history), forward[57]);
  Sampler other_seed(Params(0.8f, 40, 0.95f, 0.05f, 12), n);
  int same = 0;
  for (int pos = 0; pos < 200; ++pos) same += other_seed.SampleAt(logits, pos) == forward[pos];
  EXPECT_LT(same, 150) << "another seed must draw other tokens";
}

TEST(SamplerTest, DrawFromSkipsNonPositiveEntries) {
  Sampler sampler(NoFilters(1.0f, 9), 5);
  const std::vector<float> probs = {0, -1, kNaN, 2, 0};
  for (int i = 0; i < 100; ++i) ASSERT_EQ(sampler.DrawFrom(probs), 3);
  EXPECT_EQ(sampler.DrawFrom(std::vector<float>{0, 0, 0}), 0);
}

TEST(ChiSquareTest, PValueMatchesTables) {
  // Critical values at 0.001 from standard chi-square tables.
  EXPECT_NEAR(ChiSquarePValue(10.828, 1), 0.001, 2e-6);
  EXPECT_NEAR(ChiSquarePValue(20.515, 5), 0.001, 2e-6);
  EXPECT_NEAR(ChiSquarePValue(24.322, 7), 0.001, 2e-6);
  EXPECT_NEAR(ChiSquarePValue(6.0, 2), std::exp(-3.0), 1e-12);  // df 2: exactly exp(-x/2)
  EXPECT_NEAR(ChiSquarePValue(4.35146, 5), 0.5, 1e-5);          // the median, below a + 1
}

// Gumbel-max draws from the softmax: over positions with one seed, and over
// seeds at one position.
TEST(SamplerTest, DrawsFitTheDistribution) {
  const std::vector<float> logits = {1.0f, 2.5f, 0.3f, 2.0f, -1.0f, 1.8f, 0.9f, -3.0f};
  const SamplingParams p = Params(0.9f, 7, 0.97f, 0.03f, 2024);
  Sampler sampler(p, 8);
  std::vector<float> probs(8);
  sampler.Distribution(logits, {}, probs);
  const std::vector<double> dist(probs.begin(), probs.end());
  const int kept = static_cast<int>(std::count_if(dist.begin(), dist.end(), [](double x) { return x > 0; }));
  ASSERT_GE(kept, 4);  // the filters leave a non-trivial distribution...
  ASSERT_LE(kept, 6);  // ...and do remove something

  std::vector<int> by_position(8, 0), by_seed(8, 0);
  for (int i = 0; i < 200000; ++i) ++by_position[sampler.SampleAt(logits, i)];
  for (int seed = 0; seed < 20000; ++seed) {
    SamplingParams ps = p;
    ps.seed = seed;
    ++by_seed[Sampler(ps, 8).SampleAt(logits, 17)];
  }
  EXPECT_GT(GoodnessOfFitPValue(by_position, dist), 0.001);
  EXPECT_GT(GoodnessOfFitPValue(by_seed, dist), 0.001);

  // The same check rejects a distribution with two tokens' probabilities
  // swapped (tokens 1 and 3, the two most likely, differ by a factor ~1.7).
  std::vector<double> swapped = dist;
  std::swap(swapped[1], swapped[3]);
  EXPECT_LT(GoodnessOfFitPValue(by_position, swapped), 0.001);
}

// ---- Seeds ----

TEST(RngTest, MatchesReferenceXoshiro256StarStar) {
  // First outputs for seed 0, from an independent (Python) implementation of
  // SplitMix64 seeding + xoshiro256**.
  Rng rng(0);
  EXPECT_EQ(rng.Next(), 0x99ec5f36cb75f2b4ULL);
  EXPECT_EQ(rng.Next(), 0xbf6e1f784956452aULL);
  EXPECT_EQ(rng.Next(), 0x1a5f849d4933e6e0ULL);
  Sampler sampler(NoFilters(1.0f, 42), 1);
  EXPECT_EQ(sampler.Uniform(), static_cast<double>(0x15780b2e0c2ec716ULL >> 11) * 0x1.0p-53);
  EXPECT_EQ(sampler.Uniform(), static_cast<double>(0x6104d9866d113a7eULL >> 11) * 0x1.0p-53);
}

std::vector<int32_t> Sequence(uint64_t seed) {
  const std::vector<float> logits = NormalLogits(500, 0.3f, 7);
  Sampler sampler(Params(1.0f, 100, 0.95f, 0.01f, seed), 500);
  std::vector<int32_t> tokens;
  for (int i = 0; i < 1000; ++i) tokens.push_back(sampler.SampleAt(logits, i));
  return tokens;
}

TEST(SamplerTest, SameSeedSameSequence) { EXPECT_EQ(Sequence(123), Sequence(123)); }

TEST(SamplerTest, DifferentSeedsDifferentSequences) {
  EXPECT_NE(Sequence(123), Sequence(124));
  EXPECT_NE(Sequence(0), Sequence(1));
}

// ---- Hot loop ----

TEST(SamplerTest, SampleDoesNotAllocate) {
#if defined(__SANITIZE_ADDRESS__)
  GTEST_SKIP() << "allocation counting is off under AddressSanitizer";
#else
  const std::vector<float> logits = NormalLogits(150000, 2.0f, 8);
  std::vector<float> probs(logits.size());
  SamplingParams penalized = Params(0.8f, 40, 0.95f, 0.05f);
  penalized.repeat_penalty = 1.1f;
  penalized.frequency_penalty = 0.2f;
  penalized.dry_multiplier = 0.8f;
  std::vector<TokenId> history;
  for (int i = 0; i < 3000; ++i) history.push_back(i % 97 * 13);
  for (const SamplingParams& p :
       {Params(0.8f, 40, 0.95f, 0.05f), Params(1.0f, 0, 0.95f, 0.0f), NoFilters(0.7f), penalized}) {
    Sampler sampler(p, static_cast<int>(logits.size()), nullptr, 4096);
    const long before = g_allocations.load();
    for (int i = 0; i < 5; ++i) sampler.Sample(logits, std::span<const TokenId>(history).first(2000 + i));
    sampler.Distribution(logits, history, probs);
    sampler.DrawFrom(probs);
    EXPECT_EQ(g_allocations.load() - before, 0);
  }
#endif
}

// ---- Validation ----

std::string ValidationError(const SamplingParams& p) {
  try {
    p.Validate();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(SamplingParamsTest, RejectsOutOfRangeValuesNamingTheFlag) {
  for (float t : {-0.1f, kNaN, kInf}) {
    EXPECT_NE(ValidationError(Params(t, 40, 0.95f, 0.05f)).find("--temp"), std::string::npos) << t;
  }
  EXPECT_NE(ValidationError(Params(0.8f, -1, 0.95f, 0.05f)).find("--top-k"), std::string::npos);
  for (float top_p : {0.0f, -0.5f, 1.01f, kNaN}) {
    EXPECT_NE(ValidationError(Params(0.8f, 40, top_p, 0.05f)).find("--top-p"), std::string::npos) << top_p;
  }
  for (float min_p : {-0.01f, 1.5f, kNaN}) {
    EXPECT_NE(ValidationError(Params(0.8f, 40, 0.95f, min_p)).find("--min-p"), std::string::npos) << min_p;
  }
}

TEST(SamplingParamsTest, AcceptsBoundaryValues) {
  EXPECT_EQ(ValidationError(SamplingParams{}), "");
  EXPECT_EQ(ValidationError(Params(0, 0, 1, 0)), "");
  EXPECT_EQ(ValidationError(Params(100, 1, 1e-6f, 1)), "");
}

TEST(SamplerTest, ConstructorValidates) {
  EXPECT_THROW(Sampler(Params(0.8f, 40, 2.0f, 0.05f), 10), Error);
  EXPECT_THROW(Sampler(SamplingParams{}, 0), Error);
}

}  // namespace
}  // namespace kakeya
