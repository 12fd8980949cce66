// KV caches with O(1) rollback (docs/design.md, invariant 3): the ring layers of
// sliding-window models must let rejected rows be dropped at any time, before
// and after the ring wraps, without changing a single bit of later logits.
#include "cache/kv_cache.h"

#include <cstring>
#include <filesystem>
#include <map>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "base/error.h"
#include "engine/generate.h"
#include "gguf/gguf.h"
#include "gguf_copy.h"
#include "kernels/cpu/attention.h"
#include "kernels/cpu/ops.h"
#include "model/context.h"
#include "plain_decoding.h"

namespace kakeya {
namespace {

const std::string kGemma3 = std::string(KAKEYA_FIXTURES) + "/models/tiny-gemma3-f32.gguf";

// --- The cache alone: random append / trim / commit against a shadow -------

// Each written row is filled with a value naming (position, generation); the
// shadow remembers the latest value per position. Every position a query at
// n_past - 1 can see must still hold its latest value.
TEST(KvCacheProperty, RandomAppendTrimCommitKeepsEveryVisibleRow) {
  std::mt19937 rng(11);
  for (int window : {0, 4, 7, 32}) {
    for (int max_pending : {1, 5, 16}) {
      SCOPED_TRACE("window " + std::to_string(window) + " max_pending " + std::to_string(max_pending));
      const int n_ctx = 400;
      KvCache cache({LayerCacheShape{window, 1, 2, 1}}, n_ctx, max_pending);
      LayerCache& layer = cache.layer(0);
      std::map<int, float> shadow;  // position -> latest value written
      float generation = 0;
      for (int op = 0; op < 3000; ++op) {
        const int choice = static_cast<int>(rng() % 4);
        if (choice <= 1) {  // append
          const int n = 1 + static_cast<int>(rng() % max_pending);
          if (!cache.CanAppend(n)) {
            cache.Clear();
            shadow.clear();
            continue;
          }
          for (int i = 0; i < n; ++i) {
            const int pos = cache.n_past() + i;
            generation += 1;
            const float k[2] = {static_cast<float>(pos), generation}, v[1] = {generation};
            layer.Write(pos, k, v);
            shadow[pos] = generation;
          }
          const int committed_before = cache.n_committed();
          cache.Append(n);
          EXPECT_GE(cache.n_committed(), committed_before);
          EXPECT_LE(cache.n_pending(), max_pending);
        } else if (choice == 2) {  // trim some pending rows
          const int n = cache.n_pending() == 0 ? 0 : static_cast<int>(rng() % (cache.n_pending() + 1));
          cache.Trim(n);
          EXPECT_THROW(cache.Trim(cache.n_pending() + 1), Error);
        } else {
          cache.Commit();
          EXPECT_EQ(cache.n_pending(), 0);
        }
        if (cache.n_past() == 0) continue;
        const int last = cache.n_past() - 1;
        for (int pos = layer.FirstVisible(last); pos <= last; ++pos) {
          const KvView kv = layer.view();
          const float* k = reinterpret_cast<const float*>(kv.k.at(layer.Slot(pos), 0));
          ASSERT_EQ(k[0], static_cast<float>(pos)) << "position " << pos << " was overwritten";
          ASSERT_EQ(k[1], shadow[pos]);
          ASSERT_EQ(reinterpret_cast<const float*>(kv.v.at(layer.Slot(pos), 0))[0], shadow[pos]);
        }
      }
    }
  }
}

TEST(KvCache, RingMemoryIsBoundedByWindowPlusPending) {
  KvCache cache({LayerCacheShape{32, 1, 64, 64}, LayerCacheShape{0, 1, 64, 64}}, 100000, 16);
  EXPECT_EQ(cache.layer(0).capacity(), 32 + 16);
  EXPECT_EQ(cache.layer(1).capacity(), 100000);
  EXPECT_EQ(cache.ring_bytes(), size_t{48} * 128 * sizeof(float));
  EXPECT_EQ(cache.full_bytes_per_token(), size_t{128} * sizeof(float));
}

// What KvCacheBytes promises before allocating is what the cache holds, for
// every kind of layer (full, ring, coded, shared) and type.
TEST(KvCache, BytesKnownBeforeAllocatingAreTheCachesBytes) {
  const std::vector<LayerCacheShape> layers = {
      {0, 2, 64, 64, KvType::kF16, KvType::kQ8_0},      {32, 1, 64, 32, KvType::kQ4_0, KvType::kF32},
      {0, 2, 64, 64, KvType::kKakeya4, KvType::kKakeya3}, {16, 2, 64, 64, KvType::kKakeya4, KvType::kKakeya3},
      {0},
  };
  for (int n_ctx : {40, 1000, 5000}) {
    const KvCache cache(layers, n_ctx, 16);
    EXPECT_EQ(KvCacheBytes(layers, n_ctx, 16), cache.bytes()) << n_ctx;
  }
}

// --- Through the model: a gemma3 with windows 4, 7 and 32 ------------------

// Copies a GGUF file, replacing the value of one u32 key.
void CopyWithU32(const std::string& from, const std::string& to, const std::string& key, uint32_t value) {
  const std::unique_ptr<GgufFile> src = GgufFile::Open(from);
  GgufWriter w;
  CopyMetadata(*src, w, [&](GgufWriter& out, const GgufKv& kv) {
    if (kv.key != key) return false;
    out.SetU32(kv.key, value);
    return true;
  });
  for (const GgufTensor& t : src->tensors()) {
    w.AddTensor(t.name, t.type, std::vector<int64_t>(t.ne, t.ne + t.n_dims), t.data, t.nbytes);
  }
  w.Write(to);
}

std::string GemmaWithWindow(int window) {
  const std::string path = (std::filesystem::temp_directory_path() /
                            ("kakeya_gemma3_w" + std::to_string(window) + "_" + std::to_string(getpid()) + ".gguf"))
                               .string();
  CopyWithU32(kGemma3, path, "gemma3.attention.sliding_window", window);
  return path;
}

bool SameBits(std::span<const float> a, std::span<const float> b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// Speculative-style blocks of 1..16 rows (a prefix of true tokens, then
// garbage), trimmed and committed at random, on a context whose rings are
// W + 16 rows and wrap many times. Every true row's logits must equal, bit for
// bit, those of the same position computed without any ring wrap or rollback.
TEST(KvCacheModel, RandomBlocksTrimsAndCommitsMatchThePlainPathBitForBit) {
  for (int window : {4, 7, 32}) {
    SCOPED_TRACE("window " + std::to_string(window));
    const std::string path = GemmaWithWindow(window);
    const std::unique_ptr<Model> model = Model::Load(path);
    std::filesystem::remove(path);
    ASSERT_EQ(model->layers[0].attn.window, window);  // gemma3: layer 0 slides
    const int n_vocab = model->hparams().n_vocab;
    constexpr int kLen = 240;
    constexpr int kBlock = 16;

    std::mt19937 rng(100 + window);
    std::uniform_int_distribution<TokenId> any_token(3, n_vocab - 1);
    std::vector<TokenId> tokens = {1};
    while (tokens.size() < kLen) tokens.push_back(any_token(rng));

    // The plain path: a cache big enough that nothing wraps.
    Context plain(*model, ContextOptions{.n_ctx = kLen, .max_batch = kLen, .n_threads = 2});
    plain.Forward(tokens, true);
    ASSERT_FALSE(plain.cache().layer(0).capacity() < kLen);

    Context spec(*model, ContextOptions{.n_ctx = kLen + kBlock, .max_batch = kBlock, .n_threads = 2});
    ASSERT_EQ(spec.cache().layer(0).capacity(), window + kBlock);
    int committed = 0;
    int checked_rows = 0;
    while (committed < kLen) {
      const int block = 1 + static_cast<int>(rng() % kBlock);
      const int good = std::min<int>(kLen - committed, 1 + static_cast<int>(rng() % block));
      std::vector<TokenId> rows(tokens.begin() + committed, tokens.begin() + committed + good);
      while (static_cast<int>(rows.size()) < block) rows.push_back(any_token(rng));
      spec.Forward(rows, true);
      for (int i = 0; i < good; ++i, ++checked_rows) {
        ASSERT_TRUE(SameBits(spec.logits(i), plain.logits(committed + i)))
            << "position " << committed + i << " differs";
      }
      // Keep a random prefix of the true rows, like a verifier accepting k.
      const int keep = 1 + static_cast<int>(rng() % good);
      spec.Trim(block - keep);
      spec.Commit();
      committed += keep;
      ASSERT_EQ(spec.n_committed(), committed);
      ASSERT_EQ(spec.n_past(), committed);
    }
    EXPECT_GT(checked_rows, kLen);
  }
}

// The regression this cache exists for: 3000 greedy tokens on a sliding-window
// model where every step also appends 1..15 garbage rows and trims them again
// must give exactly the tokens of plain generation.
TEST(KvCacheModel, SlowGreedyWithGarbageRowsEveryStepEqualsPlainGeneration) {
  const std::unique_ptr<Model> model = Model::Load(kGemma3);
  constexpr int kTokens = 3000;
  const std::vector<TokenId> prompt = model->tokenizer().Encode("Once upon a time", true, true);
  const int n_ctx = static_cast<int>(prompt.size()) + kTokens + 16;

  Context plain_ctx(*model, ContextOptions{.n_ctx = n_ctx, .max_batch = 16, .n_threads = 2});
  GenerateOptions options;
  options.n_predict = kTokens;
  options.ignore_eos = true;
  options.sampling.temperature = 0;
  const GenerateResult plain = DecodePlainly(plain_ctx, prompt, options, nullptr);
  ASSERT_EQ(static_cast<int>(plain.tokens.size()), kTokens);

  Context ctx(*model, ContextOptions{.n_ctx = n_ctx, .max_batch = 16, .n_threads = 2});
  ctx.Forward(prompt, false);
  ctx.Commit();
  std::mt19937 rng(5);
  std::uniform_int_distribution<TokenId> any_token(3, model->hparams().n_vocab - 1);
  std::vector<TokenId> generated;
  TokenId next = Argmax(ctx.logits(0));
  while (true) {
    generated.push_back(next);
    ASSERT_EQ(next, plain.tokens[generated.size() - 1]) << "token " << generated.size() - 1;
    if (static_cast<int>(generated.size()) == kTokens) break;
    std::vector<TokenId> block = {next};
    const int garbage = 1 + static_cast<int>(rng() % 15);
    for (int g = 0; g < garbage; ++g) block.push_back(any_token(rng));
    ctx.Forward(block, true);
    next = Argmax(ctx.logits(0));
    ctx.Trim(garbage);
    ctx.Commit();
    ASSERT_EQ(ctx.n_committed(), static_cast<int>(prompt.size() + generated.size()));
  }
  EXPECT_GT(ctx.n_committed(), 50 * ctx.cache().layer(0).capacity());  // the rings wrapped many times
}

// Hidden-state taps: tap 0 is the (scaled) embedding, the last tap normed and
// projected gives the logits, and taps do not depend on the batch split.
TEST(HiddenTaps, AreTheResidualStreamAndBatchInvariant) {
  const std::unique_ptr<Model> model = Model::Load(kGemma3);
  const HParams& hp = model->hparams();
  const std::vector<TokenId> tokens = {1, 450, 4996, 3347, 113, 1701, 123};
  const int n = static_cast<int>(tokens.size());

  const std::vector<int> layers = {0, 3, hp.n_layer};
  Context whole(*model, ContextOptions{.n_ctx = 64, .max_batch = 16, .n_threads = 2});
  whole.SetHiddenTaps({hp.n_layer, 3, 0, 3});  // order and duplicates do not matter
  whole.Forward(tokens, true);

  Context split(*model, ContextOptions{.n_ctx = 64, .max_batch = 16, .n_threads = 1});
  split.SetHiddenTaps(layers);
  for (int i = 0; i < n; ++i) {
    split.Forward(std::span<const TokenId>(tokens).subspan(i, 1), false);
    for (int t = 0; t < 3; ++t) {
      EXPECT_TRUE(SameBits(split.tap(layers[t], 0), whole.tap(layers[t], i))) << "tap " << t << " row " << i;
    }
  }
  // Rows without logits keep their taps too (a prefill feeds a drafter).
  Context prefill(*model, ContextOptions{.n_ctx = 64, .max_batch = 16, .n_threads = 2});
  prefill.SetHiddenTaps(layers);
  prefill.Forward(tokens, false);
  for (int t = 0; t < 3; ++t) {
    for (int i = 0; i < n; ++i) EXPECT_TRUE(SameBits(prefill.tap(layers[t], i), whole.tap(layers[t], i))) << "tap " << t << " row " << i;
  }

  // Tap 0 = token_embd row * sqrt(n_embd) (F32 weights: exact).
  const float* embd = static_cast<const float*>(model->token_embd.data) + size_t(tokens[2]) * hp.n_embd;
  for (int d = 0; d < hp.n_embd; ++d) EXPECT_FLOAT_EQ(whole.tap(0, 2)[d], embd[d] * hp.embd_scale);

  // The final tap, normed and projected, is the logits row.
  std::vector<float> normed(hp.n_embd), logits(hp.n_vocab);
  RmsNorm(whole.tap(hp.n_layer, 4).data(), model->output_norm, hp.n_embd, hp.norm_eps, normed.data());
  std::vector<uint8_t> scratch(MatMulScratchBytes(model->output.type, hp.n_embd, 1) + 64);
  void* aligned = reinterpret_cast<void*>((reinterpret_cast<uintptr_t>(scratch.data()) + 63) & ~uintptr_t{63});
  ThreadPool pool(1);
  MatMul(model->output, normed.data(), 1, logits.data(), aligned, pool);
  if (hp.final_softcap > 0) SoftCap(logits.data(), hp.n_vocab, hp.final_softcap);
  EXPECT_TRUE(SameBits(logits, whole.logits(4)));

  EXPECT_THROW(whole.tap(1, 0), Error);
  EXPECT_THROW(whole.SetHiddenTaps({hp.n_layer + 1}), Error);
}

}  // namespace
}  // namespace kakeya
