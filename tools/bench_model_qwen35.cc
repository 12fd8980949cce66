// See bench_model_qwen35.h.
#include "bench_model_qwen35.h"

#include <cmath>

#include "base/error.h"
#include "bench_model_types.h"

namespace kakeya {

Qwen35Shape Qwen35BenchShape(bool experts) {
  Qwen35Shape s;
  s.experts = experts;
  s.n_embd = 2048, s.n_layer = 8, s.full_attention_interval = 4, s.n_vocab = 151936;
  s.n_head = 16, s.n_head_kv = 2, s.head_dim = 256, s.n_rot = 64;
  s.rope_sections[0] = 11, s.rope_sections[1] = 11, s.rope_sections[2] = 10;
  s.n_k_heads = 16, s.n_v_heads = 32, s.head_k_dim = 128;
  s.n_ff = 5632;
  s.n_expert = 64, s.n_expert_used = 8, s.n_ff_exp = 512, s.n_ff_shared = 512;
  s.mtp = true;
  return s;
}

Qwen35Shape Qwen35FixtureShape(bool experts) {
  Qwen35Shape s;
  s.experts = experts;
  // Layers 2 and 5 full attention, the others DeltaNet.
  s.n_embd = 64, s.n_layer = 6, s.full_attention_interval = 3, s.n_vocab = 8000;
  s.n_head = 4, s.n_head_kv = 2, s.head_dim = 32, s.n_rot = 16;
  // Sections summing to n_rot / 2, all carrying the position (as [11, 11, 10, 0] of 64 does).
  s.rope_sections[0] = 3, s.rope_sections[1] = 3, s.rope_sections[2] = 2;
  // Two value heads per key head: value head j reads key head j % 2.
  s.n_k_heads = 2, s.n_v_heads = 4, s.head_k_dim = 16;
  s.n_ff = 96;
  s.n_expert = 8, s.n_expert_used = 2, s.n_ff_exp = 32, s.n_ff_shared = 64;  // multiples of 32: Q8_0 rows
  s.mtp = true;
  return s;
}

void CheckQwen35Shape(const Qwen35Shape& s) {
  if (s.n_layer < 1) Fail("qwen35: no layers");
  if (s.n_head % s.n_head_kv != 0) Fail("qwen35: KV heads must divide heads");
  if (s.n_v_heads % s.n_k_heads != 0) Fail("qwen35: key heads must divide value heads");
  if (s.n_rot % 2 != 0 || s.n_rot > s.head_dim) Fail("qwen35: rope dims must be even and at most the head");
  if (s.experts && s.n_expert_used > s.n_expert) Fail("qwen35moe: experts used exceed experts");
  if (s.n_vocab < 260) Fail("qwen35: the vocabulary has 259 special and byte tokens");
}

void PlanQwen35(GgufWriter& w, Plan& p, const Qwen35Shape& s, const std::string& type) {
  const std::string arch = s.experts ? "qwen35moe" : "qwen35";
  const std::string a = arch + ".";
  const int n_trunk = s.n_layer, n_all = n_trunk + (s.mtp ? 1 : 0);
  const int64_t E = s.n_embd, V = s.n_vocab, D = s.head_dim, H = s.n_head, HKV = s.n_head_kv;
  const int64_t DK = s.head_k_dim, KW = DK * s.n_k_heads, VW = DK * s.n_v_heads, CH = 2 * KW + VW;
  const int64_t HV = s.n_v_heads, KC = s.conv_kernel;
  w.SetString("general.architecture", arch);
  w.SetString("general.name", "kakeya-bench-" + arch + "-" + type);
  w.SetU32(a + "context_length", 4096);
  w.SetU32(a + "embedding_length", s.n_embd);
  w.SetU32(a + "block_count", n_all);
  if (s.mtp) w.SetU32(a + "nextn_predict_layers", 1);
  w.SetU32(a + "attention.head_count", s.n_head);
  w.SetU32(a + "attention.head_count_kv", s.n_head_kv);
  w.SetU32(a + "attention.key_length", s.head_dim);
  w.SetU32(a + "attention.value_length", s.head_dim);
  w.SetU32(a + "rope.dimension_count", s.n_rot);
  w.SetF32(a + "rope.freq_base", 10000000.0f);
  w.SetI32Array(a + "rope.dimension_sections", {s.rope_sections[0], s.rope_sections[1], s.rope_sections[2],
                                                  s.rope_sections[3]});
  w.SetF32(a + "attention.layer_norm_rms_epsilon", 1e-6f);
  w.SetU32(a + "ssm.conv_kernel", s.conv_kernel);
  w.SetU32(a + "ssm.inner_size", VW);
  w.SetU32(a + "ssm.state_size", DK);
  w.SetU32(a + "ssm.time_step_rank", s.n_v_heads);
  w.SetU32(a + "ssm.group_count", s.n_k_heads);
  w.SetU32(a + "full_attention_interval", s.full_attention_interval);
  if (s.experts) {
    w.SetU32(a + "expert_count", s.n_expert);
    w.SetU32(a + "expert_used_count", s.n_expert_used);
    w.SetU32(a + "expert_feed_forward_length", s.n_ff_exp);
    w.SetU32(a + "expert_shared_feed_forward_length", s.n_ff_shared);
  } else {
    w.SetU32(a + "feed_forward_length", s.n_ff);
  }
  if (s.vocab_from.empty()) {
    AddMoeCommon(w, type, s.n_vocab);
  } else {
    AddFileType(w, type);
    CopyVocab(w, s.vocab_from);
  }

  MoeTypePicker pick{type, n_all, s.experts ? s.n_expert : 0, 0, /*tied=*/false};
  auto matrix = [&](const std::string& name, Role role, int il, int64_t n_in, int64_t n_out) {
    p.Random(name, pick.Pick(role, il, n_in), {n_in, n_out}, 0.0f, InvSqrt(n_in));
  };
  auto norm = [&](const std::string& name, int64_t n) { p.Random(name, DType::kF32, {n}, 1.0f, 0.1f); };
  p.Random("token_embd.weight", pick.Pick(Role::kTokenEmbd, 0, E), {E, V}, 0.0f, 0.05f, 0.0);
  norm("output_norm.weight", E);
  p.Random("output.weight", pick.Pick(Role::kOutput, 0, E), {E, V}, 0.0f, 6.0f * InvSqrt(E));
  const double used = s.experts ? static_cast<double>(s.n_expert_used) / s.n_expert : 1.0;
  for (int il = 0; il < n_all; ++il) {
    const std::string b = "blk." + std::to_string(il) + ".";
    const bool recurrent = il < n_trunk && (il + 1) % s.full_attention_interval != 0;
    norm(b + "attn_norm.weight", E);
    if (recurrent) {
      matrix(b + "attn_qkv.weight", Role::kAttnQ, il, E, CH);
      matrix(b + "attn_gate.weight", Role::kAttnQ, il, E, VW);
      matrix(b + "ssm_beta.weight", Role::kAttnK, il, E, HV);
      matrix(b + "ssm_alpha.weight", Role::kAttnK, il, E, HV);
      p.Random(b + "ssm_conv1d.weight", DType::kF32, {KC, CH}, 0.0f, 0.5f);
      p.Random(b + "ssm_dt.bias", DType::kF32, {HV}, 0.0f, 0.5f);
      // -exp(A_log), A_log ~ U-ish around log(1..16) in the released models: here -exp(N(0.5, 0.5)).
      std::vector<float> decay(HV);
      for (int64_t j = 0; j < HV; ++j) decay[j] = -std::exp(0.5f + 0.5f * std::sin(1.7f * float(j + il)));
      p.Values(b + "ssm_a", std::move(decay));
      norm(b + "ssm_norm.weight", DK);
      matrix(b + "ssm_out.weight", Role::kAttnOut, il, VW, E);
    } else {
      matrix(b + "attn_q.weight", Role::kAttnQ, il, E, 2 * H * D);
      matrix(b + "attn_k.weight", Role::kAttnK, il, E, HKV * D);
      matrix(b + "attn_v.weight", Role::kAttnV, il, E, HKV * D);
      matrix(b + "attn_output.weight", Role::kAttnOut, il, H * D, E);
      norm(b + "attn_q_norm.weight", D);
      norm(b + "attn_k_norm.weight", D);
    }
    norm(b + "post_attention_norm.weight", E);
    if (s.experts) {
      const int64_t F = s.n_ff_exp, FS = s.n_ff_shared;
      p.Random(b + "ffn_gate_inp.weight", pick.Pick(Role::kRouter, il, E), {E, s.n_expert}, 0.0f, 2.0f * InvSqrt(E));
      const DType gu = pick.Pick(Role::kFfnGateUp, il, E);
      p.Random(b + "ffn_gate_exps.weight", gu, {E, F, s.n_expert}, 0.0f, InvSqrt(E), used);
      p.Random(b + "ffn_up_exps.weight", gu, {E, F, s.n_expert}, 0.0f, InvSqrt(E), used);
      p.Random(b + "ffn_down_exps.weight", pick.Pick(Role::kFfnDown, il, F), {F, E, s.n_expert}, 0.0f, InvSqrt(F),
               used);
      p.Random(b + "ffn_gate_inp_shexp.weight", DType::kF32, {E}, 0.0f, InvSqrt(E));
      matrix(b + "ffn_gate_shexp.weight", Role::kFfnGateUp, il, E, FS);
      matrix(b + "ffn_up_shexp.weight", Role::kFfnGateUp, il, E, FS);
      matrix(b + "ffn_down_shexp.weight", Role::kFfnDown, il, FS, E);
    } else {
      matrix(b + "ffn_gate.weight", Role::kFfnGateUp, il, E, s.n_ff);
      matrix(b + "ffn_up.weight", Role::kFfnGateUp, il, E, s.n_ff);
      matrix(b + "ffn_down.weight", Role::kFfnDown, il, s.n_ff, E);
    }
    if (il >= n_trunk) {
      matrix(b + "nextn.eh_proj.weight", Role::kAttnQ, il, 2 * E, E);
      norm(b + "nextn.enorm.weight", E);
      norm(b + "nextn.hnorm.weight", E);
      norm(b + "nextn.shared_head_norm.weight", E);
    }
  }
}

}  // namespace kakeya
