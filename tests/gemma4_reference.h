// A naive float64 forward pass of gemma4, written from the architecture
// description (docs/formats/architectures.md 3.2, 3.3, 3.5; the layer as
// tests/fixtures/models2/README.md writes it)
// and llama.cpp's src/models/gemma4.cpp, in the style of reference_forward_test.cc:
// one token at a time, no engine kernels, F32 weights read straight from the
// GGUF bytes. It covers everything the gemma4 format has: per-layer sliding
// pattern, KV head counts and head dims; q/k norms and the weightless V norm;
// global layers whose V is the K projection; proportional RoPE; shared-KV
// layers; per-layer embeddings; the dense + MoE feed-forward; output scales;
// the final soft-cap. gemma4_reference_test.cc checks it against llama.cpp
// and then the engine against it.
#pragma once

#include <algorithm>
#include <cmath>
#include <memory>
#include <numeric>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "base/error.h"
#include "gguf/gguf.h"
#include "reference_math.h"
#include "tokenizer/tokenizer.h"

namespace kakeya {

// ---------------------------------------------------------------------------
// GELU

// The tanh approximation, exactly.
inline double GeluTanh(double x) {
  return 0.5 * x * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x)));
}

// x rounded to the nearest F16 value, ties to even (|x| < 65504).
inline double RoundToF16(double x) {
  if (x == 0) return x;
  int exponent;
  std::frexp(x, &exponent);  // |x| = m * 2^exponent, m in [0.5, 1)
  // 11 significant bits; below 2^-14 (subnormals) the spacing stays 2^-24.
  const double spacing = std::ldexp(1.0, std::max(exponent, -13) - 11);
  return std::nearbyint(x / spacing) * spacing;
}

// ggml's CPU GELU (vec.h, GGML_GELU_FP16), which llama.cpp and the engine use:
// the input rounded to F16 and looked up in a table of F16 results; 0 at or
// below -10, the identity at or above 10. The reference emulates it: with the
// exact formula instead it differs from llama.cpp by up to 0.29 on g4dense and,
// through expert choices that flip, by up to 7 on g4moe.
inline double GgmlGelu(double x) {
  if (x <= -10.0) return 0.0;
  if (x >= 10.0) return x;
  return RoundToF16(GeluTanh(RoundToF16(x)));
}

// ---------------------------------------------------------------------------
// The reference

