// The hyper-parameters a whole model shares (model.h); everything per layer
// is in Layer (layer.h).
#pragma once

#include <string>

namespace kakeya {

struct HParams {
  std::string arch;  // general.architecture
  int n_vocab = 0;
  int n_embd = 0;
  int n_layer = 0;  // decoder layers the forward runs (NextN blocks not included)
  int n_ctx_train = 0;
  float norm_eps = 1e-5f;
  float embd_scale = 0.0f;     // > 0: token embeddings are multiplied by it (gemma: sqrt(n_embd))
  float final_softcap = 0.0f;  // > 0: logits soft-capped
  int n_embd_per_layer = 0;    // > 0: Gemma 4 per-layer embeddings of this width
  int n_hyper = 0;             // > 0: deepseek4's residual of this many streams (hyper-connections)
  float hyper_eps = 0.0f;      // their mixers' epsilon
  int hyper_sinkhorn_iterations = 0;

  // Values per row of the hidden state between layers: the residual, or
  // deepseek4's streams. Hidden-state taps and input rows are this wide.
  int hidden_width() const { return n_hyper > 0 ? n_hyper * n_embd : n_embd; }
};

}  // namespace kakeya
