// A naive float64 DFlash forward (docs/formats/drafters.md 5.2), for
// dflash_drafter_test: F32 weights read straight from the drafter's and the
// target's GGUF bytes, no engine kernels.
#pragma once

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "gguf/gguf.h"
#include "reference_math.h"
#include "tokenizer/tokenizer.h"

namespace kakeya {

// The DFlash forward written out from the format (docs/formats/drafters.md
// 5.2) in double, over the F32 fixture's weights: it checks the drafter's own
// arithmetic on the taps our target produced, apart from the target's
// rounding, which the comparison with llama.cpp above includes.
class ReferenceDFlash {
 public:
  ReferenceDFlash(const GgufFile& d, const GgufFile& target) : d_(d), target_(target) {
    const std::string p = "dflash.";
    n_embd_ = d.GetU32(p + "embedding_length");
    n_head_ = d.GetU32(p + "attention.head_count");
    n_head_kv_ = d.GetU32(p + "attention.head_count_kv");
    head_dim_ = d.GetU32(p + "attention.key_length");
    n_layer_ = d.GetU32(p + "block_count");
    n_ff_ = d.GetU32(p + "feed_forward_length");
    block_ = d.GetU32(p + "block_size");
    eps_ = d.GetF32(p + "attention.layer_norm_rms_epsilon");
    scale_ = d.GetF32(p + "attention.scale");
    embd_scale_ = d.GetF32(p + "embedding_scale");
    base_ = d.GetF32(p + "rope.freq_base");
    mask_ = d.GetU32("tokenizer.ggml.mask_token_id");
    causal_ = d.FindBool(p + "attention.causal").value_or(false);
    keys_.resize(n_layer_);
    values_.resize(n_layer_);
  }

  // Position p's taps, concatenated in target_layers order: its K and V.
  void Inject(const std::vector<double>& features) {
    const int p = static_cast<int>(keys_[0].size());
    const std::vector<double> g =
        reference::RmsNorm(MatVec("fc.weight", features, n_embd_), W("enc.output_norm.weight"), eps_);
    for (int il = 0; il < n_layer_; ++il) {
      keys_[il].push_back(Keys(il, g, p));
      values_[il].push_back(Values(il, g));
    }
  }

  // Logits of block rows 1 .. rows - 1 after the injected context, of a
  // block of its first `rows` rows (all of them by default).
  std::vector<std::vector<double>> Block(TokenId id_last, int rows = 0) const {
    const int pos0 = static_cast<int>(keys_[0].size()), B = rows > 0 ? rows : block_, D = n_embd_,
              group = n_head_ / n_head_kv_;
    const float* embd = Target("token_embd.weight");
    std::vector<std::vector<double>> x(B);
    for (int r = 0; r < B; ++r) {
      const TokenId t = r == 0 ? id_last : mask_;
      x[r].assign(embd + size_t(t) * D, embd + size_t(t + 1) * D);
      reference::Scale(x[r], embd_scale_);
    }
    for (int il = 0; il < n_layer_; ++il) {
      std::vector<std::vector<double>> q(B), k = keys_[il], v = values_[il];
      for (int r = 0; r < B; ++r) {
        const std::vector<double> h = reference::RmsNorm(x[r], W(Blk(il, "attn_norm.weight")), eps_);
        q[r] = MatVec(Blk(il, "attn_q.weight"), h, n_head_ * head_dim_);
        for (int hd = 0; hd < n_head_; ++hd)
          NormAndRope(&q[r][hd * head_dim_], W(Blk(il, "attn_q_norm.weight")), pos0 + r);
        k.push_back(Keys(il, h, pos0 + r));
        v.push_back(Values(il, h));
      }
      for (int r = 0; r < B; ++r) {  // a row sees the context and the whole block, or the block up to itself
        const size_t n_keys = causal_ ? pos0 + r + 1 : k.size();
        std::vector<double> out(n_head_ * head_dim_);
        for (int hd = 0; hd < n_head_; ++hd) {
          const int kvh = hd / group;
          std::vector<double> score(n_keys);
          double max = -INFINITY, sum = 0;
          for (size_t j = 0; j < n_keys; ++j) {
            double dot = 0;
            for (int e = 0; e < head_dim_; ++e) dot += q[r][hd * head_dim_ + e] * k[j][kvh * head_dim_ + e];
            max = std::max(max, score[j] = dot * scale_);
          }
          for (double& sc : score) sum += (sc = std::exp(sc - max));
          for (size_t j = 0; j < n_keys; ++j) {
            for (int e = 0; e < head_dim_; ++e) out[hd * head_dim_ + e] += score[j] / sum * v[j][kvh * head_dim_ + e];
          }
        }
        reference::Accumulate(x[r], MatVec(Blk(il, "attn_output.weight"), out, D));
      }
      for (int r = 0; r < B; ++r) {
        const std::vector<double> h = reference::RmsNorm(x[r], W(Blk(il, "ffn_norm.weight")), eps_);
        std::vector<double> gate = MatVec(Blk(il, "ffn_gate.weight"), h, n_ff_);
        const std::vector<double> up = MatVec(Blk(il, "ffn_up.weight"), h, n_ff_);
        for (int i = 0; i < n_ff_; ++i) gate[i] = gate[i] / (1 + std::exp(-gate[i])) * up[i];
        reference::Accumulate(x[r], MatVec(Blk(il, "ffn_down.weight"), gate, D));
      }
    }
    std::vector<std::vector<double>> logits;
    for (int r = 1; r < B; ++r) {
      const std::vector<double> h = reference::RmsNorm(x[r], W("output_norm.weight"), eps_);
      logits.push_back(
          reference::MatVec(Target("token_embd.weight"), h, target_.FindTensor("token_embd.weight")->ne[1]));
    }
    return logits;
  }

