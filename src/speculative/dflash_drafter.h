// DFlash block drafter (docs/formats/drafters.md 5.2; tests/fixtures/models2/README.md
// "DFlash"; llama.cpp src/models/dflash.cpp): a small non-causal transformer
// that reads the target's hidden states and proposes a whole block in one
// forward.
//
// Context. After every target forward (Observe), each committed position p
// gets g = rms(fc . concat(taps of p), enc.output_norm), and every drafter
// layer keeps K = rope(rms_head(Wk g, attn_k_norm), p) and V = Wv g at p in
// its own cache. The cache follows the target's committed count, so a
// rejected row is never injected and rollback costs nothing.
//
// Draft. The block [id_last, mask x (block_size - 1)] at positions pos0 ..
// pos0 + block_size - 1 runs through the layers; every block row attends to
// the context and to all block rows (non-causal unless attention.causal);
// rows 1.. give the proposals through the target's LM head, greedily. The
// block's K/V sit right after the context, where the next Observe
// overwrites them.
#pragma once

#include <memory>
#include <span>
#include <string>
#include <vector>

#include "base/thread_pool.h"
#include "gguf/gguf.h"
#include "model/forward_pass.h"
#include "model/layer.h"
#include "model/model.h"
#include "speculative/drafter.h"

namespace kakeya {

class DFlashDrafter final : public Drafter {
 public:
  // Loads the drafter from `path` for `target`; n_ctx: the target context's
  // positions. Runs on `pool` (the target's). Throws Error naming the file
  // and what does not fit the target (hidden size, vocabulary, tap layers) or
  // what kakeya does not implement (DFlash2, DSpark, d2t, M-RoPE, sliding
  // window).
  DFlashDrafter(const Model& target, const std::string& path, int n_ctx, ThreadPool& pool);
  ~DFlashDrafter() override;

  std::string name() const override { return "dflash"; }
  std::vector<int> target_taps() const override { return taps_; }
  void Begin(std::span<const TokenId> prompt) override;
  void Observe(const Context& target, int n_rows) override;
  // For n proposals runs the block's first n + 1 rows (the bonus and n
  // masks), not all block_size: the rows after them are masks too, so
  // dropping them changes the others' attention only a little (unseen code,
  // shipped drafter: 1.80 / 2.36 / 2.75 tokens per step at block 2 / 3 / 4
  // against 1.80 / 2.40 / 2.81 with the whole block) for a third of the
  // forward at n = 1. With n = block_size - 1 it is the trained block, as
  // llama.cpp runs it. Proposes nothing unless Observe has injected exactly
  // the committed positions before the bonus.
  int Draft(const DraftRequest& request, std::span<TokenId> out) override;
  void Accept(std::span<const TokenId> history, int drafted, int accepted) override {}

  int block_size() const { return block_size_; }
  // Raw logits of proposal i of the last Draft() (block row i + 1), F32 [n_vocab].
  std::span<const float> logits(int i) const;

 private:
  // One layer's context keys and values: plain F32 rows, every head of a
  // position together, so that the projections are written straight into them.
  struct ContextRows {
    int k_width = 0, v_width = 0;
    Buffer<float> k;  // F32 [capacity, k_width]
    Buffer<float> v;  // F32 [capacity, v_width]
    float* key(int pos) { return k.get() + size_t(pos) * k_width; }
    float* value(int pos) { return v.get() + size_t(pos) * v_width; }
  };
  void Load(const std::string& path);
  void AllocateBuffers(int n_ctx);
  // Context injection of n rows of the target's last forward, from row
  // `row0`, at positions pos0 ..
  void InjectContext(const Context& target, int row0, int pos0, int n);
  // RoPE angles of positions pos0 .. pos0 + n - 1 into angles_.
  void PrepareAngles(int pos0, int n);
  // Finishes the keys and values the projections wrote at positions pos0 ..
  // pos0 + n - 1 of the layer's cache: values from keys, key norm, RoPE.
  void StoreKeysValues(const Layer& L, ContextRows& cache, int pos0, int n);
  // The block forward on its first n_out + 1 rows: rows 1 .. n_out get
  // logits. Its parts take the row count.
  void RunBlock(TokenId id_last, int pos0, int n_out);
  void RmsNormRows(const float* in, const float* weight, int n, float* out) const;
  void BlockAttention(const Layer& L, ContextRows& cache, int pos0, int rows);
  void BlockFfn(const Layer& L, int rows);

  const Model& target_;
  ThreadPool& pool_;
  std::unique_ptr<GgufFile> file_;  // the drafter's unpacked matrices are read from its mapping

  // Hyper-parameters.
  int n_embd_ = 0;
  int block_size_ = 16;
  TokenId mask_ = 0;
  float embedding_scale_ = 1.0f;
  float eps_ = 1e-6f;
  bool causal_ = false;
  std::vector<int> taps_;  // the target's layer-input taps, in fc's input order

  // Weights.
  WeightMatrix fc_;                     // [n_taps * n_embd, n_embd]
  const float* enc_norm_ = nullptr;     // F32 [n_embd]
  const float* output_norm_ = nullptr;  // F32 [n_embd]
  std::vector<Layer> layers_;           // Qwen3-style: q/k norms, NEOX RoPE, gated FFN
  WeightMatrix token_embd_;             // [n_embd, n_vocab], own or the target's
  WeightMatrix head_;                   // [n_embd, n_vocab], own or the target's
  Buffer<uint8_t> packed_;              // the drafter's matrices in their MatMul layout

  // State: positions [0, n_context_) of every layer's keys and values hold
  // the injected context; capacity n_ctx + block_size, so a block fits after
  // any context.
  std::vector<ContextRows> cache_;
  int capacity_ = 0;
  int n_context_ = 0;

  // Scratch, sized once: max_rows_ rows for what Observe uses too (it
  // injects in chunks of max_rows_ >= block_size), block_size rows for the rest.
  int max_rows_ = 0;
  Buffer<float> features_;       // F32 [max_rows, n_taps * n_embd]
  Buffer<float> normed_;         // F32 [max_rows, n_embd]
  Buffer<float> angles_;         // F32 [max_rows, rope dims]
  Buffer<float> x_, branch_;     // F32 [block_size, n_embd]
  Buffer<float> q_, attn_;       // F32 [block_size, q_width / out_width]
  Buffer<float> gate_, up_;      // F32 [block_size, n_ff]
  size_t attention_floats_ = 0;  // AttendKvHead scratch per thread
  Buffer<float> scores_;         // F32 [threads, attention_floats]
  Buffer<uint8_t> matmul_;       // MatMul scratch
  Buffer<float> logits_;         // F32 [block_size - 1, n_vocab]
};

// The registry's row (drafter_registry.cc): the DFlash drafter in setup.path.
std::unique_ptr<Drafter> MakeDFlashDrafter(const DrafterSetup& setup);

}  // namespace kakeya
