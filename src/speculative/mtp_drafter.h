// Multi-token prediction (MTP / NextN, docs/formats/drafters.md 5.1; llama.cpp's
// draft-mtp): a NextN block, the target's own or an MTP sidecar file's,
// predicts the token after next from the target's hidden state and the next
// token; fed its own output, it drafts several tokens.
//
// One MTP row, for the pair (h_{p-1}, x_p) at position p, h being the
// target's hidden state after output_norm (the LM head's input):
//   u  = eh_proj . [rms(embed(x_p), enorm); rms(h_{p-1}, hnorm)]
//   h' = rms(block(u), shared_head_norm)       logits = head . h'
// embed is the target's embedding as its own forward scales it (gemma: times
// sqrt(n_embd)); block is a decoder layer of the target's architecture with
// a KV cache of its own. The block runs as the one layer of a Model view
// (Model::NextnView) in a Context of its own, fed u through
// Context::ForwardEmbedded: the architecture's own layer code and kernels, so
// the rows are bit-identical however they are batched, nothing allocates per
// step and trimming is O(1), as for the target. The view's output norm and
// head are the block's, so the context's logits are the MTP logits and h' is
// its final tap, normed.
//
// With a draft vocabulary (MtpOptions::draft_vocab, ADR 0021) the view's head
// keeps the target head's first rows: the logits are those ids' only.
//
// deepseek4 (docs/formats/deepseek4.md 7): h is the target's four
// hyper-connection streams before the head's mixer, unnormed; each stream
// pairs with the embedding (u has four streams, each eh_proj . [rms(e,
// enorm); rms(h_s, hnorm)]), and h' is the block's output streams, which the
// view's head mixer, head norm and head turn into logits.
//
// Cache protocol. The MTP cache holds position p for every committed p,
// decoded from the committed pair (h_{p-1}, x_p) (h_{-1} = 0). Observe()
// only keeps the target's h of the rows it committed; the pairs are decoded
// when the next Draft() needs the cache, in the same forward as its first
// row: Draft() decodes every committed pair from the cache's end up to
// (h_{pos0-1}, id_last) at pos0, whose logits give the first proposal (the
// bonus and the accepted drafts of a verify step are one or a few rows, so
// that forward reads the block's weights once and runs the head once; the
// rows before the last need no logits). Then (h'_k, d_k) at pos0 + k, as
// pending rows, trimmed before it returns. llama.cpp decodes the accepted
// rows after each verify with their own head product, and pos0's row twice;
// the bits are the same, since rows do not depend on how they are batched.
// A prompt's pairs, and those of steps that go by without a Draft() (plain
// steps, another drafter of auto), Observe() decodes once more than 16 wait.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "model/context.h"
#include "model/model.h"
#include "speculative/drafter.h"

namespace kakeya {

struct MtpOptions {
  int n_max = 3;         // most drafts per step (llama.cpp's default)
  int n_ctx = kDefaultContextSize;  // positions of the MTP cache: give the target's
  int max_batch = 512;   // the most rows one Observe() brings: give the target context's
  ThreadPool* shared_pool = nullptr;  // run on the target's pool (recommended) instead of n_threads of its own
  int n_threads = 2;
  int draft_vocab = 0;  // its head scores the first draft_vocab token ids (DraftVocabSize; 0: all)
};

class MtpDrafter final : public Drafter {
 public:
  // The target's own NextN block when sidecar_path is empty, else the block
  // of that MTP sidecar file. Throws Error naming the file and what does not
  // fit: no NextN block, another architecture, hidden size, vocabulary,
  // attention heads, or the block's layer index.
  MtpDrafter(const Model& target, const std::string& sidecar_path, const MtpOptions& options);
  ~MtpDrafter() override;

  std::string name() const override { return "mtp"; }
  std::vector<int> target_taps() const override { return {target_.hparams().n_layer}; }
  void Begin(std::span<const TokenId> prompt) override;
  void Observe(const Context& target, int n_rows) override;
  // Greedy drafts (deterministic: verification treats them as one-hot).
  // Proposes nothing when the drafter has not seen every committed row.
  int Draft(const DraftRequest& request, std::span<TokenId> out) override;
  void Accept(std::span<const TokenId> history, int drafted, int accepted) override;

  const Context& context() const { return *ctx_; }

 private:
  // Brings tokens_ up to the committed history.
  void Sync(std::span<const TokenId> history);
  // Commits the last Draft()'s pairs and decodes every pair known so far.
  void DecodeKnownPairs();
  // Decodes and commits the positions from the cache's end up to `end`
  // (exclusive), whose pairs must be known; the last row's logits follow.
  void DecodePairs(int end);
  // Drops the kept h rows no decode needs any more.
  void ForgetUsedH();
  // Runs n rows at the MTP cache's next positions, pair r being (h row r of
  // `h`, tokens[r]); pending until committed. The last row's logits follow.
  void Decode(const float* h, const TokenId* tokens, int n);
  // h' of row `row` of the last decode: its final residual through the head
  // norm, as the head saw it.
  void NormedOutput(int row, float* out) const;
  int h_end() const { return h_first_ + n_h_; }  // one past the last position whose h is kept
  float* h_row(int pos) const;

  const Model& target_;
  std::unique_ptr<Model> sidecar_;  // when the block comes from a file
  std::unique_ptr<Model> view_;     // the block as a one-layer model
  const NextnLayer& block_;
  MtpOptions options_;
  int n_embd_ = 0;
  int n_streams_ = 1;  // deepseek4: 4, and h is the target's streams (h_width_ values)
  int h_width_ = 0;
  std::unique_ptr<Context> ctx_;
  // The target's h (after output_norm) of positions h_first_ .. h_end() - 1:
  // the last decoded pair's successor's h, then rows not decoded yet.
  int h_capacity_ = 0;
  Buffer<float> h_;
  int h_first_ = 0;
  int n_h_ = 0;
  std::vector<TokenId> tokens_;  // the committed tokens, as far as known
  Buffer<float> pairs_;   // F32 [max_batch, n_streams, 2 * n_embd]: [rms(embed(x), enorm); rms(h, hnorm)]
  Buffer<float> inputs_;  // F32 [max_batch, h_width]: eh_proj . pair
  Buffer<float> chained_h_;  // F32 [h_width]: h' of the last draft row
  Buffer<uint8_t> matmul_;   // MatMul scratch for eh_proj
};

// The registry's row (drafter_registry.cc): the sidecar in setup.path, or the
// target's own NextN layers when it is empty.
std::unique_ptr<Drafter> MakeMtpDrafter(const DrafterSetup& setup);

}  // namespace kakeya
