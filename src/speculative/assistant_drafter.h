// The gemma4-assistant drafter (docs/formats/drafters.md 5.3,
// tests/fixtures/models2/README.md "gemma4-assistant"; llama.cpp src/models/gemma4-assistant.cpp), run as
// --spec mtp --draft FILE. A small stack of gemma4 dense layers with no keys
// or values of its own: its layers compute queries only and attend into the
// TARGET's KV cache (sliding layers read the target's layer n_layer - 2,
// global ones its layer n_layer - 1).
//
// One draft: x = pre_projection . concat(target_embd(token) * sqrt(n_t), h),
// the layers at position pos0, o = rms(x, output_norm), logits = token_embd
// . o (the assistant's own, tied; no soft-cap), the next h = post_projection
// . o. The first draft takes id_last and the target's hidden state of the
// last committed token after the target's output_norm; each later one the
// previous proposal and the chained h. Every draft of a step sits at pos0,
// as in the HF reference and llama.cpp, so there is no catch-up decode, no
// cache of its own and nothing to trim.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "gguf/gguf.h"
#include "model/context.h"
#include "model/forward_pass.h"
#include "model/layer.h"
#include "model/model.h"
#include "speculative/drafter.h"

namespace kakeya {

struct AssistantOptions {
  int n_max = 3;  // drafts per step at most (llama.cpp's --spec-draft-n-max default)
};

class AssistantDrafter final : public Drafter {
 public:
  // Maps the assistant at `path` and checks that it fits `target` (hidden
  // size, vocabulary, the target's last sliding and global layers and their
  // KV geometry). Throws Error naming the file and the mismatch.
  // `target_context` is the context the loop drives: the drafter reads its
  // KV cache and runs on its thread pool, so it must outlive the drafter.
  AssistantDrafter(const Model& target, Context& target_context, const std::string& path,
                   const AssistantOptions& options);

  std::string name() const override { return "assistant"; }
  // The target's final residual (tap n_layer): the first draft's h is its output_norm.
  std::vector<int> target_taps() const override { return {target_.hparams().n_layer}; }
  void Begin(std::span<const TokenId> prompt) override;
  void Observe(const Context& target, int n_rows) override;
  // Greedy proposals, up to min(request.max_tokens, n_max). Proposes nothing
  // unless the target's cache holds exactly the positions before id_last and
  // Observe() gave the hidden state of the last of them.
  int Draft(const DraftRequest& request, std::span<TokenId> out) override;
  void Accept(std::span<const TokenId>, int, int) override {}

  // Raw logits of draft i of the last Draft() (tests compare them with llama.cpp's).
  std::span<const float> logits(int i) const;

 private:
  // One draft decode at pos0: input_ (embedding of the token, h) in; its
  // logits into `logits`, and the next h into input_'s second half.
  void DraftOne(TokenId token, int pos0, float* logits);
  void RunLayer(const Layer& L, int pos0);
  // Queries q_ of one layer against the target's cache before pos0, into attn_.
  void Attend(const AttentionSpec& a, int pos0);

  std::unique_ptr<GgufFile> file_;  // the assistant's weights, used in place
  const Model& target_;
  const Context& target_context_;
  ThreadPool& pool_;
  AssistantOptions options_;
  int n_embd_ = 0;    // the assistant's width
  int n_target_ = 0;  // the target's (embedding_length_out)
  int n_vocab_ = 0;
  float norm_eps_ = 0;
  WeightMatrix token_embd_;             // [n_embd, n_vocab], also the output head
  WeightMatrix pre_projection_;         // [2 * n_target, n_embd]
  WeightMatrix post_projection_;        // [n_embd, n_target]
  const float* output_norm_ = nullptr;  // F32 [n_embd]
  std::vector<Layer> layers_;           // attn.kv_layer: the target layer each one reads

  int target_h_pos_ = -1;          // position whose hidden state target_h_ holds; -1: none
  Buffer<float> target_h_;         // F32 [n_target] rms(final residual, target output_norm)
  Buffer<float> input_;            // F32 [2 * n_target] token embedding, then h
  Buffer<float> x_, xn_, branch_;  // F32 [n_embd] residual, normed input, sub-layer output
  Buffer<float> q_, attn_;         // F32 [widest n_head * head_dim]
  Buffer<float> gate_, up_;        // F32 [widest n_ff]
  Buffer<float> rope_;             // F32 [widest rotated dims] cos/sin of pos0
  Buffer<float> logits_;           // F32 [n_max, n_vocab]
  size_t attention_floats_ = 0;    // AttendKvHead scratch per thread
  Buffer<float> scores_;           // F32 [n_threads, attention_floats]
  Buffer<uint8_t> matmul_;         // MatMul scratch
};

// The registry's row (drafter_registry.cc): the assistant in setup.path, with
// the default options.
std::unique_ptr<Drafter> MakeAssistantDrafter(const DrafterSetup& setup);

}  // namespace kakeya
