// Draft-model drafter: a second, smaller GGUF model with the target's
// vocabulary decodes a block autoregressively (Leviathan et al. 2023; llama.cpp's
// speculative-simple). It owns its own Context, whose cache follows the
// committed history with the same O(1) commit/trim rule as the target's.
//
// Cache protocol. The cache holds a prefix of the committed history (never the
// last committed token, whose logits Draft() needs). Draft() feeds the
// committed tokens it has not seen yet (normally just the bonus; after a fully
// accepted block also the last drafted token, which was proposed but not fed)
// and commits them, then feeds each proposal but the last as a pending row.
// Accept() keeps the pending rows whose tokens were committed at their
// positions and trims the rest.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "model/context.h"
#include "model/model.h"
#include "sampling/sampler.h"
#include "speculative/drafter.h"

namespace kakeya {

struct DraftModelOptions {
  int n_ctx = kDefaultContextSize;  // positions of the drafter's cache; give at least the target's
  int max_batch = 512;   // prompt rows per prefill Forward()
  int max_block = kAdaptiveMaxBlock;  // most tokens one Draft() proposes
  int n_threads = 2;
  ThreadPool* shared_pool = nullptr;  // run on the target's pool (recommended) instead of n_threads of its own
  // The target's sampling parameters. temperature > 0: the drafter can draw
  // from the same filtered distribution the target samples and hand its
  // distributions over, for rejection sampling (its own RNG stream, derived
  // from the seed, so that draft draws and the verifier's are independent).
  // Otherwise, and under match verification, it picks through
  // DraftRequest::Pick: the target's noise, or the argmax.
  SamplingParams sampling{.temperature = 0.0f};
  // Stop drafting once the draft model's top probability (softmax of its raw
  // logits) falls below p_min (llama.cpp --draft-p-min); 0: off.
  float p_min = 0.0f;
};

class DraftModelDrafter final : public Drafter {
 public:
  // Loads the draft model from `draft_path` and owns it. Throws Error on a bad
  // file, an incompatible vocabulary or options out of range.
  DraftModelDrafter(const Model& target, const std::string& draft_path,
                    const DraftModelOptions& options);
  // Uses a loaded draft model, which must outlive the drafter.
  DraftModelDrafter(const Model& target, const Model& draft, const DraftModelOptions& options);
  ~DraftModelDrafter() override;

  std::string name() const override { return "draft"; }
  bool samples() const override { return sampler_ != nullptr; }
  void Begin(std::span<const TokenId> prompt) override;
  // Proposes nothing when the drafter's context cannot hold the block: the loop
  // then runs plain steps. In sampled mode row i of request.probs receives q_i,
  // and the block is cut to the rows request.probs holds (empty: greedy).
  int Draft(const DraftRequest& request, std::span<TokenId> out) override;
  void Accept(std::span<const TokenId> history, int drafted, int accepted) override;

  const Context& context() const { return *ctx_; }

 private:
  // `draft` is null when `owned` is the draft model.
  DraftModelDrafter(const Model& target, std::unique_ptr<Model> owned, const Model* draft,
                    const DraftModelOptions& options);
  // Feeds history[n_committed, end) in chunks of max_batch and commits it;
  // the last chunk's last row gets logits.
  void CatchUp(std::span<const TokenId> history, int end);
  // Picks proposal i from the current logits (drawing from them into `probs`
  // when not empty, else through request.Pick); false when p_min stops the block.
  bool Pick(const DraftRequest& request, int i, std::span<float> probs, TokenId* token);

  std::unique_ptr<Model> owned_;  // set when the drafter loaded the model itself
  const Model& draft_;
  DraftModelOptions options_;
  int n_vocab_ = 0;
  std::unique_ptr<Context> ctx_;
  std::unique_ptr<Sampler> sampler_;  // sampled mode only
  std::vector<TokenId> pending_;      // [max_block] tokens of the pending rows, in order
  int n_pending_ = 0;
};

// The registry's row (drafter_registry.cc): the draft model in setup.path, on
// the target's pool, drafting up to setup.max_block - 1 tokens.
std::unique_ptr<Drafter> MakeDraftModelDrafter(const DrafterSetup& setup);

}  // namespace kakeya
