// DSpark block drafter (docs/formats/deepseek4.md 8; llama.cpp
// src/models/dflash.cpp graph_dsv4 and build_dspark_markov_head,
// common/speculative.cpp draft-dspark): the drafter later DeepSeek-V4
// checkpoints ship instead of an MTP block. A dflash file whose stages are
// deepseek4 layers (four hyper-connection streams, raw-window attention with
// sinks, the sqrt-softplus experts), run by the target's own forward pass on
// a Context of their own (kDSparkStages, Model::LoadDrafterStack), and a
// Markov head that chains the block's proposals.
//
// Context. After every target forward (Observe), each committed position p
// gets g = rms(fc . concat(taps of p), enc.output_norm), where a tap is the
// mean of the target's four streams entering that layer, and every stage's
// raw key at p is made from g (Deepseek4RawKey of kv . g) and written
// straight into the stages' cache, without a forward. Only committed rows are
// injected, so a rejected draft leaves nothing to roll back.
//
// Draft. The block [id_last, mask x (n - 1)] at positions pos0 .. pos0 + n -
// 1 runs through the stages; each row sees the window before the block and
// every row of it (unless dflash.attention.causal). Every row proposes (the
// anchor too, the reference's sample_from_anchor; with it false, rows 1 ..
// n do): proposal i's logits are its row's plus w2 . w1[prev], prev being
// id_last for the first and proposal i - 1 after. The block's rows are
// trimmed from the stages' cache afterwards.
#pragma once

#include <memory>
#include <span>
#include <string>
#include <vector>

#include "base/thread_pool.h"
#include "model/context.h"
#include "model/forward_pass.h"
#include "model/model.h"
#include "speculative/drafter.h"

namespace kakeya {

class DSparkDrafter final : public Drafter {
 public:
  // Loads the drafter at `path` for a deepseek4 `target`; n_ctx: the target
  // context's positions. Runs on `pool` (the target's). Throws Error naming
  // the file and what does not fit the target (streams, hidden size,
  // vocabulary, tap layers) or what kakeya does not implement (a DSpark head
  // on another backbone, a file with a vocabulary of its own that is smaller
  // than the target's). draft_vocab > 0: the head and the Markov bias score
  // the target's first draft_vocab token ids only (DraftVocabSize).
  DSparkDrafter(const Model& target, const std::string& path, int n_ctx, ThreadPool& pool, int draft_vocab = 0);
  ~DSparkDrafter() override;

  std::string name() const override { return "dspark"; }
  std::vector<int> target_taps() const override { return taps_; }
  void Begin(std::span<const TokenId> prompt) override;
  void Observe(const Context& target, int n_rows) override;
  // Runs as many rows as it proposes (n, plus the anchor when the anchor
  // does not propose): the trained block's first rows. Proposes nothing
  // unless Observe has injected exactly the committed positions before the bonus.
  int Draft(const DraftRequest& request, std::span<TokenId> out) override;
  void Accept(std::span<const TokenId> history, int drafted, int accepted) override {}

  int block_size() const { return block_size_; }
  // The most proposals one Draft makes.
  int max_proposals() const { return block_size_ - first_row_; }
  // Logits of proposal i of the last Draft() (its row's plus the Markov
  // bias), F32 [n_logits]: the vocabulary, or its first draft_vocab ids.
  std::span<const float> logits(int i) const;

 private:
  void BindOwnTensors(const ModelLoader& loader);
  // Context injection of n rows of the target's last forward, from row
  // `row0`, at positions pos0 ..
  void InjectContext(const Context& target, int row0, int pos0, int n);

  const Model& target_;
  ThreadPool& pool_;
  std::unique_ptr<Model> stages_;  // owns the file; its head and embeddings may be the target's
  std::unique_ptr<Context> stages_context_;

  // Hyper-parameters.
  int n_embd_ = 0;
  int block_size_ = 16;
  int first_row_ = 0;  // 0: the anchor row proposes (sample_from_anchor); 1: it does not
  TokenId mask_ = 0;
  std::vector<int> taps_;  // the target's layer-input taps, in fc's input order

  // Weights beside the stages.
  WeightMatrix fc_;                  // [n_taps * n_embd, n_embd]
  const float* enc_norm_ = nullptr;  // F32 [n_embd]
  WeightMatrix markov_w1_;           // [rank, n_vocab]: the previous token's row
  WeightMatrix markov_w2_;           // [rank, n_vocab]: the bias of every token
  float markov_scale_ = 1.0f;

  // State: positions [0, n_context_) of the stages' cache hold the injected
  // context; -1 after rows it could not inject, until the next Begin().
  int n_context_ = 0;

  // Scratch, sized once.
  int max_rows_ = 0;           // rows one injection runs
  Buffer<float> features_;     // F32 [max_rows, n_taps * n_embd]
  Buffer<float> g_;            // F32 [max_rows, n_embd]
  Buffer<float> kv_;           // F32 [max_rows, key length]
  Buffer<float> markov_row_;   // F32 [rank]
  Buffer<float> bias_;         // F32 [n_logits]
  Buffer<uint8_t> matmul_;     // MatMul scratch
  Buffer<float> logits_;       // F32 [max_proposals, n_logits]
  std::vector<TokenId> block_;  // [block_size]
};

// The registry's row (drafter_registry.cc): the DSpark drafter in setup.path.
std::unique_ptr<Drafter> MakeDSparkDrafter(const DrafterSetup& setup);

}  // namespace kakeya