class Gemma4Reference {
 public:
  explicit Gemma4Reference(const std::string& path) : gguf_(GgufFile::Open(path)) {
    const GgufFile& g = *gguf_;
    if (g.GetString("general.architecture") != "gemma4") Fail("gemma4 reference: not gemma4");
    const std::string p = "gemma4.";
    n_embd_ = g.GetU32(p + "embedding_length");
    n_layer_ = g.GetU32(p + "block_count");
    eps_ = g.GetF32(p + "attention.layer_norm_rms_epsilon");
    n_swa_ = g.GetU32(p + "attention.sliding_window");
    // Absent means llama.cpp's hparams default 30, not "off"; 0 would be off.
    final_softcap_ = g.FindF32(p + "final_logit_softcapping").value_or(30.0f);
    n_embd_per_layer_ = g.GetU32(p + "embedding_length_per_layer_input");
    const int n_shared_kv = g.FindU32(p + "attention.shared_kv_layers").value_or(0);
    n_expert_ = g.FindU32(p + "expert_count").value_or(0);
    n_expert_used_ = g.FindU32(p + "expert_used_count").value_or(0);
    n_ff_exp_ = g.FindU32(p + "expert_feed_forward_length").value_or(0);

    const std::vector<bool> sliding = BoolArray(p + "attention.sliding_window_pattern");
    const std::vector<int> n_head = PerLayer(p + "attention.head_count");
    const std::vector<int> n_head_kv = PerLayer(p + "attention.head_count_kv");
    const std::vector<int> n_ff = PerLayer(p + "feed_forward_length");
    const int head_dim_global = g.GetU32(p + "attention.key_length");
    const int head_dim_swa = g.GetU32(p + "attention.key_length_swa");
    if (g.GetU32(p + "attention.value_length") != uint32_t(head_dim_global) ||
        g.GetU32(p + "attention.value_length_swa") != uint32_t(head_dim_swa)) {
      Fail("gemma4 reference: K and V head dims differ");
    }
    // llama.cpp's defaults: n_rot = key_length, n_rot_swa = n_rot, base_swa = base.
    const int n_rot_global = g.FindU32(p + "rope.dimension_count").value_or(head_dim_global);
    const int n_rot_swa = g.FindU32(p + "rope.dimension_count_swa").value_or(n_rot_global);
    const float base_global = g.FindF32(p + "rope.freq_base").value_or(10000.0f);
    const float base_swa = g.FindF32(p + "rope.freq_base_swa").value_or(base_global);

    const GgufTensor* embd = g.FindTensor("token_embd.weight");
    if (embd == nullptr) Fail("gemma4 reference: no token_embd.weight");
    n_vocab_ = static_cast<int>(embd->ne[1]);
    token_embd_ = Weight("token_embd.weight", n_embd_, n_vocab_);
    output_norm_ = Weight("output_norm.weight", n_embd_);
    output_ = g.FindTensor("output.weight") ? Weight("output.weight", n_embd_, n_vocab_)
                                            : token_embd_;  // usually tied
    // The global layers' "proportional" RoPE divisors; never used on sliding layers.
    if (g.FindTensor("rope_freqs.weight")) {
      rope_freqs_ = Weight("rope_freqs.weight", head_dim_global / 2);
    }
    const int E = n_embd_per_layer_;
    if (E > 0) {
      per_layer_token_embd_ = Weight("per_layer_token_embd.weight", E * n_layer_, n_vocab_);
      per_layer_model_proj_ = Weight("per_layer_model_proj.weight", n_embd_, E * n_layer_);
      per_layer_proj_norm_ = Weight("per_layer_proj_norm.weight", E);
    }

    const int first_shared = n_layer_ - n_shared_kv;  // llama.cpp's n_layer_kv_from_start
    for (int il = 0; il < n_layer_; ++il) {
      const std::string b = "blk." + std::to_string(il) + ".";
      Layer L;
      L.sliding = sliding[il];
      L.n_head = n_head[il];
      L.head_dim = L.sliding ? head_dim_swa : head_dim_global;
      L.n_rot = L.sliding ? n_rot_swa : n_rot_global;
      L.rope_base = L.sliding ? base_swa : base_global;
      L.freq_factors = L.sliding ? nullptr : rope_freqs_;
      L.n_ff = n_ff[il];
      // A shared-KV layer computes only Q and attends over an earlier layer's
      // cache: llama.cpp takes first_shared - 2 for sliding and first_shared - 1
      // for global layers, the last layer of each kind with a cache in the
      // E2B/E4B patterns. A file where it would pick a layer of the other kind
      // (other head dims) is refused.
      L.kv_layer = il;
      if (il >= first_shared) {
        L.kv_layer = first_shared - (L.sliding ? 2 : 1);
        if (L.kv_layer < 0 || sliding[L.kv_layer] != L.sliding) {
          Fail("gemma4 reference: layer ", il,
               " would share the cache of a layer of the other kind");
        }
      }
      L.n_head_kv = n_head_kv[L.kv_layer];
      const int q_width = L.n_head * L.head_dim;
      const int kv_width = L.n_head_kv * L.head_dim;

      L.attn_norm = Weight(b + "attn_norm.weight", n_embd_);
      L.wq = Weight(b + "attn_q.weight", n_embd_, q_width);
      L.q_norm = Weight(b + "attn_q_norm.weight", L.head_dim);
      if (L.kv_layer == il) {
        L.wk = Weight(b + "attn_k.weight", n_embd_, kv_width);
        L.k_norm = Weight(b + "attn_k_norm.weight", L.head_dim);
        L.wv = OptionalWeight(b + "attn_v.weight", n_embd_, kv_width);  // absent: V = K projection
      }
      L.wo = Weight(b + "attn_output.weight", q_width, n_embd_);
      L.post_attention_norm = Weight(b + "post_attention_norm.weight", n_embd_);

      L.ffn_norm = Weight(b + "ffn_norm.weight", n_embd_);
      L.ffn_gate = Weight(b + "ffn_gate.weight", n_embd_, L.n_ff);
      L.ffn_up = Weight(b + "ffn_up.weight", n_embd_, L.n_ff);
      L.ffn_down = Weight(b + "ffn_down.weight", L.n_ff, n_embd_);
      L.post_ffw_norm = Weight(b + "post_ffw_norm.weight", n_embd_);

      L.router = OptionalWeight(b + "ffn_gate_inp.weight", n_embd_, n_expert_);
      if (L.router != nullptr) {
        L.router_scale = Weight(b + "ffn_gate_inp.scale", n_embd_);
        L.post_ffw_norm_1 = Weight(b + "post_ffw_norm_1.weight", n_embd_);
        L.pre_ffw_norm_2 = Weight(b + "pre_ffw_norm_2.weight", n_embd_);
        L.post_ffw_norm_2 = Weight(b + "post_ffw_norm_2.weight", n_embd_);
        L.gate_up_exps =
            OptionalWeight(b + "ffn_gate_up_exps.weight", n_embd_, 2 * n_ff_exp_ * n_expert_);
        if (L.gate_up_exps == nullptr) {
          L.gate_exps = Weight(b + "ffn_gate_exps.weight", n_embd_, n_ff_exp_ * n_expert_);
          L.up_exps = Weight(b + "ffn_up_exps.weight", n_embd_, n_ff_exp_ * n_expert_);
        }
        L.down_exps = Weight(b + "ffn_down_exps.weight", n_ff_exp_, n_embd_ * n_expert_);
        L.down_exps_scale = OptionalWeight(b + "ffn_down_exps.scale", n_expert_);
      }
      if (E > 0) {
        L.per_layer_gate = Weight(b + "inp_gate.weight", n_embd_, E);
        L.per_layer_proj = Weight(b + "proj.weight", E, n_embd_);
        L.per_layer_post_norm = Weight(b + "post_norm.weight", n_embd_);
      }
      L.output_scale = OptionalWeight(b + "layer_output_scale.weight", 1);
      layers_.push_back(L);
    }
  }

