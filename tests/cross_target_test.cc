// ADR 0014: every compiled CPU target computes the same bits. For each fixture
// model (every architecture and weight type) and each target this CPU runs,
// the logits of a prompt, of 64 greedy steps and the tokens of a seeded,
// penalized sampled run must equal the first target's byte for byte. The
// first target is the fastest this CPU has, so a kernel that drifts on any
// slower target (AVX2, the portable one) fails here.
//
// Across machines: KAKEYA_WRITE_TARGET_HASHES=<file> writes one hash per
// model (of all of the above); KAKEYA_EXPECT_TARGET_HASHES=<file> checks this
// run against such a file. scripts/test-arm.sh writes it with the x86 build
// and checks the ARM targets under qemu against it.

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "cache/kv_cache.h"
#include "fixture_util.h"
#include "kernels/cpu/kv_types.h"
#include "kernels/cpu/matmul.h"
#include "model/context.h"
#include "model/model.h"
#include "sampling/sampler.h"

namespace kakeya {
namespace {

constexpr int kPrompt = 24;
// The codec keeps the latest kCodecExact positions exact: a prompt this long
// has coded blocks for the greedy steps to read.
constexpr int kLongPrompt = kCodecExact + 64;
constexpr int kGreedySteps = 64;
constexpr int kSampledSteps = 32;

struct Trace {
  std::vector<float> logits;  // the prompt's rows, then one row per greedy step
  std::vector<TokenId> greedy, sampled;
};

std::vector<TokenId> Prompt(const Model& model, int n) {
  std::mt19937 rng(44);
  std::uniform_int_distribution<TokenId> any_token(3, model.hparams().n_vocab - 1);
  std::vector<TokenId> tokens = {1};  // BOS
  while (static_cast<int>(tokens.size()) < n) tokens.push_back(any_token(rng));
  return tokens;
}

void Append(std::vector<float>& out, std::span<const float> row) { out.insert(out.end(), row.begin(), row.end()); }

Trace Run(const Model& model, KvType cache_k, KvType cache_v, int n_prompt) {
  const ContextOptions options{
      .n_ctx = 512, .max_batch = kLongPrompt, .n_threads = 2, .cache_type_k = cache_k, .cache_type_v = cache_v};
  const std::vector<TokenId> prompt = Prompt(model, n_prompt);
  Trace t;
  {
    Context ctx(model, options);
    ctx.Forward(prompt, true);
    for (int r = 0; r < ctx.n_logit_rows(); ++r) Append(t.logits, ctx.logits(r));
    for (int step = 0; step < kGreedySteps; ++step) {
      const TokenId next = Argmax(ctx.logits(ctx.n_logit_rows() - 1));
      t.greedy.push_back(next);
      ctx.Forward({&next, 1}, false);
      Append(t.logits, ctx.logits(0));
    }
  }
  // Sampling with every transcendental the sampler has: temperature (exp),
  // Gumbel noise (log), min-p (log), DRY (pow) and the repetition penalty.
  SamplingParams p;
  p.temperature = 0.9f;
  p.seed = 7;
  p.repeat_penalty = 1.1f;
  p.dry_multiplier = 0.8f;
  Sampler sampler(p, model.hparams().n_vocab);
  Context ctx(model, options);
  std::vector<TokenId> history = prompt;
  ctx.Forward(prompt, false);
  for (int step = 0; step < kSampledSteps; ++step) {
    const TokenId next = sampler.Sample(ctx.logits(0), history);
    t.sampled.push_back(next);
    history.push_back(next);
    ctx.Forward({&next, 1}, false);
  }
  return t;
}

uint64_t Fnv1a(const void* data, size_t n, uint64_t h) {
  const auto* p = static_cast<const uint8_t*>(data);
  for (size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 0x100000001b3ULL;
  return h;
}

uint64_t Hash(const Trace& t) {
  uint64_t h = 0xcbf29ce484222325ULL;
  h = Fnv1a(t.logits.data(), t.logits.size() * sizeof(float), h);
  h = Fnv1a(t.greedy.data(), t.greedy.size() * sizeof(TokenId), h);
  return Fnv1a(t.sampled.data(), t.sampled.size() * sizeof(TokenId), h);
}

::testing::AssertionResult SameTrace(const Trace& want, const Trace& got) {
  if (want.logits.size() != got.logits.size()) return ::testing::AssertionFailure() << "different logit counts";
  if (std::memcmp(want.logits.data(), got.logits.data(), want.logits.size() * sizeof(float)) != 0) {
    size_t first = 0;
    while (std::memcmp(&want.logits[first], &got.logits[first], sizeof(float)) == 0) ++first;
    double max_diff = 0;
    for (size_t i = 0; i < want.logits.size(); ++i) max_diff = std::max(max_diff, std::abs(double(want.logits[i]) - got.logits[i]));
    return ::testing::AssertionFailure() << "logits differ, first at float " << first << " (" << want.logits[first]
                                         << " vs " << got.logits[first] << "), max |diff| " << max_diff;
  }
  if (want.greedy != got.greedy) return ::testing::AssertionFailure() << "greedy tokens differ";
  if (want.sampled != got.sampled) return ::testing::AssertionFailure() << "sampled tokens differ";
  return ::testing::AssertionSuccess();
}

std::string HashLine(const std::string& name, uint64_t hash) {
  std::ostringstream s;
  s << name << ' ' << std::hex << hash;
  return s.str();
}

// "folder/name" under tests/fixtures, or "shipped/name" under models/.
std::string PathOf(const std::string& param) {
  const size_t slash = param.find('/');
  const std::string folder = param.substr(0, slash), name = param.substr(slash + 1);
  if (folder == "shipped") return std::string(KAKEYA_FIXTURES) + "/../../models/" + name + ".gguf";
  return fixture::ModelPath(name, folder);
}

class CrossTargetTest : public ::testing::TestWithParam<const char*> {};

void CheckModel(const std::string& param, KvType cache_k, KvType cache_v, int n_prompt, const std::string& hash_name) {
  const std::unique_ptr<Model> model = Model::Load(PathOf(param));
  const std::string initial_target = ActiveCpuTarget();
  const std::vector<std::string> targets = SupportedCpuTargets();
  ASSERT_FALSE(targets.empty());
  ForceCpuTarget(targets.front());
  const Trace want = Run(*model, cache_k, cache_v, n_prompt);
  for (size_t i = 1; i < targets.size(); ++i) {
    ForceCpuTarget(targets[i]);
    EXPECT_TRUE(SameTrace(want, Run(*model, cache_k, cache_v, n_prompt))) << targets[i] << " against " << targets.front();
  }
  ForceCpuTarget(initial_target);

  const std::string line = HashLine(hash_name, Hash(want));
  if (const char* out = std::getenv("KAKEYA_WRITE_TARGET_HASHES")) {
    std::ofstream(out, std::ios::app) << line << '\n';
  }
  if (const char* in = std::getenv("KAKEYA_EXPECT_TARGET_HASHES")) {
    std::ifstream file(in);
    ASSERT_TRUE(file) << "cannot read " << in;
    std::map<std::string, std::string> expected;
    for (std::string name, hash; file >> name >> hash;) expected[name] = name + ' ' + hash;
    ASSERT_TRUE(expected.count(hash_name)) << in << " has no hash for " << hash_name;
    EXPECT_EQ(expected[hash_name], line) << "this machine's bits differ from those that wrote " << in;
  }
}

TEST_P(CrossTargetTest, SameBitsOnEveryTarget) {
  std::string name = GetParam();
  CheckModel(name, KvType::kF32, KvType::kF32, kPrompt, name);
}

// The cache types that round (F16, BF16), quantize or code keys and values, on
// one model per attention layout (plain with q/k norms; sliding window with
// soft-capping), with a prompt long enough to code blocks.
TEST(CrossTargetCacheTypes, SameBitsOnEveryTarget) {
  const std::pair<const char*, const char*> types[] = {
      {"f16", "f16"}, {"bf16", "bf16"}, {"q8_0", "q8_0"}, {"q4_0", "q4_0"}, {"kakeya4", "kakeya3"}};
  for (const char* model : {"models/tiny-qwen3-f32", "models/tiny-gemma2-f32"}) {
    for (const auto& [k, v] : types) {
      const std::string name = std::string(model) + ":" + k + "/" + v;
      SCOPED_TRACE(name);
      CheckModel(model, *ParseKvType(k), *ParseKvType(v), kLongPrompt, name);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Fixtures, CrossTargetTest,
                         ::testing::Values("models/tiny-llama-f32", "models/tiny-llama-f16", "models/tiny-llama-bf16",
                                           "models/tiny-llama-q8_0", "models/tiny-llama-q4_k_m", "models/tiny-llama-q4_0",
                                           "models/tiny-llama-q6_k", "models/tiny-qwen3-f32", "models/tiny-gemma2-f32",
                                           "models/tiny-gemma3-f32", "models/tiny-draft-f32", "models2/g4moe-f32",
                                           "models2/g4moe-q8_0", "models2/g4dense-f32", "models2/q3moe-f16",
                                           "models2/q3moe-q8_0", "models2/glm4moe-mtp-f32", "models3/ds4-f32",
                                           "models3/ds4-q8_0", "models4/qwen35-f32", "models4/qwen35moe-q8_0",
                                           "shipped/kakeya-pystdlib"),
                         [](const ::testing::TestParamInfo<const char*>& info) {
                           return fixture::ModelParamName(info.param);
                         });

}  // namespace
}  // namespace kakeya
