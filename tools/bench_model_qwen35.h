// make-bench-model --arch qwen35 | qwen35moe: Qwen3.5's layers at reduced
// size (docs/formats/qwen35.md): Gated DeltaNet layers with every
// full_attention_interval-th one gated full attention, a SwiGLU FFN or a
// softmax mixture beside a sigmoid-gated shared expert; optionally one MTP
// block after the trunk.
#pragma once

#include <string>

#include "bench_model_plan.h"

namespace kakeya {

struct Qwen35Shape {
  bool experts = false;  // qwen35moe
  int n_embd = 0, n_layer = 0, full_attention_interval = 4, n_vocab = 0;
  int n_head = 0, n_head_kv = 0, head_dim = 0, n_rot = 0;
  int rope_sections[4] = {0, 0, 0, 0};
  int conv_kernel = 4, n_k_heads = 0, n_v_heads = 0, head_k_dim = 0;  // value heads are head_k_dim wide too
  int n_ff = 0;                                        // the dense FFN
  int n_expert = 0, n_expert_used = 0, n_ff_exp = 0, n_ff_shared = 0;
  bool mtp = false;
  std::string vocab_from;  // copy this GGUF's tokenizer (n_vocab is its size) instead of a filler one
};

// --shape bench: qwen35moe at 35B-A3B's widths, 8 layers and 64 experts.
Qwen35Shape Qwen35BenchShape(bool experts);
// --shape fixture: the tests' random model (tests/fixtures/models4).
Qwen35Shape Qwen35FixtureShape(bool experts);
// Exits through Error on a shape the architecture does not allow.
void CheckQwen35Shape(const Qwen35Shape& s);
void PlanQwen35(GgufWriter& w, Plan& p, const Qwen35Shape& s, const std::string& type);

}  // namespace kakeya