  int n_vocab() const { return n_vocab_; }

  // Of the last Forward(): the smallest gap, in router logits, between the
  // last expert an MoE layer chose and the best one it left out (infinity
  // without MoE layers). Below ~1e-3, F32 noise can choose the other expert,
  // which changes this and every later position's logits by O(1).
  double min_router_margin() const { return min_router_margin_; }

  // Logits of every position of `tokens`, the first token at position 0.
  std::vector<std::vector<double>> Forward(std::span<const TokenId> tokens) const {
    // Keys and values of every position so far, per layer that has its own
    // cache: [pos][n_head_kv * head_dim], K normed and rotated, V normed.
    std::vector<std::vector<double>> k_cache(n_layer_), v_cache(n_layer_);
    std::vector<std::vector<double>> logits;
    min_router_margin_ = INFINITY;

    for (int pos = 0; pos < static_cast<int>(tokens.size()); ++pos) {
      const TokenId token = tokens[pos];
      // [n_embd] residual stream; ggml scales by sqrtf(n_embd), a float.
      std::vector<double> h = Row(token_embd_, token, n_embd_);
      reference::Scale(h, std::sqrt(float(n_embd_)));
      const std::vector<std::vector<double>> per_layer_inputs = PerLayerInputs(token, h);

      for (int il = 0; il < n_layer_; ++il) {
        const Layer& L = layers_[il];
        const int d = L.head_dim;

        // Attention. Q and K get per-head RMSNorm with weights, then RoPE.
        const std::vector<double> xn = RmsNorm(h, L.attn_norm);
        std::vector<double> q = reference::MatVec(L.wq, xn, L.n_head * d);  // [n_head, head_dim]
        for (int hd = 0; hd < L.n_head; ++hd) {
          HeadNorm(&q[hd * d], d, L.q_norm);
          Rope(&q[hd * d], pos, L);
        }
        if (L.kv_layer == il) {  // shared-KV layers compute only Q
          std::vector<double> k = reference::MatVec(L.wk, xn, L.n_head_kv * d);  // [n_head_kv, head_dim]
          // Without attn_v (HF attention_k_eq_v), V is the K projection as it
          // is before attn_k_norm; V always gets a weightless RMSNorm.
          std::vector<double> v = L.wv ? reference::MatVec(L.wv, xn, L.n_head_kv * d) : k;
          for (int hd = 0; hd < L.n_head_kv; ++hd) {
            HeadNorm(&k[hd * d], d, L.k_norm);
            Rope(&k[hd * d], pos, L);
            HeadNorm(&v[hd * d], d, /*w=*/nullptr);
          }
          k_cache[il].insert(k_cache[il].end(), k.begin(), k.end());
          v_cache[il].insert(v_cache[il].end(), v.begin(), v.end());
        }
        const std::vector<double> attn =
            Attend(q, k_cache[L.kv_layer], v_cache[L.kv_layer], pos, L);
        std::vector<double> a = h;
        reference::Accumulate(a, RmsNorm(reference::MatVec(L.wo, attn, n_embd_), L.post_attention_norm));

        // Feed-forward: the dense GeGLU MLP, plus the experts on MoE layers.
        std::vector<double> y =
            GeGlu(L.ffn_gate, L.ffn_up, L.ffn_down, L.n_ff, RmsNorm(a, L.ffn_norm));
        if (L.router != nullptr) {
          y = RmsNorm(y, L.post_ffw_norm_1);
          reference::Accumulate(y, RmsNorm(Experts(L, a), L.post_ffw_norm_2));
        }
        h = a;
        reference::Accumulate(h, RmsNorm(y, L.post_ffw_norm));

        // Per-layer embeddings (E2B/E4B): a gated projection of this layer's
        // slice of the per-layer input, added after the FFN residual.
        if (n_embd_per_layer_ > 0) {
          std::vector<double> g = reference::MatVec(L.per_layer_gate, h, n_embd_per_layer_);  // [E]
          for (int j = 0; j < n_embd_per_layer_; ++j) {
            g[j] = GgmlGelu(g[j]) * per_layer_inputs[il][j];
          }
          reference::Accumulate(h, RmsNorm(reference::MatVec(L.per_layer_proj, g, n_embd_), L.per_layer_post_norm));
        }
        // HF layer_scalar multiplies the whole residual stream, not a branch.
        if (L.output_scale != nullptr) reference::Scale(h, L.output_scale[0]);
      }

      std::vector<double> out = reference::MatVec(output_, RmsNorm(h, output_norm_), n_vocab_);
      if (final_softcap_ != 0) {
        for (double& z : out) z = final_softcap_ * std::tanh(z / final_softcap_);
      }
      logits.push_back(std::move(out));
    }
    return logits;
  }

