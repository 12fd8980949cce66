// A naive float64 forward pass of the llama family (llama, qwen2, qwen3),
// written from the architecture description (docs/formats/architectures.md
// 3.2-3.4) in the style of llama2.c's forward(): one token at a time, no
// engine kernels, F32 weights read straight from the GGUF bytes. It is first
// checked against llama.cpp (the fixture README measured float64 to agree to
// ~5e-5), then used as the yardstick for every logit of the engine on the F32
// models.

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <iostream>
#include <memory>
#include <random>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "base/error.h"
#include "fixture_util.h"
#include "reference_math.h"
#include "gguf/gguf.h"
#include "kernels/cpu/matmul.h"
#include "engine/perplexity.h"
#include "model/context.h"
#include "model/model.h"

namespace kakeya {
namespace {

using reference::Accumulate;
using reference::MatVec;

class ReferenceModel {
 public:
  explicit ReferenceModel(const std::string& path) : gguf_(GgufFile::Open(path)) {
    const GgufFile& g = *gguf_;
    const std::string arch(g.GetString("general.architecture"));
    const std::string p = arch + ".";
    if (arch != "llama" && arch != "qwen2" && arch != "qwen3")
      Fail("reference forward: architecture ", arch, " not handled");
    neox_ = arch != "llama";  // llama's converter permutes q/k so adjacent pairs apply
    qk_norm_ = arch == "qwen3";
    n_embd_ = g.GetU32(p + "embedding_length");
    n_layer_ = g.GetU32(p + "block_count");
    n_head_ = g.GetU32(p + "attention.head_count");
    n_head_kv_ = g.FindU32(p + "attention.head_count_kv").value_or(n_head_);
    head_dim_ = g.FindU32(p + "attention.key_length").value_or(n_embd_ / n_head_);
    value_dim_ = g.FindU32(p + "attention.value_length").value_or(head_dim_);
    rope_dims_ = g.FindU32(p + "rope.dimension_count").value_or(head_dim_);
    n_ff_ = g.GetU32(p + "feed_forward_length");
    eps_ = g.GetF32(p + "attention.layer_norm_rms_epsilon");
    rope_base_ = g.FindF32(p + "rope.freq_base").value_or(10000.0f);

    const GgufTensor* embd = g.FindTensor("token_embd.weight");
    if (embd == nullptr) Fail("reference: no token_embd.weight");
    n_vocab_ = static_cast<int>(embd->ne[1]);
    token_embd_ = Weight("token_embd.weight", n_embd_, n_vocab_);
    output_norm_ = Weight("output_norm.weight", n_embd_);
    output_ =
        g.FindTensor("output.weight") ? Weight("output.weight", n_embd_, n_vocab_) : token_embd_;
    for (int il = 0; il < n_layer_; ++il) {
      const std::string b = "blk." + std::to_string(il) + ".";
      Layer L;
      L.attn_norm = Weight(b + "attn_norm.weight", n_embd_);
      L.wq = Weight(b + "attn_q.weight", n_embd_, n_head_ * head_dim_);
      L.wk = Weight(b + "attn_k.weight", n_embd_, n_head_kv_ * head_dim_);
      L.wv = Weight(b + "attn_v.weight", n_embd_, n_head_kv_ * value_dim_);
      L.wo = Weight(b + "attn_output.weight", n_head_ * value_dim_, n_embd_);
      if (qk_norm_) {
        L.q_norm = Weight(b + "attn_q_norm.weight", head_dim_);
        L.k_norm = Weight(b + "attn_k_norm.weight", head_dim_);
      }
      L.ffn_norm = Weight(b + "ffn_norm.weight", n_embd_);
      L.w_gate = Weight(b + "ffn_gate.weight", n_embd_, n_ff_);
      L.w_up = Weight(b + "ffn_up.weight", n_embd_, n_ff_);
      L.w_down = Weight(b + "ffn_down.weight", n_ff_, n_embd_);
      layers_.push_back(L);
    }
  }

  int n_vocab() const { return n_vocab_; }

