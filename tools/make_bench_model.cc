// Writes a random-weight GGUF for benchmarks, with our own GGUF encoding and
// reference quantizers, in one of three architectures:
//
//   llama     the ~1.25B "bench" shape of the performance issues (n_embd 2048,
//             16 layers, 32/8 heads, n_ff 5632, vocab 128256; --shape 1b) or a
//             tiny one (--shape tiny). The default; byte-identical to what this
//             tool wrote before it knew other architectures.
//   qwen3moe  the mixture-of-experts bench model of issue #20: qwen3 attention
//             (per-head q/k RMSNorm, NEOX rope base 1e6, head dim = key_length)
//             and an MoE FFN in every layer (softmax router ffn_gate_inp, SwiGLU
//             experts ffn_{gate,up,down}_exps, 3-D tensors ne = {n_in, n_out,
//             n_expert}), untied output. Defaults: n_embd 1024, 12 layers, 16/4
//             heads of 64, vocab 32000, 64 experts top-8 of FFN 512: 1.31B
//             weights, 0.22B of them read per token.
//   gemma4    Gemma-4-26B-A4B at reduced depth (default 6 layers: 5 sliding, 1
//             global): n_embd 2816, 16 q heads, kv heads 8 sliding / 2 global,
//             head dim 256 / 512, window 1024, dense GeGLU MLP 2112 plus 128
//             experts top-8 of FFN 704 in every layer (fused ffn_gate_up_exps),
//             K = V on global layers (no attn_v), proportional rope (rope_freqs
//             64 x 1 then 192 x 1e30), soft-cap 30, tied embeddings, vocab 262144.
//             Tensors and keys as the converter writes them (the same set as
//             tests/fixtures/models2/g4moe-f32.gguf, docs/formats/architectures.md 3.5).
//
//   deepseek4 DeepSeek-V4-Flash's layer at reduced size (bench_model_deepseek4.h):
//             --shape bench (default; n_embd 1024, 12 layers, 64 experts top-6,
//             vocab 129280) or fixture (the tests' tiny model with an MTP block).
//
//   dspark    A DSpark drafter for the deepseek4 target of --shape (bench_model_deepseek4.h).
//
//   make-bench-model OUT.gguf [--arch llama|qwen3moe|gemma4|deepseek4|dspark] [--type T] [--shape S]
//       [--embd N] [--layers N] [--heads N] [--kv-heads N] [--head-dim N] [--vocab N]
//       [--ff N] [--experts N] [--experts-used N] [--ff-exp N]
//
// e.g. the MoE bench model:
//   make-bench-model OUT.gguf --arch qwen3moe --embd 1024 --layers 12 --heads 16 --kv-heads 4
//       --vocab 32000 --experts 64 --experts-used 8 --ff-exp 512 --type Q8_0
//
// Types (bench_model_types.cc): F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1
// (every matrix; vectors stay F32) or the mixes Q4_K_M and Q5_K_M. For llama the mixes follow
// llama.cpp's recipe in spirit: Q4_K (Q5_K) matrices, Q6_K for every ffn_down
// and attn_v, Q6_K output; token_embd Q4_K (Q5_K). For qwen3moe and gemma4 they
// follow llama-quantize (src/llama-quant.cpp, llama_tensor_get_type_impl) more
// closely: Q6_K for output and for a tied token_embd, Q6_K for attn_v and for
// ffn_down / ffn_down_exps only in the layers its use_more_bits() picks (the
// first and last eighth, and every third in between), Q8_0 attn_k/attn_v and a
// Q5_K attn_output (Q4_K_M) when there are exactly 8 experts. For those two
// architectures routers (ffn_gate_inp) stay F32 as llama-quantize keeps them,
// and a matrix whose n_in does not fit the block of its type falls back as
// llama-quantize's tensor_type_fallback does: Q4_K -> Q5_0, Q5_K -> Q5_1,
// Q6_K -> Q8_0, and to F16 if n_in is not even a multiple of 32 (gemma4's
// ffn_down, n_in 2112, and ffn_down_exps, n_in 704).
//
// Weights are N(0, sd) draws, one seeded generator per row, on all cores. For
// qwen3moe and gemma4 the scales are those of the fixture models
// (fixtures/models2/README.md, "Weights:"), so that activations stay finite:
// projections sd 1/sqrt(n_in), norms 1 + N(0, 0.1), gemma post-norms
// 2 + N(0, 0.1), routers sd 2/sqrt(n_embd) (router logits of std ~2), gemma
// router scale ~sqrt(n_embd), per-expert scales 1 + N(0, 0.2), layer output
// scales 0.8 + N(0, 0.1); untied token_embd sd 0.05 and output 6/sqrt(n_embd);
// tied gemma token_embd sd 0.003 and output_norm ~4/(0.003 sqrt(n_embd)).
// The vocabulary is a SentencePiece filler vocabulary for every architecture.
//
// Each tensor is generated while the file is written (bench_model_plan.h),
// so memory holds one tensor at a time (a 6-layer gemma4 Q8_0 is ~6 GB).
#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <unistd.h>
#include <vector>

