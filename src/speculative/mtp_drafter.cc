#include "speculative/mtp_drafter.h"

#include <algorithm>
#include <cstring>

#include "base/error.h"
#include "kernels/cpu/dequant.h"
#include "kernels/cpu/ops.h"
#include "sampling/sampler.h"

namespace kakeya {
namespace {

// Rows whose pairs Observe() leaves for the next Draft() to decode, at most:
// a verify step's few (the bonus and the accepted drafts) wait for it, while
// a prompt's, or those of steps that did not ask this drafter, are decoded
// in batches, so that no Draft() meets a long backlog and the upkeep of an
// idle drafter stays in Observe(), where auto weighs it.
constexpr int kMaxUndecoded = 16;

// The sidecar at `path`, checked against the target; null when the block is
// the target's own.
std::unique_ptr<Model> LoadSidecarFor(const Model& target, const std::string& path) {
  if (path.empty()) {
    if (target.nextn.empty()) {
      Fail(target.path(), ": this model has no NextN layers; pass an MTP sidecar with --draft");
    }
    return nullptr;
  }
  std::unique_ptr<Model> sidecar = Model::LoadSidecar(path);
  const HParams& s = sidecar->hparams();
  const HParams& t = target.hparams();
  if (s.arch != t.arch) Fail(path, ": an MTP sidecar of architecture ", s.arch, " for a ", t.arch, " target");
  if (s.n_embd != t.n_embd) {
    Fail(path, ": MTP sidecar of hidden size (embedding_length) ", s.n_embd, "; the target's is ", t.n_embd);
  }
  CheckVocabCompatible(target.tokenizer(), sidecar->tokenizer(), path);
  const NextnLayer& block = sidecar->nextn[0];
  if (block.block != t.n_layer) {
    Fail(path, ": its NextN block is blk.", block.block, ", the layer after a trunk of ", block.block,
         " layers; the target has ", t.n_layer);
  }
  const AttentionSpec& a = block.layer.attn;
  const AttentionSpec& ta = target.layers[0].attn;
  if (a.n_head != ta.n_head || a.n_head_kv != ta.n_head_kv || a.head_dim != ta.head_dim) {
    Fail(path, ": MTP sidecar attention of ", a.n_head, " heads, ", a.n_head_kv, " KV heads of ", a.head_dim,
         " (head_count, head_count_kv, key_length); the target's: ", ta.n_head, ", ", ta.n_head_kv, " of ",
         ta.head_dim);
  }
  return sidecar;
}

}  // namespace

MtpDrafter::MtpDrafter(const Model& target, const std::string& sidecar_path, const MtpOptions& options)
    : target_(target),
      sidecar_(LoadSidecarFor(target, sidecar_path)),
      view_(Model::NextnView(sidecar_ ? *sidecar_ : target, target)),
      block_((sidecar_ ? *sidecar_ : target).nextn[0]),
      options_(options),
      n_embd_(target.hparams().n_embd),
      n_streams_(std::max(1, target.hparams().n_hyper)),
      h_width_(target.hparams().hidden_width()) {
  if (options_.n_max < 1) Fail("MTP drafts per step ", options_.n_max, " must be >= 1");
  if (options_.draft_vocab > 0) view_->output = FirstOutputs(view_->output, options_.draft_vocab);
  // Drafts are pending rows until trimmed, so a batch must hold them.
  const int max_batch = std::max({options_.max_batch, options_.n_max, 1});
  ctx_ = std::make_unique<Context>(*view_, ContextOptions{.n_ctx = options_.n_ctx,
                                                          .max_batch = max_batch,
                                                          .n_threads = options_.n_threads,
                                                          .max_logit_rows = 1,
                                                          .shared_pool = options_.shared_pool,
                                                          .unread_rows_fill_cache_only = true});
  ctx_->SetHiddenTaps({1});  // the block's output, before the head norm
  // One Observe()'s rows, the h before them, and a bonus row whose token
  // comes later (Observe before the first Accept); rows left undecoded
  // before them (kMaxUndecoded) are decoded first when they would not fit.
  h_capacity_ = max_batch + 2;
  h_ = Buffer<float>(size_t(h_capacity_) * h_width_);
  tokens_.reserve(size_t(options_.n_ctx) + 1);
  pairs_ = Buffer<float>(size_t(max_batch) * n_streams_ * 2 * n_embd_);
  inputs_ = Buffer<float>(size_t(max_batch) * h_width_);
  chained_h_ = Buffer<float>(h_width_);
  matmul_ = Buffer<uint8_t>(MatMulScratchBytes(block_.eh_proj.type, block_.eh_proj.n_in, max_batch * n_streams_));
}

MtpDrafter::~MtpDrafter() = default;

void MtpDrafter::Begin(std::span<const TokenId> prompt) {
  ctx_->Clear();
  tokens_.assign(prompt.begin(), prompt.end());
  // Position 0 pairs with h_{-1} = 0, as llama.cpp.
  h_first_ = -1;
  n_h_ = 1;
  std::fill_n(h_.get(), h_width_, 0.0f);
}

void MtpDrafter::Observe(const Context& target, int n_rows) {
  const int first = target.n_committed() - n_rows;
  if (first != h_end()) {
    Fail("MTP drafter: the target committed rows from position ", first, " on, but the drafter saw ", h_end(),
         " rows (Observe must see every committed row)");
  }
  if (n_h_ + n_rows > h_capacity_) {
    DecodeKnownPairs();
    if (n_h_ + n_rows > h_capacity_) {
      Fail("MTP drafter: ", n_h_ + n_rows, " target rows wait for their tokens (room for ", h_capacity_, ")");
    }
  }
  const HParams& hp = target_.hparams();
  for (int i = 0; i < n_rows; ++i) {
    const float* tap = target.tap(hp.n_layer, i).data();
    if (n_streams_ > 1) {
      std::memcpy(h_row(first + i), tap, sizeof(float) * h_width_);  // deepseek4: the streams, unnormed
    } else {
      RmsNorm(tap, target_.output_norm, n_embd_, hp.norm_eps, h_row(first + i));
    }
  }
  n_h_ += n_rows;
  // A prompt, or plain steps: the cache catches up in batches of rows.
  if (h_end() - ctx_->n_committed() > kMaxUndecoded) DecodeKnownPairs();
}

int MtpDrafter::Draft(const DraftRequest& request, std::span<TokenId> out) {
  if (request.history.empty()) return 0;
  Sync(request.history);
  const int pos0 = static_cast<int>(request.history.size()) - 1;
  // The last Draft()'s pairs stayed pending: committed pairs, unless this
  // drafts from the same history again, which redoes them.
  if (ctx_->n_past() > pos0) {
    ctx_->Trim(ctx_->n_past() - ctx_->n_committed());
  } else {
    ctx_->Commit();
    ForgetUsedH();
  }
  const int n = std::min({request.max_tokens, static_cast<int>(out.size()), options_.n_max, options_.n_ctx - pos0});
  if (n < 1 || h_end() != pos0 || ctx_->n_committed() > pos0) return 0;

  // The pairs the cache lacks, ending with (h_{pos0-1}, id_last) at pos0: the
  // last rows run as one forward and stay pending.
  const int batch = ctx_->options().max_batch;
  if (pos0 + 1 - ctx_->n_committed() > batch) DecodePairs(pos0 + 1 - batch);
  const int p = ctx_->n_committed();
  Decode(h_row(p - 1), tokens_.data() + p, pos0 + 1 - p);
  out[0] = request.Pick(ctx_->logits(0), 0);
  // Then each draft with the h' of the row that proposed it, as pending rows:
  // pos0's is the last row of that forward, each later one a forward's only.
  for (int k = 1; k < n; ++k) {
    NormedOutput(k == 1 ? pos0 - p : 0, chained_h_.get());
    Decode(chained_h_.get(), &out[k - 1], 1);
    out[k] = request.Pick(ctx_->logits(0), k);
  }
  ctx_->Trim(n - 1);
  return n;
}

void MtpDrafter::Accept(std::span<const TokenId> history, int drafted, int accepted) { Sync(history); }

void MtpDrafter::Sync(std::span<const TokenId> history) {
  if (history.size() > tokens_.size()) tokens_.insert(tokens_.end(), history.begin() + tokens_.size(), history.end());
}

void MtpDrafter::DecodeKnownPairs() {
  ctx_->Commit();  // the last Draft()'s pairs, committed pairs by now
  DecodePairs(std::min(h_end(), static_cast<int>(tokens_.size())));
}

void MtpDrafter::DecodePairs(int end) {
  const int batch = ctx_->options().max_batch;
  for (int p = ctx_->n_committed(); p < end; p = ctx_->n_committed()) {
    Decode(h_row(p - 1), tokens_.data() + p, std::min(batch, end - p));
    ctx_->Commit();
  }
  ForgetUsedH();
}

void MtpDrafter::ForgetUsedH() {
  // The next position to decode needs the h before it; older rows are done.
  const int used = ctx_->n_committed() - 1 - h_first_;
  if (used <= 0) return;
  std::memmove(h_.get(), h_row(h_first_ + used), sizeof(float) * size_t(n_h_ - used) * h_width_);
  h_first_ += used;
  n_h_ -= used;
}

void MtpDrafter::Decode(const float* h, const TokenId* tokens, int n) {
  const HParams& hp = view_->hparams();
  const WeightMatrix& embd = view_->token_embd;
  for (int r = 0; r < n; ++r) {
    if (tokens[r] < 0 || tokens[r] >= hp.n_vocab) {
      Fail("token id ", tokens[r], " is out of range for a vocabulary of ", hp.n_vocab);
    }
    float* e = pairs_.get() + size_t(r) * n_streams_ * 2 * n_embd_;
    DequantizeRow(embd.type, static_cast<const uint8_t*>(embd.data) + tokens[r] * embd.row_bytes, e, n_embd_);
    if (hp.embd_scale > 0) Scale(e, n_embd_, hp.embd_scale);
    RmsNorm(e, block_.enorm, n_embd_, hp.norm_eps, e);
    // deepseek4: one pair per stream, the embedding's repeated.
    for (int s = 0; s < n_streams_; ++s) {
      float* pair = e + size_t(s) * 2 * n_embd_;
      if (s > 0) std::memcpy(pair, e, sizeof(float) * n_embd_);
      RmsNorm(h + size_t(r) * h_width_ + size_t(s) * n_embd_, block_.hnorm, n_embd_, hp.norm_eps, pair + n_embd_);
    }
  }
  MatMul(block_.eh_proj, pairs_.get(), n * n_streams_, inputs_.get(), matmul_.get(), ctx_->pool());
  ctx_->ForwardEmbedded({inputs_.get(), size_t(n) * h_width_}, /*all_logits=*/false);
}

void MtpDrafter::NormedOutput(int row, float* out) const {
  const HParams& hp = view_->hparams();
  if (n_streams_ > 1) {  // deepseek4 chains the block's streams, before its head mixer
    std::memcpy(out, ctx_->tap(1, row).data(), sizeof(float) * h_width_);
    return;
  }
  RmsNorm(ctx_->tap(1, row).data(), view_->output_norm, n_embd_, hp.norm_eps, out);
}

float* MtpDrafter::h_row(int pos) const { return h_.get() + size_t(pos - h_first_) * h_width_; }

std::unique_ptr<Drafter> MakeMtpDrafter(const DrafterSetup& setup) {
  MtpOptions o;
  o.n_ctx = setup.target_context.options().n_ctx;
  o.max_batch = setup.target_context.options().max_batch;
  o.shared_pool = &setup.target_context.pool();
  o.draft_vocab = DraftVocabSize(setup.target.tokenizer(), setup.draft_vocab);
  return std::make_unique<MtpDrafter>(setup.target, setup.path, o);
}

}  // namespace kakeya
