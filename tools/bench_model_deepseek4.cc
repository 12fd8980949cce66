// See bench_model_deepseek4.h.
#include "bench_model_deepseek4.h"

#include <numeric>
#include <random>

#include "base/error.h"
#include "bench_model_types.h"

namespace kakeya {

Deepseek4Shape Deepseek4BenchShape() {
  Deepseek4Shape s;
  s.n_embd = 1024, s.n_head = 16, s.head_dim = 512, s.n_rot = 64, s.q_lora = 512;
  s.o_groups = 4, s.o_lora = 256, s.window = 128, s.n_vocab = 129280;
  s.n_expert = 64, s.n_expert_used = 6, s.n_ff_exp = 512, s.n_shared = 1, s.n_hash_layers = 3;
  s.indexer_heads = 16, s.indexer_dim = 128, s.indexer_top_k = 512;
  s.ratios = {0, 0, 4, 128, 4, 128, 4, 128, 4, 128, 4, 128};
  s.mtp = true;  // for bench spec --spec mtp (the real main file keeps it in a sidecar)
  return s;
}

Deepseek4Shape Deepseek4FixtureShape() {
  Deepseek4Shape s;
  s.n_embd = 64, s.n_head = 4, s.head_dim = 64, s.n_rot = 32, s.q_lora = 32;
  s.o_groups = 2, s.o_lora = 32, s.window = 32, s.n_vocab = 8000;
  s.n_expert = 8, s.n_expert_used = 2, s.n_ff_exp = 32, s.n_shared = 1, s.n_hash_layers = 2;
  // The indexer's key length differs from the head's: with them equal, the
  // reference's MTP context dies (SIGFPE) forcing a key rotation it has no layer for.
  // 16 indexer heads: with 4, every head's score of a block is below zero
  // (ReLU 0) for one block in 16, and the top-k then ties at exactly 0,
  // which the two engines break differently.
  s.indexer_heads = 16, s.indexer_dim = 128, s.indexer_top_k = 8;
  s.ratios = {0, 4, 128, 4, 128, 0};
  s.mtp = true;
  // Tight clamps, so that random activations reach them.
  s.clamp_experts = 1.5f, s.clamp_shared = 2.5f;
  s.yarn_factor = 8.0f, s.yarn_orig_ctx = 256;
  return s;
}

void CheckDeepseek4Shape(const Deepseek4Shape& s) {
  if (s.n_layer() < 1) Fail("deepseek4: no layers");
  if (s.n_head % s.o_groups != 0) Fail("deepseek4: heads ", s.n_head, " are not a multiple of the output groups");
  if (s.n_rot % 2 != 0 || s.n_rot > s.head_dim || s.n_rot > s.indexer_dim) {
    Fail("deepseek4: rope dims ", s.n_rot, " must be even and at most the head and indexer key lengths");
  }
  if (s.indexer_dim % 64 != 0) Fail("deepseek4: the indexer key length must be a multiple of 64");
  if (s.n_expert_used > s.n_expert) Fail("deepseek4: experts used exceed experts");
  if (s.n_hash_layers >= s.n_layer()) Fail("deepseek4: every layer routes by hash");
  for (int r : s.ratios) {
    if (r != 0 && r != 4 && r != 128) Fail("deepseek4: compression ratio ", r, " is not 0, 4 or 128");
  }
  if (s.n_vocab < 260) Fail("deepseek4: the vocabulary has 259 special and byte tokens");
}

namespace {

// The layers' keys under prefix `a`: a deepseek4 file's (`target`: with its
// MTP block count, YaRN, the indexer and the compressed layers' RoPE, in the
// order the fixtures were written in) or a DSpark drafter's stages'.
void SetLayerKeys(GgufWriter& w, const std::string& a, const Deepseek4Shape& s, bool target, int n_all, int window,
                  const std::vector<int32_t>& ratios) {
  w.SetU32(a + "context_length", 4096);
  w.SetU32(a + "embedding_length", s.n_embd);
  w.SetU32(a + "block_count", n_all);
  if (target && s.mtp) w.SetU32(a + "nextn_predict_layers", 1);
  w.SetU32(a + "attention.head_count", s.n_head);
  w.SetU32(a + "attention.head_count_kv", 1);
  w.SetU32(a + "attention.key_length", s.head_dim);
  w.SetU32(a + "attention.value_length", s.head_dim);
  w.SetU32(a + "rope.dimension_count", s.n_rot);
  w.SetF32(a + "rope.freq_base", 10000.0f);
  if (target && s.yarn_orig_ctx > 0) {
    w.SetString(a + "rope.scaling.type", "yarn");
    w.SetF32(a + "rope.scaling.factor", s.yarn_factor);
    w.SetU32(a + "rope.scaling.original_context_length", s.yarn_orig_ctx);
  }
  w.SetF32(a + "attention.layer_norm_rms_epsilon", 1e-6f);
  w.SetU32(a + "attention.q_lora_rank", s.q_lora);
  w.SetU32(a + "attention.sliding_window", window);
  w.SetU32(a + "expert_count", s.n_expert);
  w.SetU32(a + "expert_used_count", s.n_expert_used);
  w.SetU32(a + "expert_feed_forward_length", s.n_ff_exp);
  w.SetU32(a + "expert_shared_count", s.n_shared);
  w.SetF32(a + "expert_weights_scale", 1.5f);
  w.SetBool(a + "expert_weights_norm", true);
  w.SetU32(a + "expert_gating_func", 4);  // sqrt(softplus)
  w.SetF32Array(a + "swiglu_clamp_exp", std::vector<float>(n_all, s.clamp_experts));
  w.SetF32Array(a + "swiglu_clamp_shexp", std::vector<float>(n_all, s.clamp_shared));
  if (target) {
    w.SetU32(a + "attention.indexer.head_count", s.indexer_heads);
    w.SetU32(a + "attention.indexer.key_length", s.indexer_dim);
    w.SetU32(a + "attention.indexer.top_k", s.indexer_top_k);
  }
  w.SetU32(a + "attention.output_group_count", s.o_groups);
  w.SetU32(a + "attention.output_lora_rank", s.o_lora);
  if (target) w.SetF32(a + "attention.compress_rope_freq_base", 160000.0f);
  w.SetI32Array(a + "attention.compress_ratios", ratios);
  w.SetU32(a + "hyper_connection.count", 4);
  w.SetU32(a + "hyper_connection.sinkhorn_iterations", 20);
  w.SetF32(a + "hyper_connection.epsilon", 1e-6f);
  if (target) w.SetU32(a + "hash_layer_count", s.n_hash_layers);
}

// Random tensors of a deepseek4 file, typed by `pick`.
struct LayerPlanner {
  Plan& p;
  MoeTypePicker& pick;
  const Deepseek4Shape& s;