#include "base/error.h"
#include "bench_model_deepseek4.h"
#include "bench_model_qwen35.h"
#include "bench_model_plan.h"
#include "bench_model_types.h"
#include "gguf/gguf.h"

namespace kakeya {
namespace {

constexpr const char* kUsage =
    "usage: make-bench-model OUT.gguf [--arch llama|qwen3moe|gemma4|deepseek4|dspark] [--type TYPE] [--shape S]\n"
    "         [--embd N] [--layers N] [--heads N] [--kv-heads N] [--head-dim N] [--vocab N] [--ff N]\n"
    "         [--experts N] [--experts-used N] [--ff-exp N]\n"
    "\n"
    "Writes a random-weight GGUF model for benchmarks.\n"
    "  --arch      llama (default): --shape 1b (default; n_embd 2048, 16 layers, 32/8 heads,\n"
    "                n_ff 5632, vocab 128256) or tiny (256, 2 layers, 4/2 heads, n_ff 512, vocab 1024)\n"
    "              qwen3moe: qwen3 attention + MoE FFN in every layer; defaults n_embd 1024,\n"
    "                12 layers, 16/4 heads, head dim n_embd/heads, vocab 32000, 64 experts top-8,\n"
    "                expert FFN 512 (1.31B weights, 0.22B active per token)\n"
    "              gemma4: Gemma-4-26B-A4B shape, 6 layers (5 sliding : 1 global); n_embd 2816,\n"
    "                16 q heads, kv heads 8 sliding / a quarter of that (2) global, head dim\n"
    "                256 sliding / twice that global, dense MLP 2112, 128 experts top-8 of\n"
    "                FFN 704, vocab 262144, tied embeddings\n"
    "              deepseek4: DeepSeek-V4-Flash's layer; --shape bench (default: n_embd 1024,\n"
    "                12 layers of compression ratios 0 0 then 4 128 alternating, 16 heads of 512,\n"
    "                64 experts top-6 of FFN 512, 3 hash-routed layers, vocab 129280; ~1.6B\n"
    "                weights, ~0.43 GB read per token in Q8_0, and an MTP block) or fixture (the\n"
    "                tests' tiny model, with an\n"
    "                MTP block); --layers N keeps the first N layers of the shape's pattern;\n"
    "                --vocab-from FILE.gguf copies that file's tokenizer\n"
    "              dspark: a DSpark drafter (dflash file: deepseek4 stages, a Markov head) for\n"
    "                the deepseek4 target of --shape; --layers N stages (default 2); bench:\n"
    "                block 8, taps 1 6 11, Markov rank 256; fixture: block 4, window 8, taps\n"
    "                1 3 5, rank 16; --vocab-from as for deepseek4\n"
    "              qwen35, qwen35moe: Qwen3.5's Gated DeltaNet and gated attention layers (every\n"
    "                4th), dense or a mixture with a gated shared expert, one MTP block;\n"
    "                --shape bench (default: 35B-A3B's widths, 8 layers, 64 experts) or fixture\n"
    "                (the tests' models4); --layers N trunk layers; --vocab-from as for deepseek4\n"
    "  --type      F16 (default), BF16, F32, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K_M, Q5_K_M\n"
    "  --embd --layers --heads --kv-heads --vocab --ff   override the arch's defaults (--ff:\n"
    "              dense FFN width; for qwen3moe only the feed_forward_length key)\n"
    "  --head-dim  qwen3moe: attention.key_length; gemma4: sliding head dim (global = 2x)\n"
    "  --experts --experts-used --ff-exp   MoE shape (qwen3moe and gemma4 only)\n";

enum class Arch { kLlama, kQwen3Moe, kGemma4 };

struct Shape {
  int n_embd = 0, n_layer = 0, n_head = 0, n_head_kv = 0, n_ff = 0, n_vocab = 0;
  int head_dim = 0;  // 0: n_embd / n_head
  int n_expert = 0, n_expert_used = 0, n_ff_exp = 0;
};

void PlanLlama(GgufWriter& w, Plan& p, const Shape& s, const std::string& type,
               const std::string& shape_name) {
  const int head_dim = s.n_embd / s.n_head;
  w.SetString("general.architecture", "llama");
  w.SetString("general.name", "kakeya-bench-" + shape_name + "-" + type);
  w.SetU32("llama.context_length", 4096);
  w.SetU32("llama.embedding_length", s.n_embd);
  w.SetU32("llama.block_count", s.n_layer);
  w.SetU32("llama.feed_forward_length", s.n_ff);
  w.SetU32("llama.attention.head_count", s.n_head);
  w.SetU32("llama.attention.head_count_kv", s.n_head_kv);
  w.SetU32("llama.rope.dimension_count", head_dim);
  w.SetF32("llama.attention.layer_norm_rms_epsilon", 1e-5f);
  w.SetF32("llama.rope.freq_base", 500000.0f);
  AddVocab(w, s.n_vocab);

  auto matrix = [&](const std::string& name, const std::string& role, int64_t n_in, int64_t n_out, float sd) {
    p.Random(name, ParseType(type, role), {n_in, n_out}, 0.0f, sd);
  };
  const float in_sd = 1.0f / std::sqrt(static_cast<float>(s.n_embd));
  matrix("token_embd.weight", "token_embd", s.n_embd, s.n_vocab, 0.05f);
  p.Vector("output_norm.weight", s.n_embd, 1.0f);
  matrix("output.weight", "output", s.n_embd, s.n_vocab, in_sd);
  for (int il = 0; il < s.n_layer; ++il) {
    const std::string b = "blk." + std::to_string(il) + ".";
    p.Vector(b + "attn_norm.weight", s.n_embd, 1.0f);
    matrix(b + "attn_q.weight", "attn_q", s.n_embd, s.n_head * head_dim, in_sd);
    matrix(b + "attn_k.weight", "attn_k", s.n_embd, s.n_head_kv * head_dim, in_sd);
    matrix(b + "attn_v.weight", "attn_v", s.n_embd, s.n_head_kv * head_dim, in_sd);
    matrix(b + "attn_output.weight", "attn_output", s.n_head * head_dim, s.n_embd, in_sd);
    p.Vector(b + "ffn_norm.weight", s.n_embd, 1.0f);
    matrix(b + "ffn_gate.weight", "ffn_gate", s.n_embd, s.n_ff, in_sd);
    matrix(b + "ffn_up.weight", "ffn_up", s.n_embd, s.n_ff, in_sd);
    matrix(b + "ffn_down.weight", "ffn_down", s.n_ff, s.n_embd, 1.0f / std::sqrt(static_cast<float>(s.n_ff)));
  }
}

void PlanQwen3Moe(GgufWriter& w, Plan& p, const Shape& s, const std::string& type) {
  const std::string a = "qwen3moe.";
  const int hd = s.head_dim;
  w.SetString("general.architecture", "qwen3moe");
  w.SetString("general.name", "kakeya-bench-qwen3moe-" + type);
  w.SetU32(a + "context_length", 4096);
  w.SetU32(a + "embedding_length", s.n_embd);
  w.SetU32(a + "block_count", s.n_layer);
  w.SetU32(a + "feed_forward_length", s.n_ff);
  w.SetU32(a + "attention.head_count", s.n_head);
  w.SetU32(a + "attention.head_count_kv", s.n_head_kv);
  w.SetF32(a + "rope.freq_base", 1000000.0f);
  w.SetF32(a + "attention.layer_norm_rms_epsilon", 1e-6f);
  w.SetU32(a + "expert_count", s.n_expert);
  w.SetU32(a + "expert_used_count", s.n_expert_used);
  w.SetU32(a + "attention.key_length", hd);
  w.SetU32(a + "attention.value_length", hd);
  w.SetU32(a + "expert_feed_forward_length", s.n_ff_exp);
  AddMoeCommon(w, type, s.n_vocab);

  MoeTypePicker pick{type, s.n_layer, s.n_expert, s.n_layer, /*tied=*/false};
  const double used = static_cast<double>(s.n_expert_used) / s.n_expert;
  const int64_t E = s.n_embd, q = int64_t{s.n_head} * hd, kv = int64_t{s.n_head_kv} * hd;
  // The token embedding: one row read per token, not counted as active.
  p.Random("token_embd.weight", pick.Pick(Role::kTokenEmbd, 0, E), {E, s.n_vocab}, 0.0f, 0.05f, 0.0);
  p.Random("output_norm.weight", DType::kF32, {E}, 1.0f, 0.1f);
  p.Random("output.weight", pick.Pick(Role::kOutput, 0, E), {E, s.n_vocab}, 0.0f, 6.0f * InvSqrt(E));
  for (int il = 0; il < s.n_layer; ++il) {
    const std::string b = "blk." + std::to_string(il) + ".";
    p.Random(b + "attn_norm.weight", DType::kF32, {E}, 1.0f, 0.1f);
    p.Random(b + "attn_q.weight", pick.Pick(Role::kAttnQ, il, E), {E, q}, 0.0f, InvSqrt(E));
    p.Random(b + "attn_k.weight", pick.Pick(Role::kAttnK, il, E), {E, kv}, 0.0f, InvSqrt(E));
    p.Random(b + "attn_v.weight", pick.Pick(Role::kAttnV, il, E), {E, kv}, 0.0f, InvSqrt(E));
    p.Random(b + "attn_output.weight", pick.Pick(Role::kAttnOut, il, q), {q, E}, 0.0f, InvSqrt(q));
    p.Random(b + "attn_q_norm.weight", DType::kF32, {hd}, 1.0f, 0.1f);
    p.Random(b + "attn_k_norm.weight", DType::kF32, {hd}, 1.0f, 0.1f);
    p.Random(b + "ffn_norm.weight", DType::kF32, {E}, 1.0f, 0.1f);
    p.Random(b + "ffn_gate_inp.weight", pick.Pick(Role::kRouter, il, E), {E, s.n_expert}, 0.0f,
             2.0f * InvSqrt(E));
    const DType gu = pick.Pick(Role::kFfnGateUp, il, E);
    p.Random(b + "ffn_gate_exps.weight", gu, {E, s.n_ff_exp, s.n_expert}, 0.0f, InvSqrt(E), used);
    p.Random(b + "ffn_up_exps.weight", gu, {E, s.n_ff_exp, s.n_expert}, 0.0f, InvSqrt(E), used);
    p.Random(b + "ffn_down_exps.weight", pick.Pick(Role::kFfnDown, il, s.n_ff_exp),
             {s.n_ff_exp, E, s.n_expert}, 0.0f, InvSqrt(s.n_ff_exp), used);
  }
}

bool Gemma4IsSliding(int il) { return il % 6 != 5; }  // 5 sliding : 1 global

void PlanGemma4(GgufWriter& w, Plan& p, const Shape& s, const std::string& type) {
  const std::string a = "gemma4.";
  const int hd_swa = s.head_dim, hd = 2 * s.head_dim;
  const int kv_swa = s.n_head_kv, kv_global = std::max(1, s.n_head_kv / 4);
  std::vector<uint8_t> pattern(s.n_layer);
  std::vector<int32_t> kv_heads(s.n_layer);
  int n_attn_v = 0;
  for (int il = 0; il < s.n_layer; ++il) {
    pattern[il] = Gemma4IsSliding(il) ? 1 : 0;
    kv_heads[il] = pattern[il] ? kv_swa : kv_global;
    n_attn_v += pattern[il];
  }
  w.SetString("general.architecture", "gemma4");
  w.SetString("general.name", "kakeya-bench-gemma4-" + type);
  w.SetU32(a + "context_length", 4096);
  w.SetU32(a + "embedding_length", s.n_embd);
  w.SetU32(a + "block_count", s.n_layer);
  w.SetU32(a + "feed_forward_length", s.n_ff);
  w.SetU32(a + "attention.head_count", s.n_head);
  w.SetF32(a + "rope.freq_base", 1000000.0f);
  w.SetF32(a + "rope.freq_base_swa", 10000.0f);
  w.SetF32(a + "attention.layer_norm_rms_epsilon", 1e-6f);
  w.SetF32(a + "final_logit_softcapping", 30.0f);
  w.SetU32(a + "attention.sliding_window", 1024);
  w.SetU32(a + "attention.shared_kv_layers", 0);
  w.SetU32(a + "embedding_length_per_layer_input", 0);
  w.SetArray(a + "attention.sliding_window_pattern", GgufType::kBool, pattern.data(), pattern.size());
  w.SetU32(a + "attention.key_length", hd);
  w.SetU32(a + "attention.value_length", hd);
  w.SetU32(a + "attention.key_length_swa", hd_swa);
  w.SetU32(a + "attention.value_length_swa", hd_swa);
  w.SetU32(a + "expert_feed_forward_length", s.n_ff_exp);
  w.SetU32(a + "expert_count", s.n_expert);
  w.SetU32(a + "expert_used_count", s.n_expert_used);
  w.SetI32Array(a + "attention.head_count_kv", kv_heads);
  w.SetU32(a + "rope.dimension_count", hd);
  w.SetU32(a + "rope.dimension_count_swa", hd_swa);
  AddMoeCommon(w, type, s.n_vocab);

  MoeTypePicker pick{type, s.n_layer, s.n_expert, n_attn_v, /*tied=*/true};
  const double used = static_cast<double>(s.n_expert_used) / s.n_expert;
  const int64_t E = s.n_embd, F = s.n_ff, X = s.n_ff_exp;
  const float embd_sd = 0.003f;
  const float out_norm = 4.0f / (embd_sd * std::sqrt(static_cast<float>(E)));
  // Tied: token_embd is also the LM head, read in full per token.
  p.Random("token_embd.weight", pick.Pick(Role::kTokenEmbd, 0, E), {E, s.n_vocab}, 0.0f, embd_sd);
  p.Random("output_norm.weight", DType::kF32, {E}, out_norm, 0.1f * out_norm);
  // Proportional rope: only the first quarter of the rotary pairs rotate.
  std::vector<float> freqs(hd / 2, 1e30f);
  std::fill(freqs.begin(), freqs.begin() + hd / 8, 1.0f);
  p.Values("rope_freqs.weight", std::move(freqs));
  for (int il = 0; il < s.n_layer; ++il) {
    const std::string b = "blk." + std::to_string(il) + ".";
    const bool swa = pattern[il] != 0;
    const int64_t d = swa ? hd_swa : hd, q = s.n_head * d, kv = kv_heads[il] * d;
    p.Random(b + "attn_norm.weight", DType::kF32, {E}, 1.0f, 0.1f);
    p.Random(b + "attn_q.weight", pick.Pick(Role::kAttnQ, il, E), {E, q}, 0.0f, InvSqrt(E));
    p.Random(b + "attn_k.weight", pick.Pick(Role::kAttnK, il, E), {E, kv}, 0.0f, InvSqrt(E));
    if (swa) {  // global layers: K = V, no attn_v
      p.Random(b + "attn_v.weight", pick.Pick(Role::kAttnV, il, E), {E, kv}, 0.0f, InvSqrt(E));
    }
    p.Random(b + "attn_output.weight", pick.Pick(Role::kAttnOut, il, q), {q, E}, 0.0f, InvSqrt(q));
    p.Random(b + "attn_q_norm.weight", DType::kF32, {d}, 1.0f, 0.1f);
    p.Random(b + "attn_k_norm.weight", DType::kF32, {d}, 1.0f, 0.1f);
    p.Random(b + "post_attention_norm.weight", DType::kF32, {E}, 2.0f, 0.1f);
    p.Random(b + "ffn_norm.weight", DType::kF32, {E}, 1.0f, 0.1f);
    p.Random(b + "ffn_gate.weight", pick.Pick(Role::kFfnGateUp, il, E), {E, F}, 0.0f, InvSqrt(E));
    p.Random(b + "ffn_up.weight", pick.Pick(Role::kFfnGateUp, il, E), {E, F}, 0.0f, InvSqrt(E));
    p.Random(b + "ffn_down.weight", pick.Pick(Role::kFfnDown, il, F), {F, E}, 0.0f, InvSqrt(F));
    p.Random(b + "post_ffw_norm.weight", DType::kF32, {E}, 2.0f, 0.1f);
    p.Random(b + "ffn_gate_inp.weight", pick.Pick(Role::kRouter, il, E), {E, s.n_expert}, 0.0f,
             2.0f * InvSqrt(E));
    const float sqrt_e = std::sqrt(static_cast<float>(E));
    p.Random(b + "ffn_gate_inp.scale", DType::kF32, {E}, sqrt_e, 0.1f * sqrt_e);
    p.Random(b + "pre_ffw_norm_2.weight", DType::kF32, {E}, 1.0f, 0.1f);
    p.Random(b + "post_ffw_norm_1.weight", DType::kF32, {E}, 2.0f, 0.1f);
    p.Random(b + "post_ffw_norm_2.weight", DType::kF32, {E}, 2.0f, 0.1f);
    p.Random(b + "ffn_gate_up_exps.weight", pick.Pick(Role::kFfnGateUp, il, E), {E, 2 * X, s.n_expert}, 0.0f,
             InvSqrt(E), used);
    p.Random(b + "ffn_down_exps.weight", pick.Pick(Role::kFfnDown, il, X), {X, E, s.n_expert}, 0.0f,
             InvSqrt(X), used);
    p.Random(b + "ffn_down_exps.scale", DType::kF32, {s.n_expert}, 1.0f, 0.2f);
    p.Random(b + "layer_output_scale.weight", DType::kF32, {1}, 0.8f, 0.1f);
  }
}

int WriteAndCheck(GgufWriter& w, const Plan& plan, const std::string& out, const std::string& arch_name,
                  const std::string& type) {
  std::fprintf(stderr, "%s: %s %s, %d tensors, %.3fB weights (%.2f GB), active per token %.3fB (%.2f GB)\n",
               out.c_str(), arch_name.c_str(), type.c_str(), plan.n_tensors(), plan.params() / 1e9,
               plan.bytes() / 1e9, plan.active_params() / 1e9, plan.active_bytes() / 1e9);
  w.Write(out);
  if (isatty(STDERR_FILENO)) std::fprintf(stderr, "\r%-60s\r", "");
  // Read it back: the same validation every loader of ours applies.
  const auto file = GgufFile::Open(out);
  if (static_cast<int>(file->tensors().size()) != plan.n_tensors()) {
    Fail(out, ": tensor count mismatch on re-reading");
  }
  std::fprintf(stderr, "wrote %s\n", out.c_str());
  return 0;
}

struct Override {
  const char* flag;
  int value;
};

// The deepseek4 shape named by --shape, with the vocabulary of --vocab-from.
Deepseek4Shape Deepseek4ShapeNamed(const std::string& shape_name, const std::string& vocab_from, const char* arch) {
  Deepseek4Shape s;
  if (shape_name.empty() || shape_name == "bench") s = Deepseek4BenchShape();
  else if (shape_name == "fixture") s = Deepseek4FixtureShape();
  else Fail("unknown --shape ", shape_name, " for ", arch, " (bench, fixture)");
  if (!vocab_from.empty()) {
    GgufWriter probe;
    s.vocab_from = vocab_from;
    s.n_vocab = CopyVocab(probe, vocab_from);
  }
  return s;
}

int WriteDeepseek4(const std::string& out, const std::string& type, const std::string& shape_name, int n_layers,
                   const std::string& vocab_from, const Override* ov, size_t n_ov) {
  Deepseek4Shape s = Deepseek4ShapeNamed(shape_name, vocab_from, "deepseek4");
  for (size_t i = 0; i < n_ov; ++i) {
    if (ov[i].value != 0 && std::strcmp(ov[i].flag, "--layers") != 0) {
      Fail(ov[i].flag, " does not apply to --arch deepseek4 (--shape and --layers do)");
    }
  }
  if (n_layers > s.n_layer()) Fail("--layers ", n_layers, " exceeds the shape's ", s.n_layer());
  if (n_layers > 0) s.ratios.resize(n_layers);
  CheckDeepseek4Shape(s);
  GgufWriter w;
  Plan plan(w);
  PlanDeepseek4(w, plan, s, type);
  return WriteAndCheck(w, plan, out, "deepseek4", type);
}

// A DSpark drafter for the deepseek4 target of --shape (its hidden size,
// heads and experts); --layers: its stages.
int WriteDSpark(const std::string& out, const std::string& type, const std::string& shape_name, int n_stages,
                const std::string& vocab_from) {
  const Deepseek4Shape s = Deepseek4ShapeNamed(shape_name, vocab_from, "dspark (the target's)");
  DSparkShape d;
  if (n_stages > 0) d.n_stages = n_stages;
  if (shape_name != "fixture") d.window = s.window, d.block_size = 8, d.markov_rank = 256, d.taps = {1, 6, 11};
  for (int t : d.taps) {
    if (t > s.n_layer()) Fail("dspark: tap ", t, " is past the target's ", s.n_layer(), " layers");
  }
  CheckDeepseek4Shape(s);
  GgufWriter w;
  Plan plan(w);
  PlanDSpark(w, plan, s, d, type);
  return WriteAndCheck(w, plan, out, "dflash", type);
}

// qwen35 / qwen35moe of --shape (bench, fixture); --layers: trunk layers.
int WriteQwen35(const std::string& out, const std::string& type, const std::string& shape_name, bool experts,
                int n_layers, const std::string& vocab_from) {
  const char* arch = experts ? "qwen35moe" : "qwen35";
  Qwen35Shape s;
  if (shape_name.empty() || shape_name == "bench") s = Qwen35BenchShape(experts);
  else if (shape_name == "fixture") s = Qwen35FixtureShape(experts);
  else Fail("unknown --shape ", shape_name, " for ", arch, " (bench, fixture)");
  if (n_layers > 0) s.n_layer = n_layers;
  if (!vocab_from.empty()) {
    GgufWriter probe;
    s.vocab_from = vocab_from;
    s.n_vocab = CopyVocab(probe, vocab_from);
  }
  CheckQwen35Shape(s);
  GgufWriter w;
  Plan plan(w);
  PlanQwen35(w, plan, s, type);
  return WriteAndCheck(w, plan, out, arch, type);
}

int ParseInt(const std::string& flag, const std::string& v) {
  char* end = nullptr;
  errno = 0;
  const long n = std::strtol(v.c_str(), &end, 10);
  if (v.empty() || *end != '\0' || errno != 0 || n < 1 || n > (1 << 24)) {
    Fail(flag, ": expected a positive integer, got '", v, "'");
  }
  return static_cast<int>(n);
}

int Main(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--help" || a == "-h") {
      std::fputs(kUsage, stdout);
      return 0;
    }
  }
  if (argc < 2 || argv[1][0] == '-') {
    std::fputs(kUsage, stderr);
    return 2;
  }
  std::string out = argv[1], type = "F16", shape_name, arch_name = "llama", vocab_from;
  Override ov[] = {{"--embd", 0},    {"--layers", 0},  {"--heads", 0},   {"--kv-heads", 0},
                   {"--head-dim", 0}, {"--vocab", 0},   {"--ff", 0},      {"--experts", 0},
                   {"--experts-used", 0}, {"--ff-exp", 0}};
  for (int i = 2; i < argc; i += 2) {
    const std::string flag = argv[i];
    if (i + 1 >= argc) Fail(flag, " needs a value (see --help)");
    const std::string value = argv[i + 1];
    if (flag == "--type") type = value;
    else if (flag == "--shape") shape_name = value;
    else if (flag == "--arch") arch_name = value;
    else if (flag == "--vocab-from") vocab_from = value;
    else {
      bool known = false;
      for (Override& o : ov) {
        if (flag == o.flag) {
          o.value = ParseInt(flag, value);
          known = true;
        }
      }
      if (!known) Fail("unknown flag ", flag, " (see --help)");
    }
  }
  CheckType(type);
  auto get = [&](const char* flag) -> int {
    for (const Override& o : ov) {
      if (std::strcmp(o.flag, flag) == 0) return o.value;
    }
    return 0;
  };