 private:
  // F32 weights in GGUF order: a matrix is n_out rows of n_in floats; an
  // expert tensor [n_in, n_out, n_expert] is n_expert such matrices.
  struct Layer {
    bool sliding = false;
    int n_head = 0, n_head_kv = 0, head_dim = 0, n_rot = 0, n_ff = 0;
    float rope_base = 0;
    const float* freq_factors = nullptr;  // [head_dim / 2] rope_freqs on global layers
    int kv_layer = 0;  // whose KV cache this layer attends over (itself unless shared)

    const float* attn_norm = nullptr;            // [n_embd]
    const float* wq = nullptr;                   // [n_head * head_dim][n_embd]
    const float* wk = nullptr;                   // [n_head_kv * head_dim][n_embd]
    const float* wv = nullptr;                   // [n_head_kv * head_dim][n_embd], or none
    const float* wo = nullptr;                   // [n_embd][n_head * head_dim]
    const float* q_norm = nullptr;               // [head_dim]
    const float* k_norm = nullptr;               // [head_dim]
    const float* post_attention_norm = nullptr;  // [n_embd]

    const float* ffn_norm = nullptr;       // [n_embd]
    const float* ffn_gate = nullptr;       // [n_ff][n_embd]
    const float* ffn_up = nullptr;         // [n_ff][n_embd]
    const float* ffn_down = nullptr;       // [n_embd][n_ff]
    const float* post_ffw_norm = nullptr;  // [n_embd]

