#include "speculative/dspark_drafter.h"

#include <algorithm>
#include <cstring>
#include <optional>

#include "base/error.h"
#include "kernels/cpu/dequant.h"
#include "kernels/cpu/ops.h"
#include "model/arch/architecture.h"
#include "model/model_loader.h"
#include "sampling/sampler.h"

namespace kakeya {
namespace {

// Observe injects a long prefill chunk this many rows at a time.
constexpr int kObserveRows = 64;
constexpr int kMaxBlockSize = 256;
constexpr int kMaxTaps = 64;

}  // namespace

DSparkDrafter::DSparkDrafter(const Model& target, const std::string& path, int n_ctx, ThreadPool& pool,
                             int draft_vocab)
    : target_(target), pool_(pool) {
  if (n_ctx < 1 || n_ctx > (1 << 24)) Fail("DSpark drafter: context size ", n_ctx, " is out of range");
  const HParams& t = target.hparams();
  // Its taps are the means of the target's streams, and its stages are deepseek4's.
  if (t.n_hyper == 0) {
    Fail(path, ": a DSpark drafter of deepseek4 stages drafts for a deepseek4 target; ", target.path(), " is ", t.arch);
  }
  {
    const std::unique_ptr<GgufFile> file = GgufFile::Open(path);
    const ModelLoader loader(*file, "dflash");
    const std::string_view arch = file->GetString("general.architecture");
    if (arch != "dflash") loader.Fail("general.architecture is '", arch, "'; a DSpark drafter has 'dflash'");
    if (loader.FindU32("hyper_connection.count").value_or(0) == 0) {
      loader.Fail(loader.Key("hyper_connection.count"),
                  " is missing: a DSpark head on a DFlash (Qwen-style) backbone is not supported");
    }
  }
  stages_ = Model::LoadDrafterStack(path, kDSparkStages, [&](const ModelLoader& loader) { BindOwnTensors(loader); });
  CheckVocabCompatible(target.tokenizer(), stages_->tokenizer(), path);
  // Borrowed: the target's rows and head where the file has none.
  if (stages_->token_embd.data == nullptr) stages_->token_embd = target.token_embd;
  if (stages_->output.data == nullptr) stages_->output = target.output;
  if (draft_vocab > 0) {
    stages_->output = FirstOutputs(stages_->output, draft_vocab);
    if (markov_w2_.data != nullptr) markov_w2_ = FirstOutputs(markov_w2_, draft_vocab);
  }
  const int n_logits = stages_->n_logits();

  max_rows_ = std::max(block_size_, kObserveRows);
  stages_context_ = std::make_unique<Context>(
      *stages_, ContextOptions{.n_ctx = n_ctx + block_size_, .max_batch = max_rows_, .n_threads = pool.size(),
                               .max_logit_rows = block_size_, .shared_pool = &pool});
  const size_t D = stages_->layers[0].hybrid.kv.n_out;
  features_ = Buffer<float>(size_t(max_rows_) * taps_.size() * n_embd_);
  g_ = Buffer<float>(size_t(max_rows_) * n_embd_);
  kv_ = Buffer<float>(size_t(max_rows_) * D);
  size_t matmul_bytes = MatMulScratchBytes(fc_.type, fc_.n_in, max_rows_);
  for (const Layer& L : stages_->layers) {
    matmul_bytes = std::max(matmul_bytes, MatMulScratchBytes(L.hybrid.kv.type, L.hybrid.kv.n_in, max_rows_));
  }
  if (markov_w2_.data != nullptr) {
    markov_row_ = Buffer<float>(markov_w1_.n_in);
    bias_ = Buffer<float>(n_logits);
    matmul_bytes = std::max(matmul_bytes, MatMulScratchBytes(markov_w2_.type, markov_w2_.n_in, 1));
  }
  matmul_ = Buffer<uint8_t>(matmul_bytes);
  logits_ = Buffer<float>(size_t(max_proposals()) * n_logits);
  block_.assign(block_size_, mask_);
}

DSparkDrafter::~DSparkDrafter() = default;

// Everything of the file but the stages: the encoder, the Markov head, the
// block's layout and the taps.
void DSparkDrafter::BindOwnTensors(const ModelLoader& loader) {
  const HParams& target = target_.hparams();
  n_embd_ = loader.PositiveInt("embedding_length");
  if (n_embd_ != target.n_embd) {
    loader.Fail(loader.Key("embedding_length"), " = ", n_embd_, " does not match the target's hidden size ",
                target.n_embd, " (", target_.path(), ")");
  }
  const std::vector<int64_t> taps = loader.gguf().GetIntArray(loader.Key("target_layers"));
  if (taps.empty() || taps.size() > kMaxTaps) {
    loader.Fail(loader.Key("target_layers"), " has ", taps.size(), " entries (1 .. ", kMaxTaps, ")");
  }
  for (int64_t l : taps) {
    if (l < 0 || l > target.n_layer) {
      loader.Fail(loader.Key("target_layers"), " names target layer ", l, " but the target (", target_.path(), ") has ",
                  target.n_layer, " layers: taps are 0 .. ", target.n_layer);
    }
    taps_.push_back(static_cast<int>(l));
  }
  std::optional<uint32_t> mask = loader.gguf().FindU32("tokenizer.ggml.mask_token_id");
  if (!mask || *mask >= static_cast<uint32_t>(target.n_vocab)) {
    loader.Fail("tokenizer.ggml.mask_token_id is missing or out of range (vocabulary of ", target.n_vocab, ")");
  }
  mask_ = static_cast<TokenId>(*mask);
  block_size_ = loader.OptionalInt("block_size", 16);
  if (block_size_ < 2 || block_size_ > kMaxBlockSize) {
    loader.Fail(loader.Key("block_size"), " = ", block_size_, " is out of range (2 .. ", kMaxBlockSize, ")");
  }
  first_row_ = loader.FindBool("sample_from_anchor").value_or(true) ? 0 : 1;

  fc_ = loader.Matrix("fc.weight", int64_t{n_embd_} * static_cast<int64_t>(taps_.size()), n_embd_);
  enc_norm_ = loader.Vector("enc.output_norm.weight", n_embd_);
  if (const GgufTensor* w1 = loader.Find("markov_w1.weight"); w1 != nullptr) {
    const int64_t rank = w1->ne[0];
    if (rank < 1 || rank > (1 << 16)) loader.Fail("tensor 'markov_w1.weight': rank ", rank, " is out of range");
    markov_w1_ = loader.Matrix("markov_w1.weight", rank, target.n_vocab);
    markov_w2_ = loader.Matrix("markov_w2.weight", rank, target.n_vocab);
    if (const float* scale = loader.OptionalVector("markov_w2.scale", 1); scale != nullptr) markov_scale_ = *scale;
    // The confidence head only cuts a draft short below a probability floor
    // (the reference's --spec-draft-p-min, 0 by default), which kakeya does
    // not offer: a file that carries it loads, and drafts as with a floor of 0.
    loader.OptionalMatrix("conf_proj.weight", n_embd_ + rank, 1);
    loader.OptionalVector("conf_proj.bias", 1);
  }
}

void DSparkDrafter::Begin(std::span<const TokenId>) {
  stages_context_->Clear();
  n_context_ = 0;
}

void DSparkDrafter::Observe(const Context& target, int n_rows) {
  const int end = target.n_committed();
  const int first = end - n_rows;
  const std::vector<int>& tapped = target.hidden_taps();
  const bool has_taps = std::all_of(taps_.begin(), taps_.end(),
                                    [&](int l) { return std::find(tapped.begin(), tapped.end(), l) != tapped.end(); });
  // Rows after a gap this drafter never saw, rows it has already, or rows
  // without its taps cannot be injected: drafting stops (Draft proposes
  // nothing) until the next Begin().
  if (n_context_ < 0 || first != n_context_ || end + block_size_ > stages_context_->cache().n_ctx() || !has_taps) {
    n_context_ = -1;
    return;
  }
  for (int r = 0; r < n_rows; r += max_rows_) InjectContext(target, r, first + r, std::min(max_rows_, n_rows - r));
  n_context_ = end;
}

int DSparkDrafter::Draft(const DraftRequest& request, std::span<TokenId> out) {
  const int pos0 = static_cast<int>(request.history.size()) - 1;
  const int n = std::min({request.max_tokens, static_cast<int>(out.size()), max_proposals()});
  if (n < 1 || pos0 < 0 || pos0 != n_context_) return 0;
  const TokenId id_last = request.history.back();
  const int n_vocab = target_.hparams().n_vocab;
  if (id_last < 0 || id_last >= n_vocab) return 0;
  const int rows = first_row_ + n;
  block_[0] = id_last;
  stages_context_->Forward(std::span<const TokenId>(block_.data(), rows), /*all_logits=*/true);
  TokenId prev = id_last;
  const int n_logits = stages_->n_logits();
  for (int i = 0; i < n; ++i) {
    float* logits = logits_.get() + size_t(i) * n_logits;
    std::memcpy(logits, stages_context_->logits(first_row_ + i).data(), sizeof(float) * n_logits);
    if (markov_w2_.data != nullptr) {
      DequantizeRow(markov_w1_.type, static_cast<const uint8_t*>(markov_w1_.data) + size_t(prev) * markov_w1_.row_bytes,
                    markov_row_.get(), markov_w1_.n_in);
      MatMul(markov_w2_, markov_row_.get(), 1, bias_.get(), matmul_.get(), pool_);
      // The reference scales the product (ggml_mul by the scale tensor), then adds.
      if (markov_scale_ != 1.0f) Scale(bias_.get(), n_logits, markov_scale_);
      AddInPlace(logits, bias_.get(), n_logits);
    }
    // The reference chains on the argmax; the picked token is the same when
    // greedy, and when sampling it is the token the next proposal follows.
    out[i] = prev = request.Pick(this->logits(i), i);
  }
  stages_context_->Trim(rows);
  return n;
}

std::span<const float> DSparkDrafter::logits(int i) const {
  const size_t n_logits = stages_->n_logits();
  return {logits_.get() + size_t(i) * n_logits, n_logits};
}

// g = rms(fc . concat(mean of each tap's streams), enc.output_norm); every
// stage's raw key of g, written into the stages' cache as committed positions.
void DSparkDrafter::InjectContext(const Context& target, int row0, int pos0, int n) {
  const size_t E = n_embd_, n_taps = taps_.size();
  const int n_streams = target_.hparams().n_hyper;
  float* const features = features_.get();
  for (int i = 0; i < n; ++i) {
    for (size_t t = 0; t < n_taps; ++t) {
      // ggml's order: the streams summed one after another, then scaled.
      const float* streams = target.tap(taps_[t], row0 + i).data();
      float* mean = features + (i * n_taps + t) * E;
      std::memcpy(mean, streams, sizeof(float) * E);
      for (int s = 1; s < n_streams; ++s) AddInPlace(mean, streams + s * E, E);
      Scale(mean, E, 1.0f / static_cast<float>(n_streams));
    }
  }
  float* const g = g_.get();
  MatMul(fc_, features, n, g, matmul_.get(), pool_);
  const float eps = stages_->hparams().norm_eps;
  for (int i = 0; i < n; ++i) RmsNorm(g + i * E, enc_norm_, n_embd_, eps, g + i * E);
  KvCache& cache = stages_context_->mutable_cache();
  cache.Append(n);
  for (size_t il = 0; il < stages_->layers.size(); ++il) {
    const HybridAttention& h = stages_->layers[il].hybrid;
    const size_t D = h.kv.n_out;
    MatMul(h.kv, g, n, kv_.get(), matmul_.get(), pool_);
    for (int i = 0; i < n; ++i) {
      Deepseek4RawKey(h, kv_.get() + i * D, pos0 + i, eps, cache.compressed()->raw_key(static_cast<int>(il), pos0 + i));
    }
  }
  cache.Commit();
}

std::unique_ptr<Drafter> MakeDSparkDrafter(const DrafterSetup& setup) {
  if (setup.path.empty()) Fail("--spec dspark needs a DSpark drafter: pass --draft FILE");
  return std::make_unique<DSparkDrafter>(setup.target, setup.path, setup.target_context.options().n_ctx,
                                         setup.target_context.pool(),
                                         DraftVocabSize(setup.target.tokenizer(), setup.draft_vocab));
}

}  // namespace kakeya