  // Logits of every position of `tokens`, the first token at position 0.
  std::vector<std::vector<double>> Forward(std::span<const TokenId> tokens) const {
    const int kv_width = n_head_kv_ * head_dim_;
    const int v_width = n_head_kv_ * value_dim_;
    const int group = n_head_ / n_head_kv_;  // query heads per KV head
    const double scale = 1.0 / std::sqrt(double(head_dim_));
    std::vector<std::vector<double>> k_cache(n_layer_), v_cache(n_layer_);  // [pos, kv_width]
    std::vector<std::vector<double>> logits;

    for (int pos = 0; pos < static_cast<int>(tokens.size()); ++pos) {
      // [n_embd] residual stream
      std::vector<double> x(token_embd_ + size_t(tokens[pos]) * n_embd_,
                            token_embd_ + size_t(tokens[pos] + 1) * n_embd_);
      for (int il = 0; il < n_layer_; ++il) {
        const Layer& L = layers_[il];
        std::vector<double> xn = RmsNorm(x, L.attn_norm);
        std::vector<double> q = MatVec(L.wq, xn, n_head_ * head_dim_);  // [n_head, head_dim]
        std::vector<double> k = MatVec(L.wk, xn, kv_width);             // [n_head_kv, head_dim]
        const std::vector<double> v = MatVec(L.wv, xn, v_width);        // [n_head_kv, value_dim]
        if (qk_norm_) {  // qwen3: per-head RMSNorm of q and k, before RoPE
          for (int h = 0; h < n_head_; ++h) HeadNorm(&q[h * head_dim_], L.q_norm);
          for (int h = 0; h < n_head_kv_; ++h) HeadNorm(&k[h * head_dim_], L.k_norm);
        }
        for (int h = 0; h < n_head_; ++h) Rope(&q[h * head_dim_], pos);
        for (int h = 0; h < n_head_kv_; ++h) Rope(&k[h * head_dim_], pos);
        k_cache[il].insert(k_cache[il].end(), k.begin(), k.end());
        v_cache[il].insert(v_cache[il].end(), v.begin(), v.end());

        std::vector<double> attn(n_head_ * value_dim_, 0.0);  // [n_head, value_dim]
        std::vector<double> scores(pos + 1);
        for (int h = 0; h < n_head_; ++h) {
          const int kvh = h / group;
          double max_score = -INFINITY;
          for (int t = 0; t <= pos; ++t) {
            const double* kt = &k_cache[il][size_t(t) * kv_width + kvh * head_dim_];
            double dot = 0;
            for (int d = 0; d < head_dim_; ++d) dot += q[h * head_dim_ + d] * kt[d];
            scores[t] = dot * scale;
            max_score = std::max(max_score, scores[t]);
          }
          double sum = 0;
          for (double& s : scores) sum += (s = std::exp(s - max_score));
          for (int t = 0; t <= pos; ++t) {
            const double* vt = &v_cache[il][size_t(t) * v_width + kvh * value_dim_];
            for (int d = 0; d < value_dim_; ++d) {
              attn[h * value_dim_ + d] += scores[t] / sum * vt[d];
            }
          }
        }
        Accumulate(x, MatVec(L.wo, attn, n_embd_));

        xn = RmsNorm(x, L.ffn_norm);
        std::vector<double> gate = MatVec(L.w_gate, xn, n_ff_);  // [n_ff]
        const std::vector<double> up = MatVec(L.w_up, xn, n_ff_);
        for (int i = 0; i < n_ff_; ++i) gate[i] = gate[i] / (1.0 + std::exp(-gate[i])) * up[i];
        Accumulate(x, MatVec(L.w_down, gate, n_embd_));
      }
      logits.push_back(MatVec(output_, RmsNorm(x, output_norm_), n_vocab_));
    }
    return logits;
  }

 private:
  // F32 weights in GGUF order: a matrix is n_out rows of n_in floats.
  struct Layer {
    const float* attn_norm = nullptr;  // [n_embd]
    const float* wq = nullptr;         // [n_head * head_dim][n_embd]
    const float* wk = nullptr;         // [n_head_kv * head_dim][n_embd]
    const float* wv = nullptr;         // [n_head_kv * value_dim][n_embd]
    const float* wo = nullptr;         // [n_embd][n_head * value_dim]
    const float* q_norm = nullptr;     // [head_dim] (qwen3)
    const float* k_norm = nullptr;     // [head_dim] (qwen3)
    const float* ffn_norm = nullptr;   // [n_embd]
    const float* w_gate = nullptr;     // [n_ff][n_embd]
    const float* w_up = nullptr;       // [n_ff][n_embd]
    const float* w_down = nullptr;     // [n_embd][n_ff]
  };

  // An F32 tensor with ne = [n_in, n_out] (1-D: n_out = 1), read in place.
  const float* Weight(const std::string& name, int64_t n_in, int64_t n_out = 1) const {
    const GgufTensor* t = gguf_->FindTensor(name);
    if (t == nullptr) Fail("reference: missing ", name);
    if (t->type != DType::kF32) Fail("reference: ", name, " is not F32");
    if (t->ne[0] != n_in || t->elements() != n_in * n_out) Fail("reference: shape of ", name);
    return reinterpret_cast<const float*>(t->data);
  }