    const float* router = nullptr;           // [n_expert][n_embd]; MoE layers only
    const float* router_scale = nullptr;     // [n_embd]
    const float* post_ffw_norm_1 = nullptr;  // [n_embd]
    const float* pre_ffw_norm_2 = nullptr;   // [n_embd]
    const float* post_ffw_norm_2 = nullptr;  // [n_embd]
    const float* gate_up_exps = nullptr;     // [n_expert][2 * n_ff_exp][n_embd]: gate rows, then up
    const float* gate_exps = nullptr;        // [n_expert][n_ff_exp][n_embd] (when not fused)
    const float* up_exps = nullptr;          // [n_expert][n_ff_exp][n_embd]
    const float* down_exps = nullptr;        // [n_expert][n_embd][n_ff_exp]
    const float* down_exps_scale = nullptr;  // [n_expert] (optional)

    const float* per_layer_gate = nullptr;       // [E][n_embd]
    const float* per_layer_proj = nullptr;       // [n_embd][E]
    const float* per_layer_post_norm = nullptr;  // [n_embd]
    const float* output_scale = nullptr;         // [1] (optional)
  };

  // An F32 tensor with ne[0] = n_in and n_in * n_out elements, read in place.
  const float* OptionalWeight(const std::string& name, int64_t n_in, int64_t n_out = 1) const {
    const GgufTensor* t = gguf_->FindTensor(name);
    if (t == nullptr) return nullptr;
    if (t->type != DType::kF32) Fail("gemma4 reference: ", name, " is not F32");
    if (t->ne[0] != n_in || t->elements() != n_in * n_out)
      Fail("gemma4 reference: shape of ", name);
    return reinterpret_cast<const float*>(t->data);
  }
  const float* Weight(const std::string& name, int64_t n_in, int64_t n_out = 1) const {
    const float* w = OptionalWeight(name, n_in, n_out);
    if (w == nullptr) Fail("gemma4 reference: missing ", name);
    return w;
  }

  // A key that is either one integer for every layer or an array of n_layer.
  std::vector<int> PerLayer(const std::string& key) const {
    const GgufValue* v = gguf_->Find(key);
    if (v != nullptr && v->type == GgufType::kArray) {
      const std::vector<int64_t> values = gguf_->GetIntArray(key);
      if (values.size() != size_t(n_layer_)) Fail("gemma4 reference: length of ", key);
      return std::vector<int>(values.begin(), values.end());
    }
    return std::vector<int>(n_layer_, int(gguf_->GetU32(key)));
  }

  std::vector<bool> BoolArray(const std::string& key) const {
    const GgufValue* v = gguf_->Find(key);
    if (v == nullptr || v->type != GgufType::kArray || v->elem_type != GgufType::kBool ||
        v->count != uint64_t(n_layer_)) {
      Fail("gemma4 reference: ", key, " must be a bool array of n_layer");
    }
    std::vector<bool> out(n_layer_);
    for (int il = 0; il < n_layer_; ++il) out[il] = v->array_data[il] != 0;
    return out;
  }

  // Row `r` of a [rows][n] matrix, widened.
  static std::vector<double> Row(const float* w, int64_t r, int n) {
    return std::vector<double>(w + r * n, w + (r + 1) * n);
  }

  // Gemma4 norm weights are used as stored: its converter does not add the 1.
  std::vector<double> RmsNorm(const std::vector<double>& x, const float* w) const {
    return reference::RmsNorm(x, w, eps_);
  }

  void HeadNorm(double* x, int d, const float* w) const {
    const std::vector<double> y = RmsNorm(std::vector<double>(x, x + d), w);
    std::copy(y.begin(), y.end(), x);
  }