 private:
  static std::string Blk(int il, const std::string& name) { return "blk." + std::to_string(il) + "." + name; }
  const float* W(const std::string& name) const { return reinterpret_cast<const float*>(d_.FindTensor(name)->data); }
  const float* Target(const std::string& name) const {
    return reinterpret_cast<const float*>(target_.FindTensor(name)->data);
  }
  std::vector<double> MatVec(const std::string& name, const std::vector<double>& x, int n_out) const {
    return reference::MatVec(W(name), x, n_out);
  }
  std::vector<double> Keys(int il, const std::vector<double>& in, int pos) const {
    std::vector<double> k = MatVec(Blk(il, "attn_k.weight"), in, n_head_kv_ * head_dim_);
    for (int hd = 0; hd < n_head_kv_; ++hd) NormAndRope(&k[hd * head_dim_], W(Blk(il, "attn_k_norm.weight")), pos);
    return k;
  }
  // Without attn_v: the key projection, each head RMS-normed without weight.
  std::vector<double> Values(int il, const std::vector<double>& in) const {
    if (d_.FindTensor(Blk(il, "attn_v.weight")) != nullptr)
      return MatVec(Blk(il, "attn_v.weight"), in, n_head_kv_ * head_dim_);
    std::vector<double> v = MatVec(Blk(il, "attn_k.weight"), in, n_head_kv_ * head_dim_);
    for (int hd = 0; hd < n_head_kv_; ++hd) {
      const std::vector<double> n =
          reference::RmsNorm(std::vector<double>(&v[hd * head_dim_], &v[(hd + 1) * head_dim_]), nullptr, eps_);
      std::copy(n.begin(), n.end(), &v[hd * head_dim_]);
    }
    return v;
  }
  // One head: RMSNorm with weight, then NEOX RoPE (pairs i, i + d/2).
  void NormAndRope(double* x, const float* w, int pos) const {
    const int d = head_dim_;
    const std::vector<double> n = reference::RmsNorm(std::vector<double>(x, x + d), w, eps_);
    for (int i = 0; i < d / 2; ++i) {
      const double theta = pos * std::pow(double(base_), -2.0 * i / d);
      x[i] = n[i] * std::cos(theta) - n[i + d / 2] * std::sin(theta);
      x[i + d / 2] = n[i] * std::sin(theta) + n[i + d / 2] * std::cos(theta);
    }
  }

  const GgufFile& d_;
  const GgufFile& target_;
  int n_embd_, n_head_, n_head_kv_, head_dim_, n_layer_, n_ff_, block_;
  float eps_, scale_, embd_scale_, base_;
  TokenId mask_;
  bool causal_;
  std::vector<std::vector<std::vector<double>>> keys_, values_;  // [layer][position][kv width]
};

}  // namespace kakeya
