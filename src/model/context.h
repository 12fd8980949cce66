// Per-sequence inference state: the KV cache and every scratch buffer a
// forward pass needs, allocated once at construction so that Forward() does
// not allocate (DESIGN.md invariant 4).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "base/thread_pool.h"
#include "cache/kv_cache.h"
#include "model/forward_pass.h"
#include "model/model.h"

namespace kakeya {

struct ContextOptions {
  int n_ctx = 2048;      // positions the KV cache holds
  int max_batch = 512;   // rows per Forward() call, and rows that can be trimmed again
  int n_threads = 2;
  int max_logit_rows = 0;  // rows of logits one Forward() may return; 0 means max_batch
  // Run on this pool instead of starting n_threads of our own: a drafter's
  // context shares the target's, so the two never compete for the cores.
  ThreadPool* shared_pool = nullptr;
};

class Context {
 public:
  // Throws Error if the options are out of range for the model.
  Context(const Model& model, const ContextOptions& options);
  ~Context();

  // Runs tokens at positions n_past() .. n_past() + tokens.size() - 1 (at most
  // max_batch rows, and at most max_logit_rows when all_logits), appends their
  // keys and values to the cache as pending rows, and computes logits for
  // every row if all_logits, else for the last row only.
  // Row i's logits are bit-identical however the tokens are split into calls
  // and whatever the thread count. Throws Error on an out-of-range token id or
  // when the cache would overflow n_ctx.
  void Forward(std::span<const TokenId> tokens, bool all_logits);
  // The same for rows given as the first layer's input, F32 [n, n_embd]
  // (instead of token embeddings): MTP heads feed their own projections.
  void ForwardEmbedded(std::span<const float> rows, bool all_logits);

  // Logits of row i of the last Forward() (i = 0 when only the last row was asked for).
  std::span<const float> logits(int i) const;
  int n_logit_rows() const { return n_logit_rows_; }

  // Hidden-state taps for drafters that read the target's features. Tap l in
  // [0, n_layer] is the residual stream entering layer l (l == n_layer: the
  // final residual, before output_norm), kept for every row of a forward.
  // Allocates; call at set-up, not per step. No taps: nothing is copied.
  // Duplicates are kept once, so several drafters can ask for the same layer.
  void SetHiddenTaps(std::vector<int> layers);
  // F32 [n_embd]: tap `layer` (one of SetHiddenTaps'), row i of the last
  // Forward() (every row, whether it got logits or not).
  std::span<const float> tap(int layer, int i) const;
  const std::vector<int>& hidden_taps() const { return taps_; }

  // Cache bookkeeping (cache/kv_cache.h): rows of a Forward are pending until
  // committed; Trim(n) drops the last n pending rows in O(1).
  int n_past() const { return cache_->n_past(); }
  int n_committed() const { return cache_->n_committed(); }
  void Commit() { cache_->Commit(); }
  void Trim(int n) { cache_->Trim(n); }
  void Clear() { cache_->Clear(); }
  const KvCache& cache() const { return *cache_; }

  // Distinct (layer, expert) pairs the last Forward() ran: each touched
  // expert of each mixture is read once per forward, for all of its rows.
  int experts_touched() const { return s_->experts_touched; }
  // The bytes a forward read from weights: every dense matrix, plus the
  // touched experts' (Model::dense_weight_bytes, expert_bytes).
  size_t weight_bytes_read() const { return model_.dense_weight_bytes() + s_->expert_bytes_read; }

  // Router near-ties, for tests against another engine: the margin by which
  // row i's last chosen expert beat the best unchosen one in layer il's
  // router during the last Forward() (+inf for layers without experts), and,
  // for the next Forward() only, (layer, row) pairs that take that runner-up
  // instead. Where two experts score within rounding noise, either engine's
  // choice is right; a test replays the other engine's.
  float routing_margin(int il, int i) const;
  void TakeRunnerUpExpert(int il, int i);

  const Model& model() const { return model_; }
  const ContextOptions& options() const { return options_; }
  ThreadPool& pool() { return pool_; }

 private:
  void Run(const TokenId* tokens, const float* input_rows, int n, bool all_logits);

  const Model& model_;
  ContextOptions options_;
  std::unique_ptr<ThreadPool> own_pool_;  // unless options.shared_pool
  ThreadPool& pool_;
  std::unique_ptr<KvCache> cache_;
  std::unique_ptr<ForwardBuffers> s_;
  std::vector<int> taps_;
  Buffer<float> tap_rows_;  // F32 [n_taps, max_batch, n_embd]
  int n_logit_rows_ = 0;
};

}  // namespace kakeya