  // NEOX RoPE of one head in place: pair (x[i], x[i + n_rot/2]) turns by
  // pos * base^(-2i / n_rot) / freq_factor[i]. ggml computes the angle by
  // repeated float multiplication; double here. The global layers' factors are
  // 1 for the first pairs and 1e30 for the rest (angle ~0: "proportional" RoPE).
  void Rope(double* x, int pos, const Layer& L) const {
    const int half = L.n_rot / 2;
    for (int i = 0; i < half; ++i) {
      double theta = pos * std::pow(double(L.rope_base), -2.0 * i / L.n_rot);
      if (L.freq_factors != nullptr) theta /= L.freq_factors[i];
      const double a = x[i], b = x[i + half];
      x[i] = a * std::cos(theta) - b * std::sin(theta);
      x[i + half] = a * std::sin(theta) + b * std::cos(theta);
    }
  }

  // softmax(q . k) v per query head, scale 1.0 (gemma4 has no 1/sqrt(d): its
  // q/k norms set the scale). GQA: consecutive query heads share a KV head.
  // Sliding layers see the keys at pos - n_swa < j <= pos.
  std::vector<double> Attend(const std::vector<double>& q, const std::vector<double>& k_cache,
                             const std::vector<double>& v_cache, int pos, const Layer& L) const {
    const int d = L.head_dim;
    const int kv_width = L.n_head_kv * d;
    const int group = L.n_head / L.n_head_kv;
    const int first = L.sliding ? std::max(0, pos - n_swa_ + 1) : 0;
    std::vector<double> out(L.n_head * d, 0.0);  // [n_head, head_dim]
    std::vector<double> scores(pos + 1);
    for (int hd = 0; hd < L.n_head; ++hd) {
      const int kvh = hd / group;
      double max_score = -INFINITY;
      for (int t = first; t <= pos; ++t) {
        const double* kt = &k_cache[size_t(t) * kv_width + kvh * d];
        double dot = 0;
        for (int i = 0; i < d; ++i) dot += q[hd * d + i] * kt[i];
        scores[t] = dot;
        max_score = std::max(max_score, dot);
      }
      double sum = 0;
      for (int t = first; t <= pos; ++t) sum += (scores[t] = std::exp(scores[t] - max_score));
      for (int t = first; t <= pos; ++t) {
        const double* vt = &v_cache[size_t(t) * kv_width + kvh * d];
        for (int i = 0; i < d; ++i) out[hd * d + i] += scores[t] / sum * vt[i];
      }
    }
    return out;
  }

  // down(gelu(gate x) * up x) with gate/up [n_ff][n_embd] and down [n_embd][n_ff].
  std::vector<double> GeGlu(const float* gate, const float* up, const float* down, int n_ff,
                            const std::vector<double>& x) const {
    std::vector<double> g = reference::MatVec(gate, x, n_ff);
    const std::vector<double> u = reference::MatVec(up, x, n_ff);
    for (int i = 0; i < n_ff; ++i) g[i] = GgmlGelu(g[i]) * u[i];
    return reference::MatVec(down, g, n_embd_);
  }