  void Matrix(const std::string& name, Role role, int il, int64_t n_in, int64_t n_out) {
    p.Random(name, pick.Pick(role, il, n_in), {n_in, n_out}, 0.0f, InvSqrt(n_in));
  }
  void Norm(const std::string& name, int64_t n) { p.Random(name, DType::kF32, {n}, 1.0f, 0.1f); }
  // A hyper-connection mixer: weights of mixes of std ~1, its base and scale.
  void Mixer(const std::string& prefix, int64_t n_mix, int64_t n_scale) {
    const int64_t HCD = 4 * int64_t{s.n_embd};
    p.Random(prefix + "fn.weight", DType::kF32, {HCD, n_mix}, 0.0f, InvSqrt(HCD));
    p.Random(prefix + "base.weight", DType::kF32, {n_mix}, 0.0f, 0.5f);
    p.Random(prefix + "scale.weight", DType::kF32, {n_scale}, 0.5f, 0.1f);
  }
  // Block il: attention of `ratio`, the mixers, the experts (routed by the
  // token's hash table when `hash`, else by scores with a selection bias).
  void Layer(int il, int ratio, bool hash, std::mt19937& rng) {
    const int64_t E = s.n_embd, V = s.n_vocab, HC = 4, MIX = (2 + HC) * HC;
    const int64_t D = s.head_dim, QL = s.q_lora, F = s.n_ff_exp, FS = int64_t{s.n_ff_exp} * s.n_shared;
    const int64_t ID = s.indexer_dim, IH = s.indexer_heads;
    const double used = static_cast<double>(s.n_expert_used) / s.n_expert;
    const std::string b = "blk." + std::to_string(il) + ".";
    Norm(b + "attn_norm.weight", E);
    p.Random(b + "attn_sinks.weight", DType::kF32, {s.n_head}, 0.0f, 1.0f);
    Matrix(b + "attn_q_a.weight", Role::kAttnQ, il, E, QL);
    Norm(b + "attn_q_a_norm.weight", QL);
    Matrix(b + "attn_q_b.weight", Role::kAttnQ, il, QL, s.n_head * D);
    Matrix(b + "attn_kv.weight", Role::kAttnK, il, E, D);
    Norm(b + "attn_kv_a_norm.weight", D);
    Matrix(b + "attn_output_a.weight", Role::kAttnQ, il, s.n_head * D / s.o_groups, int64_t{s.o_lora} * s.o_groups);
    Matrix(b + "attn_output_b.weight", Role::kAttnOut, il, int64_t{s.o_groups} * s.o_lora, E);
    Mixer(b + "hc_attn_", MIX, 3);
    Mixer(b + "hc_ffn_", MIX, 3);
    if (ratio != 0) {
      const int64_t width = (ratio == 4 ? 2 : 1) * D;  // ratio 4 overlaps: two halves
      Matrix(b + "attn_compressor_kv.weight", Role::kAttnQ, il, E, width);
      Matrix(b + "attn_compressor_gate.weight", Role::kAttnQ, il, E, width);
      p.Random(b + "attn_compressor_ape.weight", DType::kF32, {width, ratio}, 0.0f, 0.5f);
      Norm(b + "attn_compressor_norm.weight", D);
      if (ratio == 4) {
        Matrix(b + "indexer.proj.weight", Role::kAttnQ, il, E, IH);
        Matrix(b + "indexer.attn_q_b.weight", Role::kAttnQ, il, QL, IH * ID);
        Matrix(b + "indexer_compressor_kv.weight", Role::kAttnQ, il, E, 2 * ID);
        Matrix(b + "indexer_compressor_gate.weight", Role::kAttnQ, il, E, 2 * ID);
        p.Random(b + "indexer_compressor_ape.weight", DType::kF32, {2 * ID, 4}, 0.0f, 0.5f);
        Norm(b + "indexer_compressor_norm.weight", ID);
      }
    }
    p.Random(b + "ffn_gate_inp.weight", pick.Pick(Role::kRouter, il, E), {E, s.n_expert}, 0.0f, 2.0f * InvSqrt(E));
    if (hash) {
      // Each token's experts: distinct, as a trained table's are.
      std::vector<int32_t> table(static_cast<size_t>(V) * s.n_expert_used);
      std::vector<int32_t> experts(s.n_expert);
      for (int64_t t = 0; t < V; ++t) {
        std::iota(experts.begin(), experts.end(), 0);
        std::shuffle(experts.begin(), experts.end(), rng);
        std::copy_n(experts.begin(), s.n_expert_used, table.begin() + t * s.n_expert_used);
      }
      p.Ints(b + "ffn_gate_tid2eid.weight", {s.n_expert_used, V}, std::move(table), 0.0);
    } else {
      p.Random(b + "exp_probs_b.bias", DType::kF32, {s.n_expert}, 0.0f, 0.1f);
    }
    Norm(b + "ffn_norm.weight", E);
    const DType gu = pick.Pick(Role::kFfnGateUp, il, E);
    p.Random(b + "ffn_gate_exps.weight", gu, {E, F, s.n_expert}, 0.0f, InvSqrt(E), used);
    p.Random(b + "ffn_up_exps.weight", gu, {E, F, s.n_expert}, 0.0f, InvSqrt(E), used);
    p.Random(b + "ffn_down_exps.weight", pick.Pick(Role::kFfnDown, il, F), {F, E, s.n_expert}, 0.0f, InvSqrt(F),
             used);
    Matrix(b + "ffn_gate_shexp.weight", Role::kFfnGateUp, il, E, FS);
    Matrix(b + "ffn_up_shexp.weight", Role::kFfnGateUp, il, E, FS);
    Matrix(b + "ffn_down_shexp.weight", Role::kFfnDown, il, FS, E);
  }
};

}  // namespace

void PlanDeepseek4(GgufWriter& w, Plan& p, const Deepseek4Shape& s, const std::string& type) {
  const std::string a = "deepseek4.";
  const int n_trunk = s.n_layer(), n_all = n_trunk + (s.mtp ? 1 : 0);
  std::vector<int32_t> ratios(s.ratios.begin(), s.ratios.end());
  if (s.mtp) ratios.push_back(0);  // the MTP block attends to the raw window only
  w.SetString("general.architecture", "deepseek4");
  w.SetString("general.name", "kakeya-bench-deepseek4-" + type);
  SetLayerKeys(w, a, s, /*target=*/true, n_all, s.window, ratios);
  if (s.vocab_from.empty()) {
    AddMoeCommon(w, type, s.n_vocab);
  } else {
    AddFileType(w, type);
    CopyVocab(w, s.vocab_from);
  }

  MoeTypePicker pick{type, n_all, s.n_expert, 0, /*tied=*/false};
  LayerPlanner planner{p, pick, s};
  const int64_t E = s.n_embd, V = s.n_vocab;
  // The token embedding: one row read per token, not counted as active.
  p.Random("token_embd.weight", pick.Pick(Role::kTokenEmbd, 0, E), {E, V}, 0.0f, 0.05f, 0.0);
  planner.Norm("output_norm.weight", E);
  p.Random("output.weight", pick.Pick(Role::kOutput, 0, E), {E, V}, 0.0f, 6.0f * InvSqrt(E));
  planner.Mixer("output_hc_", 4, 1);
  std::mt19937 rng(4);
  for (int il = 0; il < n_all; ++il) {
    planner.Layer(il, ratios[il], il < s.n_hash_layers, rng);
    if (il >= n_trunk) {
      const std::string b = "blk." + std::to_string(il) + ".";
      planner.Matrix(b + "nextn.eh_proj.weight", Role::kAttnQ, il, 2 * E, E);
      planner.Norm(b + "nextn.enorm.weight", E);
      planner.Norm(b + "nextn.hnorm.weight", E);
      planner.Norm(b + "nextn.shared_head_norm.weight", E);
    }
  }
}

void PlanDSpark(GgufWriter& w, Plan& p, const Deepseek4Shape& s, const DSparkShape& d, const std::string& type) {
  const std::string a = "dflash.";
  w.SetString("general.architecture", "dflash");
  w.SetString("general.name", "kakeya-bench-dspark-" + type);
  SetLayerKeys(w, a, s, /*target=*/false, d.n_stages, d.window, std::vector<int32_t>(d.n_stages, 0));
  w.SetU32(a + "block_size", d.block_size);
  w.SetI32Array(a + "target_layers", std::vector<int32_t>(d.taps.begin(), d.taps.end()));
  if (s.vocab_from.empty()) {
    AddMoeCommon(w, type, s.n_vocab);
  } else {
    AddFileType(w, type);
    CopyVocab(w, s.vocab_from);
  }
  w.SetU32("tokenizer.ggml.mask_token_id", s.n_vocab - 2);

  MoeTypePicker pick{type, d.n_stages, s.n_expert, 0, /*tied=*/false};
  LayerPlanner planner{p, pick, s};
  const int64_t E = s.n_embd, V = s.n_vocab, R = d.markov_rank;
  const int64_t n_taps = static_cast<int64_t>(d.taps.size());
  planner.Matrix("fc.weight", Role::kAttnQ, 0, n_taps * E, E);
  planner.Norm("enc.output_norm.weight", E);
  planner.Norm("output_norm.weight", E);
  planner.Mixer("output_hc_", 4, 1);
  std::mt19937 rng(5);
  for (int il = 0; il < d.n_stages; ++il) planner.Layer(il, 0, false, rng);
  // The Markov head: a row of w1 per previous token, and w2 . row adds a
  // bias of std ~1.5 to every token's logit (the block's logits have ~6).
  p.Random("markov_w1.weight", DType::kF32, {R, V}, 0.0f, 1.0f, 0.0);
  p.Random("markov_w2.weight", pick.Pick(Role::kOutput, 0, R), {R, V}, 0.0f, 1.5f * InvSqrt(R));
  p.Random("conf_proj.weight", DType::kF32, {E + R, 1}, 0.0f, InvSqrt(E + R));
  p.Vector("conf_proj.bias", 1, 0.0f);
}

}  // namespace kakeya