  Arch arch;
  Shape s;
  if (arch_name == "llama") {
    arch = Arch::kLlama;
    if (shape_name.empty()) shape_name = "1b";
    if (shape_name == "1b") s = {2048, 16, 32, 8, 5632, 128256};
    else if (shape_name == "tiny") s = {256, 2, 4, 2, 512, 1024};
    else Fail("unknown --shape ", shape_name, " (1b, tiny)");
    for (const char* f : {"--head-dim", "--experts", "--experts-used", "--ff-exp"}) {
      if (get(f) != 0) Fail(f, " applies to --arch qwen3moe and gemma4, not llama");
    }
  } else if (arch_name == "qwen3moe" || arch_name == "gemma4") {
    if (!shape_name.empty()) {
      Fail("--shape applies to --arch llama; for ", arch_name, " use --embd, --layers, ... (see --help)");
    }
    if (arch_name == "qwen3moe") {
      arch = Arch::kQwen3Moe;
      s = {1024, 12, 16, 4, 0, 32000, 0, 64, 8, 512};
    } else {
      arch = Arch::kGemma4;
      s = {2816, 6, 16, 8, 2112, 262144, 256, 128, 8, 704};
    }
  } else if (arch_name == "deepseek4") {
    return WriteDeepseek4(out, type, shape_name, get("--layers"), vocab_from, ov, std::size(ov));
  } else if (arch_name == "dspark") {
    for (const Override& o : ov) {
      if (o.value != 0 && std::strcmp(o.flag, "--layers") != 0) Fail(o.flag, " does not apply to --arch dspark");
    }
    return WriteDSpark(out, type, shape_name, get("--layers"), vocab_from);
  } else if (arch_name == "qwen35" || arch_name == "qwen35moe") {
    for (const Override& o : ov) {
      if (o.value != 0 && std::strcmp(o.flag, "--layers") != 0) Fail(o.flag, " does not apply to --arch ", arch_name);
    }
    return WriteQwen35(out, type, shape_name, arch_name == "qwen35moe", get("--layers"), vocab_from);
  } else {
    Fail("unknown --arch ", arch_name, " (llama, qwen3moe, gemma4, deepseek4, dspark, qwen35, qwen35moe)");
  }
  if (!vocab_from.empty()) Fail("--vocab-from applies to --arch deepseek4, dspark, qwen35 and qwen35moe");
  const std::pair<const char*, int*> fields[] = {
      {"--embd", &s.n_embd},         {"--layers", &s.n_layer},    {"--heads", &s.n_head},
      {"--kv-heads", &s.n_head_kv},  {"--head-dim", &s.head_dim}, {"--vocab", &s.n_vocab},
      {"--ff", &s.n_ff},             {"--experts", &s.n_expert},  {"--experts-used", &s.n_expert_used},
      {"--ff-exp", &s.n_ff_exp}};
  for (const auto& [flag, field] : fields) {
    if (get(flag) != 0) *field = get(flag);
  }
  // Derived defaults and consistency.
  if (arch != Arch::kGemma4 && s.head_dim == 0) {
    if (s.n_embd % s.n_head != 0) Fail("--embd ", s.n_embd, " is not a multiple of --heads ", s.n_head);
    s.head_dim = s.n_embd / s.n_head;
  }
  if (arch == Arch::kQwen3Moe && s.n_ff == 0) s.n_ff = s.n_ff_exp * s.n_expert_used;
  if (s.n_head % s.n_head_kv != 0) {
    Fail("--heads ", s.n_head, " is not a multiple of --kv-heads ", s.n_head_kv);
  }
  if (const int kv_global = std::max(1, s.n_head_kv / 4); arch == Arch::kGemma4 && s.n_head % kv_global != 0) {
    Fail("--heads ", s.n_head, " is not a multiple of the global layers' kv heads ", kv_global);
  }
  if (s.head_dim % 2 != 0) Fail("head dim ", s.head_dim, " is odd (rope needs pairs)");
  if (arch == Arch::kGemma4 && s.head_dim % 4 != 0) {
    Fail("--head-dim ", s.head_dim, " is not a multiple of 4");
  }
  if (arch != Arch::kLlama && s.n_expert_used > s.n_expert) {
    Fail("--experts-used ", s.n_expert_used, " exceeds --experts ", s.n_expert);
  }
  if (s.n_vocab < 260) {
    Fail("--vocab ", s.n_vocab, " is too small (the vocabulary has 259 special and byte tokens)");
  }

  GgufWriter w;
  Plan plan(w);
  switch (arch) {
    case Arch::kLlama: PlanLlama(w, plan, s, type, shape_name); break;
    case Arch::kQwen3Moe: PlanQwen3Moe(w, plan, s, type); break;
    case Arch::kGemma4: PlanGemma4(w, plan, s, type); break;
  }
  return WriteAndCheck(w, plan, out, arch_name, type);
}

}  // namespace
}  // namespace kakeya

int main(int argc, char** argv) {
  try {
    return kakeya::Main(argc, argv);
  } catch (const kakeya::Error& e) {
    std::fprintf(stderr, "make-bench-model: error: %s\n", e.what());
    return 2;
  }
}