  // The routed experts of an MoE layer on the attention output `a`, before
  // post_ffw_norm_2. The router reads a weightless-normed `a`, scaled by
  // 1/sqrt(n_embd) and ffn_gate_inp.scale; softmax over all experts, the top
  // expert_used_count kept and renormalized to sum 1; each expert's output is
  // also multiplied by its ffn_down_exps.scale. (The renormalization is a
  // common factor that post_ffw_norm_2 removes again, up to its eps.)
  std::vector<double> Experts(const Layer& L, const std::vector<double>& a) const {
    std::vector<double> router_in = RmsNorm(a, nullptr);
    for (int i = 0; i < n_embd_; ++i) {
      router_in[i] *= L.router_scale[i] / std::sqrt(double(n_embd_));
    }
    const std::vector<double> router_logits = reference::MatVec(L.router, router_in, n_expert_);
    std::vector<double> prob(n_expert_);
    const double max_logit = *std::max_element(router_logits.begin(), router_logits.end());
    double sum = 0;
    for (int e = 0; e < n_expert_; ++e) sum += (prob[e] = std::exp(router_logits[e] - max_logit));
    for (double& p : prob) p /= sum;

    std::vector<int> chosen(n_expert_);
    std::iota(chosen.begin(), chosen.end(), 0);
    std::stable_sort(chosen.begin(), chosen.end(), [&](int x, int y) { return prob[x] > prob[y]; });
    if (n_expert_used_ < n_expert_) {
      min_router_margin_ = std::min(min_router_margin_, router_logits[chosen[n_expert_used_ - 1]] -
                                                            router_logits[chosen[n_expert_used_]]);
    }
    chosen.resize(n_expert_used_);
    double chosen_sum = 0;
    for (int e : chosen) chosen_sum += prob[e];

    const std::vector<double> x = RmsNorm(a, L.pre_ffw_norm_2);
    const size_t expert_matrix = size_t(n_ff_exp_) * n_embd_;
    std::vector<double> out(n_embd_, 0.0);
    for (int e : chosen) {
      const float* gate =
          L.gate_up_exps ? L.gate_up_exps + 2 * expert_matrix * e : L.gate_exps + expert_matrix * e;
      const float* up = L.gate_up_exps ? gate + expert_matrix : L.up_exps + expert_matrix * e;
      const float* down = L.down_exps + expert_matrix * e;
      const double weight =
          prob[e] / chosen_sum * (L.down_exps_scale ? L.down_exps_scale[e] : 1.0f);
      const std::vector<double> y = GeGlu(gate, up, down, n_ff_exp_, x);
      for (int i = 0; i < n_embd_; ++i) out[i] += weight * y[i];
    }
    return out;
  }

  // The per-layer inputs of one token, [n_layer][E] (llama.cpp
  // project_per_layer_inputs): its per_layer_token_embd row times sqrt(E),
  // plus per_layer_model_proj of the scaled token embedding x0 times
  // 1/sqrt(n_embd), each layer's slice RMS-normed with per_layer_proj_norm;
  // the sum times 1/sqrt(2). Empty when the model has none. (The 1/sqrt(n_embd)
  // and 1/sqrt(2) only matter through the eps of the RMSNorms that follow.)
  std::vector<std::vector<double>> PerLayerInputs(TokenId token,
                                                  const std::vector<double>& x0) const {
    const int E = n_embd_per_layer_;
    if (E == 0) return {};
    std::vector<double> projected = reference::MatVec(per_layer_model_proj_, x0, E * n_layer_);
    reference::Scale(projected, 1.0 / std::sqrt(double(n_embd_)));
    const std::vector<double> token_row = Row(per_layer_token_embd_, token, E * n_layer_);
    std::vector<std::vector<double>> inputs(n_layer_);
    for (int il = 0; il < n_layer_; ++il) {
      const std::vector<double> slice(projected.begin() + il * E, projected.begin() + (il + 1) * E);
      const std::vector<double> proj = RmsNorm(slice, per_layer_proj_norm_);
      inputs[il].resize(E);
      for (int j = 0; j < E; ++j) {
        inputs[il][j] = (proj[j] + token_row[il * E + j] * std::sqrt(double(E))) / std::sqrt(2.0);
      }
    }
    return inputs;
  }

  std::unique_ptr<GgufFile> gguf_;
  int n_embd_ = 0, n_layer_ = 0, n_vocab_ = 0, n_swa_ = 0, n_embd_per_layer_ = 0;
  int n_expert_ = 0, n_expert_used_ = 0, n_ff_exp_ = 0;
  float eps_ = 0, final_softcap_ = 0;
  const float* token_embd_ = nullptr;            // [n_vocab][n_embd]
  const float* output_ = nullptr;                // [n_vocab][n_embd], token_embd_ when tied
  const float* output_norm_ = nullptr;           // [n_embd]
  const float* rope_freqs_ = nullptr;            // [head_dim_global / 2] (optional)
  const float* per_layer_token_embd_ = nullptr;  // [n_vocab][n_layer * E]
  const float* per_layer_model_proj_ = nullptr;  // [n_layer * E][n_embd]
  const float* per_layer_proj_norm_ = nullptr;   // [E]
  std::vector<Layer> layers_;
  mutable double min_router_margin_ = INFINITY;
};

}  // namespace kakeya