  std::vector<double> RmsNorm(const std::vector<double>& x, const float* w) const {
    return reference::RmsNorm(x, w, eps_);
  }

  void HeadNorm(double* x, const float* w) const {
    const std::vector<double> y = RmsNorm(std::vector<double>(x, x + head_dim_), w);
    std::copy(y.begin(), y.end(), x);
  }

  // Rotates one head in place, pair i by the angle pos * base^(-2i / rope_dims).
  // NORMAL pairs (x[2i], x[2i+1]); NEOX pairs (x[i], x[i + rope_dims/2]).
  // Elements past rope_dims are not rotated.
  void Rope(double* x, int pos) const {
    const int half = rope_dims_ / 2;
    for (int i = 0; i < half; ++i) {
      const double theta = pos * std::pow(double(rope_base_), -2.0 * i / rope_dims_);
      double& a = neox_ ? x[i] : x[2 * i];
      double& b = neox_ ? x[i + half] : x[2 * i + 1];
      const double a0 = a, b0 = b;
      a = a0 * std::cos(theta) - b0 * std::sin(theta);
      b = a0 * std::sin(theta) + b0 * std::cos(theta);
    }
  }

  std::unique_ptr<GgufFile> gguf_;
  bool neox_ = false;
  bool qk_norm_ = false;
  int n_embd_ = 0, n_layer_ = 0, n_head_ = 0, n_head_kv_ = 0, head_dim_ = 0, value_dim_ = 0;
  int rope_dims_ = 0, n_ff_ = 0, n_vocab_ = 0;
  float eps_ = 0, rope_base_ = 0;
  const float* token_embd_ = nullptr;   // [n_vocab][n_embd]
  const float* output_norm_ = nullptr;  // [n_embd]
  const float* output_ = nullptr;       // [n_vocab][n_embd], token_embd_ when tied
  std::vector<Layer> layers_;
};

// The reference is itself checked against llama.cpp on every prompt position
// (README's float64 figures: up to 4.5e-5, on the 395-token prompt).
constexpr double kReferenceVsLlamaCpp = 1e-4;
// Engine (F32 compute) vs float64: F32 rounding only, expected ~1e-5.
constexpr double kEngineVsReference = 1e-3;

class ReferenceForwardTest : public ::testing::TestWithParam<const char*> {};

TEST_P(ReferenceForwardTest, ReferenceMatchesLlamaCpp) {
  const ReferenceModel ref(fixture::ModelPath(GetParam()));
  for (const char* prompt : {"fox", "fib", "long"}) {
    SCOPED_TRACE(prompt);
    const fixture::RefLogits want = fixture::LoadRefLogits(GetParam(), prompt);
    const std::vector<std::vector<double>> logits = ref.Forward(want.prompt_ids);
    double max_err = 0, max_lse = 0;
    for (size_t i = 0; i < logits.size(); ++i) {
      for (const auto& [id, logit] : want.prompt_steps[i].top) {
        max_err = std::max(max_err, std::abs(logits[i][id] - logit));
      }
      double mx = -INFINITY, sum = 0;
      for (double v : logits[i]) mx = std::max(mx, v);
      for (double v : logits[i]) sum += std::exp(v - mx);
      max_lse = std::max(max_lse, std::abs(mx + std::log(sum) - want.prompt_steps[i].logsumexp));
    }
    std::cout << "[reference] " << GetParam() << " float64 vs llama.cpp, " << prompt << " ("
              << logits.size() << " positions, top-5): max |dlogit| " << max_err << ", logsumexp "
              << max_lse << std::endl;
    RecordProperty(std::string("max_dlogit_vs_llama_cpp_") + prompt, std::to_string(max_err));
    EXPECT_LE(max_err, kReferenceVsLlamaCpp);
    EXPECT_LE(max_lse, kReferenceVsLlamaCpp);
  }
}

// Every logit of every position, not only the top few the fixtures list, on
// every SIMD target this CPU supports (each has its own F32 kernel).
TEST_P(ReferenceForwardTest, EngineMatchesReference) {
  const ReferenceModel ref(fixture::ModelPath(GetParam()));
  const std::unique_ptr<Model> model = Model::Load(fixture::ModelPath(GetParam()));
  ASSERT_EQ(model->hparams().n_vocab, ref.n_vocab());

  std::mt19937 rng(20261123);
  std::uniform_int_distribution<TokenId> any_token(3, ref.n_vocab() - 1);  // past <unk> <s> </s>
  std::vector<TokenId> random_tokens = {1};  // BOS, then random tokens
  while (random_tokens.size() < 40) random_tokens.push_back(any_token(rng));
  const std::vector<TokenId> fox = fixture::LoadRefLogits(GetParam(), "fox").prompt_ids;

  const std::string initial_target = ActiveCpuTarget();
  for (const auto& [name, tokens] : {std::pair{"random", random_tokens}, std::pair{"fox", fox}}) {
    const std::vector<std::vector<double>> want = ref.Forward(tokens);
    for (const std::string& target : SupportedCpuTargets()) {
      SCOPED_TRACE(std::string(name) + " on CPU target " + target);
      ForceCpuTarget(target);
      Context ctx(*model, ContextOptions{.n_ctx = 2048, .max_batch = 512, .n_threads = 2});
      ctx.Forward(tokens, /*all_logits=*/true);
      double max_err = 0;
      int worst_pos = 0, worst_id = 0;
      for (size_t i = 0; i < tokens.size(); ++i) {
        const std::span<const float> got = ctx.logits(static_cast<int>(i));
        for (int id = 0; id < ref.n_vocab(); ++id) {
          const double err = std::abs(got[id] - want[i][id]);
          if (err > max_err) {
            max_err = err;
            worst_pos = static_cast<int>(i);
            worst_id = id;
          }
        }
      }
      std::cout << "[reference] " << GetParam() << " engine (" << target << ") vs float64, " << name
                << " (" << tokens.size() << " tokens, all logits): max |dlogit| " << max_err
                << std::endl;
      RecordProperty("max_dlogit_engine_" + target + "_" + name, std::to_string(max_err));
      EXPECT_LE(max_err, kEngineVsReference)
          << "worst at position " << worst_pos << ", token " << worst_id;
    }
  }
  ForceCpuTarget(initial_target);
}

// kakeya perplexity's scoring (windows from an empty cache, every token after
// the first predicted once) against -log softmax of the float64 reference.
TEST_P(ReferenceForwardTest, CrossEntropyMatchesReference) {
  const ReferenceModel ref(fixture::ModelPath(GetParam()));
  const std::unique_ptr<Model> model = Model::Load(fixture::ModelPath(GetParam()));
  const std::vector<TokenId> fox = fixture::LoadRefLogits(GetParam(), "fox").prompt_ids;
  std::vector<TokenId> fib = fixture::LoadRefLogits(GetParam(), "fib").prompt_ids;
  fib.push_back(2);  // an EOS, as the command appends one
  const std::vector<std::vector<TokenId>> docs = {fox, fib, {1}};  // the last predicts nothing
  constexpr int kWindow = 7;  // several windows per document, a short last one
  double want = 0;
  int64_t want_count = 0;
  for (const std::vector<TokenId>& ids : docs) {
    for (size_t s = 0; s + 1 < ids.size(); s += kWindow) {
      const size_t e = std::min(ids.size() - 1, s + kWindow);
      const std::vector<std::vector<double>> logits =
          ref.Forward(std::vector<TokenId>(ids.begin() + s, ids.begin() + e));
      for (size_t i = 0; i < logits.size(); ++i) {
        double mx = -INFINITY, sum = 0;
        for (double v : logits[i]) mx = std::max(mx, v);
        for (double v : logits[i]) sum += std::exp(v - mx);
        want += mx + std::log(sum) - logits[i][ids[s + i + 1]];
        ++want_count;
      }
    }
  }
  Context ctx(*model, ContextOptions{.n_ctx = kWindow, .max_batch = 3, .n_threads = 2});
  int windows = 0;
  const CrossEntropy got = ScoreDocuments(ctx, docs, kWindow, [&](const CrossEntropy&) { ++windows; });
  EXPECT_EQ(got.predicted, want_count);
  EXPECT_EQ(windows, static_cast<int>((fox.size() - 1 + kWindow - 1) / kWindow + (fib.size() - 1 + kWindow - 1) / kWindow));
  std::cout << "[reference] " << GetParam() << " cross-entropy over " << got.predicted
            << " tokens: engine " << got.nats / got.predicted << " vs float64 " << want / want_count
            << " nats/token" << std::endl;
  EXPECT_NEAR(got.nats / got.predicted, want / want_count, 1e-4);
}

INSTANTIATE_TEST_SUITE_P(F32Models, ReferenceForwardTest,
                         ::testing::Values("tiny-llama-f32", "tiny-qwen3-f32", "tiny-draft-f32"),
                         [](const ::testing::TestParamInfo<const char*>& info) {
                           std::string name = info.param;
                           for (char& ch : name) {
                             if (ch == '-') ch = '_';
                           }
                           return name;
                         });

}  // namespace
}  // namespace kakeya
