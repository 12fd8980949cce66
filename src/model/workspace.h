// What the forwards over one model share, whichever sequences they serve:
// the thread pool, the scratch buffers of a forward pass, and the outputs of
// the last forward (logits and hidden-state taps of its rows), all allocated
// once at construction (docs/design.md, invariant 4). A sequence (Context) holds
// only its own state, the KV cache; a server's slots are Contexts over one
// Workspace, so one forward runs the rows of all of them (RunForward,
// context.h). ADR 0009.
#pragma once

#include <memory>
#include <vector>

#include "base/thread_pool.h"
#include "model/forward_pass.h"
#include "model/model.h"

namespace kakeya {

struct WorkspaceOptions {
  int max_rows = 512;       // rows of one forward, all sequences together
  int max_logit_rows = 0;   // rows of logits one forward may return; 0 means max_rows
  int n_ctx = 2048;         // the longest sequence's cache (attention scratch is sized for it)
  int n_threads = 2;
  ThreadPool* shared_pool = nullptr;  // run on this pool instead of starting n_threads of our own
};

class Workspace {
 public:
  // Throws Error if the options are out of range.
  Workspace(const Model& model, const WorkspaceOptions& options);
  ~Workspace();

  const Model& model() const { return model_; }
  const WorkspaceOptions& options() const { return options_; }
  ThreadPool& pool() { return pool_; }
  ForwardBuffers& buffers() { return *buffers_; }
  const ForwardBuffers& buffers() const { return *buffers_; }

  // Hidden-state taps kept for every row of a forward: the union of what the
  // sequences' drafters ask for (Context::SetHiddenTaps). Allocates; set-up only.
  void AddHiddenTaps(const std::vector<int>& layers);
  const std::vector<int>& hidden_taps() const { return taps_; }
  // F32 [hidden_width]: tap `layer`, row `row` of the last forward; null if not tapped.
  float* tap(int layer, int row) const;

  // Logits row r of the last forward (rows that asked for logits, in order).
  const float* logits(int r) const;

 private:
  const Model& model_;
  WorkspaceOptions options_;
  std::unique_ptr<ThreadPool> own_pool_;  // unless options.shared_pool
  ThreadPool& pool_;
  std::unique_ptr<ForwardBuffers> buffers_;
  std::vector<int> taps_;   // sorted, distinct
  Buffer<float> tap_rows_;  // F32 [n_taps, max_rows, n_embd]
};

}  // namespace kakeya
