// One sequence's inference state: its KV cache, and where its rows sit in
// the last forward of the Workspace it runs on (model/workspace.h). A Context
// made alone gets a workspace of its own; a server's slots share one, and
// RunForward runs the rows of several sequences in one forward. Forwards do
// not allocate (docs/design.md, invariant 4): everything is sized at construction.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "base/thread_pool.h"
#include "cache/kv_cache.h"
#include "model/model.h"
#include "model/workspace.h"

namespace kakeya {

struct ContextOptions {
  int n_ctx = 2048;      // positions the KV cache holds
  int max_batch = 512;   // rows per Forward() call, and rows that can be trimmed again
  int n_threads = 2;
  int max_logit_rows = 0;  // rows of logits one Forward() may return; 0 means max_batch
  // Rows a trim may drop at once in a model with recurrent layers, whose
  // state keeps what a rollback that far needs (cache/recurrent_state.h);
  // 0 means max_logit_rows. At most max_batch and kMaxRecurrentRollback.
  int max_rollback = 0;
  // Run on this pool instead of starting n_threads of our own: a drafter's
  // context shares the target's, so the two never compete for the cores.
  ThreadPool* shared_pool = nullptr;
  // Run on this workspace, shared with other sequences (a server's slots),
  // instead of one of our own; n_threads and shared_pool are then unused.
  // Its rows, logit rows and n_ctx must cover this context's.
  Workspace* workspace = nullptr;
  // How the cache stores keys and values (-ctk / -ctv, kernels/cpu/kv_types.h).
  // The codec's types (kakeya4, kakeya3) go together, keys and values both.
  KvType cache_type_k = KvType::kF32;
  KvType cache_type_v = KvType::kF32;
  // When a Forward() asks for the last row's logits only, the other rows run
  // the last layer's attention (their keys and values) but not its
  // feed-forward: their tap at n_layer is then not computed. For a drafter of
  // one layer (MTP) that reads the last row alone: the rows catching up its
  // cache no longer read their experts (ADR 0022).
  bool unread_rows_fill_cache_only = false;
};

class Context;

// One sequence's rows in a forward over several (RunForward): token ids, or
// the first layer's input rows, F32 [n, hidden_width] (ForwardEmbedded).
struct SequenceRows {
  Context* sequence;
  std::span<const TokenId> tokens;
  bool all_logits = false;  // logits for every row, else only the last row's
  std::span<const float> input_rows = {};
};

// One forward over the rows of several sequences on one workspace, each at
// its own positions and attending to its own cache. Every row's logits and
// taps are bit-identical to what the sequence's own Forward() gives (batch
// invariance, ADR 0001), so a sequence's output does not depend on what runs
// beside it. Afterwards each sequence's logits(i) and tap(layer, i) read its
// own rows. Throws Error, before anything runs, when a row does not fit (a
// token id, a cache that would overflow, more rows or logit rows than the
// workspace or a sequence allows, a sequence of another workspace or given
// twice).
void RunForward(Workspace& workspace, std::span<const SequenceRows> batch);

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
  // The same for rows given as the first layer's input, F32 [n, hidden_width]
  // (instead of token embeddings): MTP heads feed their own projections.
  void ForwardEmbedded(std::span<const float> rows, bool all_logits);

  // Logits of row i of the last Forward() (i = 0 when only the last row was asked for).
  std::span<const float> logits(int i) const;
  int n_logit_rows() const { return n_logit_rows_; }

  // Hidden-state taps for drafters that read the target's features. Tap l in
  // [0, n_layer] is the residual stream entering layer l (l == n_layer: the
  // final residual, before output_norm), kept for every row of a forward.
  // Allocates; call at set-up, not per step. Duplicates are kept once, so
  // several drafters can ask for the same layer.
  void SetHiddenTaps(std::vector<int> layers);
  // F32 [hidden_width] (n_embd, or deepseek4's four streams): tap `layer` (one of SetHiddenTaps'), row i of this
  // sequence's rows in the last forward (every row, whether it got logits or not; but see
  // unread_rows_fill_cache_only).
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
  // For a drafter that writes keys of its own without a forward (DSpark's
  // context injection): it appends positions, writes them, and commits.
  KvCache& mutable_cache() { return *cache_; }
  // Benchmarks only (kakeya bench verify --context N --fill random): clears
  // the cache and fills n committed positions of every layer with random
  // keys and values (unit Gaussian), stored and coded as a prefill would
  // leave them, so that attention at depth n can be timed without the
  // prefill's cost. Their content is noise: logits after it mean nothing.
  void FillCacheForBenchmark(int n, uint64_t seed);

  // Distinct (layer, expert) pairs the last Forward() ran: each touched
  // expert of each mixture is read once per forward, for all of its rows.
  int experts_touched() const { return workspace_.buffers().experts_touched; }
  // The bytes a forward read from weights: every dense matrix, plus the
  // touched experts' (Model::dense_weight_bytes, expert_bytes).
  size_t weight_bytes_read() const { return model_.dense_weight_bytes() + workspace_.buffers().expert_bytes_read; }

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
  ThreadPool& pool() { return workspace_.pool(); }
  Workspace& workspace() { return workspace_; }
  const Workspace& workspace() const { return workspace_; }

 private:
  friend void RunForward(Workspace& workspace, std::span<const SequenceRows> batch);

  const Model& model_;
  ContextOptions options_;
  std::unique_ptr<Workspace> own_workspace_;  // unless options.workspace
  Workspace& workspace_;
  std::unique_ptr<KvCache> cache_;
  std::vector<int> taps_;
  // This sequence's rows in the last forward: its first row, and its first
  // row of logits and how many.
  int first_row_ = 0;
  int first_logit_row_ = 0;
  int n_logit_rows_ = 0;
};

}  // namespace kakeya
