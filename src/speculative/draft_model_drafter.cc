#include "speculative/draft_model_drafter.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "base/error.h"
#include "base/portable_math.h"

namespace kakeya {
namespace {

// Probability of the most likely token under softmax(logits).
float TopProbability(std::span<const float> logits) {
  const float max_logit = logits[Argmax(logits)];
  double sum = 0;
  for (float l : logits) sum += PortableExp(double(l) - max_logit);
  return static_cast<float>(1.0 / sum);
}

// The draft's sampler gets its own RNG stream (Rng seeds through SplitMix64,
// so any fixed change of the seed gives an unrelated stream). Speculative
// sampling needs the draft's draws independent of the verifier's uniforms; the
// same seed on both sides would correlate them.
SamplingParams DraftSampling(SamplingParams p) {
  p.seed ^= 0xD1B54A32D192ED03ull;
  return p;
}

}  // namespace

DraftModelDrafter::DraftModelDrafter(const Model& target, const std::string& draft_path,
                                     const DraftModelOptions& options)
    : DraftModelDrafter(target, Model::Load(draft_path), nullptr, options) {}

DraftModelDrafter::DraftModelDrafter(const Model& target, const Model& draft,
                                     const DraftModelOptions& options)
    : DraftModelDrafter(target, nullptr, &draft, options) {}

DraftModelDrafter::~DraftModelDrafter() = default;

DraftModelDrafter::DraftModelDrafter(const Model& target, std::unique_ptr<Model> owned,
                                     const Model* draft, const DraftModelOptions& options)
    : owned_(std::move(owned)), draft_(draft ? *draft : *owned_), options_(options) {
  CheckVocabCompatible(target.tokenizer(), draft_.tokenizer(), draft_.path());
  // The logit rows, not just the token lists, must line up: probs rows are
  // compared with the target's over all ids.
  n_vocab_ = draft_.hparams().n_vocab;
  if (n_vocab_ != target.hparams().n_vocab) {
    Fail("draft model ", draft_.path(), " has ", n_vocab_, " output rows but the target has ",
         target.hparams().n_vocab);
  }
  if (options_.max_block < 1) Fail("draft block size ", options_.max_block, " must be >= 1");
  if (!(options_.p_min >= 0 && options_.p_min <= 1)) {
    Fail("draft p_min ", options_.p_min, " is out of range [0, 1]");
  }
  // Proposals are pending rows until Accept(), so a batch must hold a block.
  const ContextOptions ctx_options{.n_ctx = options_.n_ctx,
                                   .max_batch = std::max(options_.max_batch, options_.max_block),
                                   .n_threads = options_.n_threads,
                                   .max_logit_rows = 1,
                                   .max_rollback = std::min(options_.max_block, kMaxRecurrentRollback),
                                   .shared_pool = options_.shared_pool};
  ctx_ = std::make_unique<Context>(draft_, ctx_options);
  if (options_.sampling.temperature > 0) {
    sampler_ = std::make_unique<Sampler>(DraftSampling(options_.sampling), n_vocab_);
  }
  pending_.resize(options_.max_block);
}

void DraftModelDrafter::Begin(std::span<const TokenId> prompt) {
  ctx_->Clear();
  n_pending_ = 0;
  // A prompt the cache cannot hold can never be drafted for: Draft() will
  // propose nothing, so do not prefill.
  const int n = static_cast<int>(prompt.size());
  if (n >= 1 && n <= options_.n_ctx) CatchUp(prompt, n - 1);
}

int DraftModelDrafter::Draft(const DraftRequest& request, std::span<TokenId> out) {
  // Rows of a Draft() that no Accept() followed are stale: drop them.
  ctx_->Trim(n_pending_);
  n_pending_ = 0;

  const std::span<const TokenId> history = request.history;
  const int n = static_cast<int>(history.size());
  const bool sampled = sampler_ != nullptr && !request.probs.empty();
  int max = std::min({request.max_tokens, static_cast<int>(out.size()), options_.max_block});
  if (sampled) max = std::min(max, static_cast<int>(request.probs.size() / n_vocab_));
  // The cache must take the unseen history and all proposals but the last.
  max = std::min(max, options_.n_ctx - n + 1);
  if (n == 0 || max < 1) return 0;

  CatchUp(history, n);
  for (int i = 0; i < max; ++i) {
    const std::span<float> probs =
        sampled ? request.probs.subspan(size_t(i) * n_vocab_, n_vocab_) : std::span<float>();
    if (!Pick(request, i, probs, &out[i])) return i;
    if (i + 1 < max) {
      ctx_->Forward(out.subspan(i, 1), /*all_logits=*/false);
      pending_[n_pending_++] = out[i];
    }
  }
  return max;
}

void DraftModelDrafter::Accept(std::span<const TokenId> history, int drafted, int accepted) {
  // Keep the pending rows whose tokens were committed at their positions,
  // short of the last committed token: its logits are what Draft() needs next.
  const int first = ctx_->n_committed();
  const int n = static_cast<int>(history.size());
  int keep = 0;
  while (keep < n_pending_ && first + keep < n - 1 && pending_[keep] == history[first + keep]) ++keep;
  ctx_->Trim(n_pending_ - keep);
  ctx_->Commit();
  n_pending_ = 0;
}

void DraftModelDrafter::CatchUp(std::span<const TokenId> history, int end) {
  const int batch = ctx_->options().max_batch;
  for (int pos = ctx_->n_committed(); pos < end; pos += batch) {
    ctx_->Forward(history.subspan(pos, std::min(batch, end - pos)), /*all_logits=*/false);
    ctx_->Commit();
  }
}

bool DraftModelDrafter::Pick(const DraftRequest& request, int i, std::span<float> probs, TokenId* token) {
  const std::span<const float> logits = ctx_->logits(0);
  if (options_.p_min > 0 && TopProbability(logits) < options_.p_min) return false;
  if (probs.empty()) {
    *token = request.Pick(logits, i);
  } else {
    sampler_->Distribution(logits, {}, probs);
    *token = sampler_->DrawFrom(probs);
  }
  return true;
}

std::unique_ptr<Drafter> MakeDraftModelDrafter(const DrafterSetup& setup) {
  if (setup.path.empty()) Fail("--spec draft needs a draft model: pass --draft MODEL");
  DraftModelOptions o;
  o.n_ctx = setup.target_context.options().n_ctx;
  o.max_block = setup.max_block;
  o.shared_pool = &setup.target_context.pool();
  o.sampling = setup.sampling;
  return std::make_unique<DraftModelDrafter>(setup.target, setup.path, o);
}

}  // namespace kakeya
