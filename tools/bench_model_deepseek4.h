// make-bench-model --arch deepseek4: DeepSeek-V4-Flash's layer at reduced
// size (docs/formats/deepseek4.md): four hyper-connection streams, one
// shared key/value head with RoPE on its last dims, raw-window attention
// plus compressed blocks (ratio 4 with the lightning indexer, ratio 128),
// sqrt-softplus routing with token-hash layers first, a clamped SwiGLU, an
// ungated shared expert; optionally one MTP block after the trunk.
#pragma once

#include <string>
#include <vector>

#include "bench_model_plan.h"

namespace kakeya {

struct Deepseek4Shape {
  int n_embd = 0, n_head = 0, head_dim = 0, n_rot = 0, q_lora = 0;
  int o_groups = 0, o_lora = 0, window = 0, n_vocab = 0;
  int n_expert = 0, n_expert_used = 0, n_ff_exp = 0, n_shared = 1, n_hash_layers = 0;
  int indexer_heads = 0, indexer_dim = 0, indexer_top_k = 0;
  std::vector<int> ratios;  // per trunk layer: 0, 4 or 128
  bool mtp = false;         // one NextN block after the trunk
  float clamp_experts = 10.0f, clamp_shared = 10.0f;
  float yarn_factor = 16.0f;  // compressed layers' RoPE; yarn_orig_ctx 0: no YaRN
  int yarn_orig_ctx = 65536;
  std::string vocab_from;  // copy this GGUF's tokenizer (n_vocab is its size) instead of a filler one
  int n_layer() const { return static_cast<int>(ratios.size()); }
};

// --shape bench: 1.6B weights (and an MTP block), 0.43 GB read per token in Q8_0, n_embd 1024.
Deepseek4Shape Deepseek4BenchShape();
// --shape fixture: the tests' random model (tests/fixtures/models3).
Deepseek4Shape Deepseek4FixtureShape();
// Exits through Error on a shape the architecture does not allow.
void CheckDeepseek4Shape(const Deepseek4Shape& s);
void PlanDeepseek4(GgufWriter& w, Plan& p, const Deepseek4Shape& s, const std::string& type);

// make-bench-model --arch dspark: a DSpark drafter (a dflash file of
// deepseek4 stages with a Markov head) for the deepseek4 target of shape s.
struct DSparkShape {
  int n_stages = 2, window = 8, block_size = 4, markov_rank = 16;
  std::vector<int> taps = {1, 3, 5};  // target layer inputs
};
void PlanDSpark(GgufWriter& w, Plan& p, const Deepseek4Shape& s, const DSparkShape& d, const std::string& type);

}  // namespace kakeya
