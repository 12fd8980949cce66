// Per-sequence inference state: the KV cache and every scratch buffer a
// forward pass needs, allocated once at construction so that Forward() does
// not allocate (DESIGN.md invariant 4).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "base/thread_pool.h"
#include "model/model.h"

namespace kakeya {

struct ContextOptions {
  int n_ctx = 2048;      // positions the KV cache holds
  int max_batch = 512;   // rows per Forward() call (longer prompts are chunked by the caller)
  int n_threads = 2;
  int max_logit_rows = 0;  // rows of logits one Forward() may return; 0 means max_batch
};

class Context {
 public:
  // Throws Error if the options are out of range for the model.
  Context(const Model& model, const ContextOptions& options);
  ~Context();

  // Runs tokens at positions n_past() .. n_past() + tokens.size() - 1 (at most
  // max_batch rows, and at most max_logit_rows when all_logits), appends their keys and values to the cache, and computes
  // logits for every row if all_logits, else for the last row only.
  // Row i's logits are bit-identical however the tokens are split into calls
  // and whatever the thread count. Throws Error on an out-of-range token id or
  // when the cache would overflow n_ctx.
  void Forward(std::span<const TokenId> tokens, bool all_logits);

  // Logits of row i of the last Forward() (i = 0 when only the last row was asked for).
  std::span<const float> logits(int i) const;
  int n_logit_rows() const { return n_logit_rows_; }

  int n_past() const { return n_past_; }
  // Forgets cached positions >= n (O(1)).
  void TruncateTo(int n);

  const Model& model() const { return model_; }
  const ContextOptions& options() const { return options_; }
  ThreadPool& pool() { return pool_; }

 private:
  struct Scratch;
  const Model& model_;
  ContextOptions options_;
  ThreadPool pool_;
  std::unique_ptr<Scratch> s_;
  int n_past_ = 0;
  int n_logit_rows_ = 0;
};

}  // namespace kakeya
