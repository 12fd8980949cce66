#include "model/context.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <cstdio>
#include <random>
#include <string>

#include <unistd.h>

#include "base/error.h"
#include "kernels/cpu/ops.h"
#include "model/arch/architecture.h"

namespace kakeya {

namespace {

WorkspaceOptions OwnWorkspaceOptions(const ContextOptions& o) {
  return {.max_rows = o.max_batch,
          .max_logit_rows = o.max_logit_rows,
          .n_ctx = o.n_ctx,
          .n_threads = o.n_threads,
          .shared_pool = o.shared_pool};
}

std::string FormatGiB(double bytes) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f", bytes / double(1ull << 30));
  return text;
}

}  // namespace

Context::Context(const Model& model, const ContextOptions& options)
    : model_(model),
      options_(options),
      own_workspace_(options.workspace != nullptr ? nullptr
                                                  : std::make_unique<Workspace>(model, OwnWorkspaceOptions(options))),
      workspace_(options.workspace != nullptr ? *options.workspace : *own_workspace_) {
  if (options_.n_ctx < 1 || options_.n_ctx > (1 << 24)) {
    Fail("context size ", options_.n_ctx, " is out of range (1 .. ", 1 << 24, ")");
  }
  if (options_.max_batch < 1 || options_.max_batch > 65536) {
    Fail("batch size ", options_.max_batch, " is out of range (1 .. 65536)");
  }
  if (options_.n_threads < 1 || options_.n_threads > 1024) {
    Fail("thread count ", options_.n_threads, " is out of range (1 .. 1024)");
  }
  if (options_.max_logit_rows == 0) options_.max_logit_rows = options_.max_batch;
  if (options_.max_logit_rows < 1 || options_.max_logit_rows > options_.max_batch) {
    Fail("max_logit_rows ", options_.max_logit_rows, " is out of range (1 .. max_batch)");
  }
  if (options_.max_rollback == 0) options_.max_rollback = std::min(options_.max_logit_rows, kMaxRecurrentRollback);
  if (options_.max_rollback < 1 || options_.max_rollback > std::min(options_.max_batch, kMaxRecurrentRollback)) {
    Fail("max_rollback ", options_.max_rollback, " is out of range (1 .. min(max_batch, ", kMaxRecurrentRollback, "))");
  }
  const WorkspaceOptions& w = workspace_.options();
  if (&workspace_.model() != &model || options_.max_batch > w.max_rows ||
      options_.max_logit_rows > w.max_logit_rows || options_.n_ctx > w.n_ctx) {
    Fail("the shared workspace does not fit the context (another model, or fewer rows, logit rows or positions: ",
         w.max_rows, ", ", w.max_logit_rows, ", ", w.n_ctx, ")");
  }

  const KvType k_type = options_.cache_type_k, v_type = options_.cache_type_v;
  if (IsCodec(k_type) != IsCodec(v_type)) {
    Fail("cache types -ctk ", KvTypeName(k_type), " and -ctv ", KvTypeName(v_type),
         ": the codec's types (kakeya4, kakeya3) go together, for keys and values both");
  }
  // Layers that read another layer's keys and values keep no cache of their own.
  std::vector<LayerCacheShape> shapes;
  // qwen35's Gated DeltaNet layers keep a recurrent state instead (one shape
  // per layer, the others' empty; none at all for other models).
  std::vector<RecurrentLayerShape> recurrent;
  for (int il = 0; il < static_cast<int>(model.layers.size()); ++il) {
    const AttentionSpec& a = model.layers[il].attn;
    if (const GatedDeltaNet& d = model.layers[il].deltanet; d.present()) {
      if (recurrent.empty()) recurrent.resize(model.layers.size());
      recurrent[il] = {d.conv_channels(), d.conv_kernel, d.n_k_heads, d.n_v_heads, d.head_k_dim, d.head_v_dim};
      shapes.push_back({});
      continue;
    }
    if (!model.layers[il].writes_kv(il)) {
      shapes.push_back({a.window});
      continue;
    }
    for (const auto& [type, dim, flag] : {std::tuple{k_type, a.head_dim, "-ctk"}, std::tuple{v_type, a.value_dim, "-ctv"}}) {
      const std::string unfit = KvTypeUnfit(type, dim);
      if (!unfit.empty()) Fail("cache type ", flag, " ", KvTypeName(type), " does not fit layer ", il, "'s ", unfit);
    }
    shapes.push_back({a.window, a.n_head_kv, a.head_dim, a.value_dim, k_type, v_type});
  }
  // deepseek4's layers keep their state in a CompressedKv instead.
  std::vector<CompressedLayerShape> compressed;
  if (model.hparams().n_hyper > 0) {
    if (k_type != KvType::kF32 || v_type != KvType::kF32) {
      Fail("cache types -ctk ", KvTypeName(k_type), " -ctv ", KvTypeName(v_type), ": ", model.hparams().arch,
           "'s compressed attention keeps F32 keys only (leave -ctk and -ctv at f32)");
    }
    shapes.clear();
    for (const Layer& L : model.layers) {
      const HybridAttention& h = L.hybrid;
      shapes.push_back({L.attn.window});
      compressed.push_back({L.attn.window, L.attn.head_dim, h.blocks.ratio, h.blocks.span(), h.blocks.width(),
                            h.index_blocks.dim});
    }
  }
  // A cache larger than the machine's memory would be granted (memory is
  // overcommitted) and the process killed once it is written: refuse it here.
  const int max_rollback = options_.max_rollback;
  const size_t kv_bytes = KvCacheBytes(shapes, options_.n_ctx, options_.max_batch) +
                          CompressedKvBytes(compressed, options_.n_ctx, options_.max_batch) +
                          RecurrentStateBytes(recurrent, max_rollback);
  const double ram = double(sysconf(_SC_PHYS_PAGES)) * double(sysconf(_SC_PAGESIZE));
  if (ram > 0 && double(kv_bytes) > ram) {
    Fail("a context of ", options_.n_ctx, " positions (-c) needs ", FormatGiB(double(kv_bytes)),
         " GiB of KV cache with -ctk ", KvTypeName(k_type), " -ctv ", KvTypeName(v_type), ", more than this machine's ",
         FormatGiB(ram), " GiB of memory: use a smaller -c, or smaller cache types (e.g. -ctk kakeya4 -ctv kakeya3)");
  }
  cache_ = std::make_unique<KvCache>(shapes, options_.n_ctx, options_.max_batch, compressed, recurrent, max_rollback);
}

Context::~Context() = default;

void Context::SetHiddenTaps(std::vector<int> layers) {
  workspace_.AddHiddenTaps(layers);
  std::sort(layers.begin(), layers.end());
  layers.erase(std::unique(layers.begin(), layers.end()), layers.end());
  taps_ = std::move(layers);
}

std::span<const float> Context::tap(int layer, int i) const {
  if (std::find(taps_.begin(), taps_.end(), layer) == taps_.end()) {
    Fail("layer ", layer, " is not tapped (Context::SetHiddenTaps)");
  }
  return {workspace_.tap(layer, first_row_ + i), size_t(model_.hparams().hidden_width())};
}

float Context::routing_margin(int il, int i) const {
  const ForwardBuffers& b = workspace_.buffers();
  if (il < 0 || il >= model_.hparams().n_layer || !model_.layers[il].moe.present() || i < 0 ||
      first_row_ + i >= b.max_rows) {
    return INFINITY;
  }
  return b.routing_margins.get()[size_t(il) * b.max_rows + first_row_ + i];
}

void Context::TakeRunnerUpExpert(int il, int i) {
  if (il < 0 || il >= model_.hparams().n_layer || i < 0 || i >= options_.max_batch) {
    Fail("TakeRunnerUpExpert: layer ", il, " row ", i, " is out of range");
  }
  workspace_.buffers().routing_overrides.push_back({il, i});
}

void Context::FillCacheForBenchmark(int n, uint64_t seed) {
  if (n < 0 || n > options_.n_ctx) Fail("cannot fill ", n, " positions of a context of ", options_.n_ctx);
  cache_->Clear();
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal;
  std::vector<float> k, v;
  for (int done = 0; done < n;) {
    const int rows = std::min(n - done, cache_->max_pending());
    for (int il = 0; il < cache_->n_layer(); ++il) {
      LayerCache& layer = cache_->layer(il);
      if (layer.k_width() == 0) continue;  // reads another layer's cache
      k.resize(layer.k_width());
      v.resize(layer.v_width());
      for (int pos = done; pos < done + rows; ++pos) {
        for (float& x : k) x = normal(rng);
        for (float& x : v) x = normal(rng);
        layer.Write(pos, k.data(), v.data());
      }
      layer.CodeUpTo(CodedEnd(done + rows - 1, layer.split()));
    }
    cache_->Append(rows);
    cache_->Commit();
    done += rows;
  }
  if (cache_->compressed() != nullptr) cache_->compressed()->FillRandom(seed);
}

std::span<const float> Context::logits(int i) const {
  return {workspace_.logits(first_logit_row_ + i), static_cast<size_t>(model_.n_logits())};
}

void Context::Forward(std::span<const TokenId> tokens, bool all_logits) {
  const SequenceRows rows[] = {{this, tokens, all_logits}};
  RunForward(workspace_, rows);
}

void Context::ForwardEmbedded(std::span<const float> rows, bool all_logits) {
  const HParams& hp = model_.hparams();
  if (hp.n_embd_per_layer > 0) Fail("a model with per-layer embeddings needs token ids, not input rows");
  if (rows.size() % hp.hidden_width() != 0) {
    Fail("input rows of ", rows.size(), " floats are not a multiple of the hidden width ", hp.hidden_width());
  }
  const SequenceRows batch[] = {{this, {}, all_logits, rows}};
  RunForward(workspace_, batch);
}

namespace {

int RowsOf(const SequenceRows& s, int width) {
  return static_cast<int>(s.input_rows.empty() ? s.tokens.size() : s.input_rows.size() / width);
}

// Everything RunForward checks before it touches a cache.
void CheckBatch(const Workspace& ws, std::span<const SequenceRows> batch) {
  const Model& model = ws.model();
  const HParams& hp = model.hparams();
  if (static_cast<int>(batch.size()) > ForwardBuffers::kMaxSequences) {
    Fail("a forward of ", batch.size(), " sequences exceeds ", ForwardBuffers::kMaxSequences);
  }
  int rows = 0, logit_rows = 0;
  for (size_t k = 0; k < batch.size(); ++k) {
    const SequenceRows& s = batch[k];
    const Context& seq = *s.sequence;
    const int n = RowsOf(s, hp.hidden_width());
    if (&seq.workspace() != &ws) Fail("sequence ", k, " of the forward runs on another workspace");
    for (size_t j = 0; j < k; ++j) {
      if (batch[j].sequence == s.sequence) Fail("sequence ", k, " of the forward is also sequence ", j);
    }
    if (!s.tokens.empty() && !s.input_rows.empty()) Fail("sequence ", k, " gives both token ids and input rows");
    for (TokenId t : s.tokens) {
      if (t < 0 || t >= hp.n_vocab) Fail("token id ", t, " is out of range for a vocabulary of ", hp.n_vocab);
    }
    if (!s.input_rows.empty() && hp.n_embd_per_layer > 0) {
      Fail("a model with per-layer embeddings needs token ids, not input rows");
    }
    if (n > seq.options().max_batch) {
      Fail("batch of ", n, " tokens exceeds the context's batch size ", seq.options().max_batch);
    }
    if (s.all_logits && n > seq.options().max_logit_rows) {
      Fail("asked for logits of ", n, " rows; the context returns at most ", seq.options().max_logit_rows);
    }
    if (!seq.cache().CanAppend(n)) {
      Fail("context is full: ", seq.n_past(), " + ", n, " tokens exceed n_ctx = ", seq.options().n_ctx,
           " (pass a larger -c)");
    }
    rows += n;
    logit_rows += n == 0 ? 0 : s.all_logits ? n : 1;
  }
  if (rows > ws.options().max_rows) Fail("a forward of ", rows, " rows exceeds the workspace's ", ws.options().max_rows);
  if (logit_rows > ws.options().max_logit_rows) {
    Fail("a forward asking for ", logit_rows, " rows of logits exceeds the workspace's ", ws.options().max_logit_rows);
  }
}

}  // namespace

// The forward pass, top to bottom: embeddings, the decoder layers as the
// architecture composes them (model/arch/), the output norm and head.
void RunForward(Workspace& ws, std::span<const SequenceRows> batch) {
  CheckBatch(ws, batch);
  const Model& model = ws.model();
  const HParams& hp = model.hparams();
  const int n_embd = hp.n_embd, width = hp.hidden_width();
  ForwardBuffers& b = ws.buffers();

  // Lay the sequences' rows out one after another.
  std::vector<SequenceSlice>& slices = b.slices;
  slices.clear();
  int n = 0, n_logit_rows = 0;
  bool embedded = false;
  for (const SequenceRows& s : batch) {
    const int rows = RowsOf(s, width);
    Context& seq = *s.sequence;
    seq.first_row_ = n;
    seq.first_logit_row_ = n_logit_rows;
    seq.n_logit_rows_ = rows == 0 ? 0 : s.all_logits ? rows : 1;
    if (rows == 0) continue;
    slices.push_back({seq.cache_.get(), n, rows, seq.n_past()});
    if (s.input_rows.empty()) {
      std::copy(s.tokens.begin(), s.tokens.end(), b.tokens.get() + n);
    } else {
      std::fill_n(b.tokens.get() + n, rows, 0);
      embedded = true;
    }
    n += rows;
    n_logit_rows += seq.n_logit_rows_;
  }
  if (n == 0) return;

  ForwardPass pass(model, b, slices, ws.pool());
  const std::vector<int>& taps = ws.hidden_taps();
  auto keep_taps = [&](int layer) {
    if (std::find(taps.begin(), taps.end(), layer) == taps.end()) return;
    std::memcpy(ws.tap(layer, 0), pass.hidden(), sizeof(float) * n * width);
  };

  pass.Embed(b.tokens.get());
  pass.BeginHyperStreams();
  if (embedded) {
    for (size_t k = 0; k < batch.size(); ++k) {
      if (batch[k].input_rows.empty()) continue;
      std::memcpy(pass.hidden() + size_t(batch[k].sequence->first_row_) * width, batch[k].input_rows.data(),
                  batch[k].input_rows.size_bytes());
    }
  }
  pass.PreparePerLayerInputs(b.tokens.get());
  pass.PrepareRope();
  b.experts_touched = 0;
  b.expert_bytes_read = 0;
  const Architecture& arch = model.architecture();
  const bool last_row_only = batch.size() == 1 && n_logit_rows == 1 &&
                             batch[0].sequence->options().unread_rows_fill_cache_only;
  for (int il = 0; il < hp.n_layer; ++il) {
    keep_taps(il);
    if (il == hp.n_layer - 1 && last_row_only) pass.SetFeedForwardFirstRow(n - 1);
    arch.run_layer(pass, model.layers[il], il);
  }
  keep_taps(hp.n_layer);
  pass.EndHyperStreams();
  for (const SequenceSlice& s : slices) s.cache->Append(s.n_rows);
  b.routing_overrides.clear();

  // The output head over the rows that asked for logits, in order.
  float* const normed = pass.normed();
  for (const SequenceRows& s : batch) {
    const Context& seq = *s.sequence;
    const int rows = RowsOf(s, width);
    for (int j = 0; j < seq.n_logit_rows_; ++j) {
      const int row = seq.first_row_ + rows - seq.n_logit_rows_ + j;
      RmsNorm(pass.residual() + size_t(row) * n_embd, model.output_norm, n_embd, hp.norm_eps,
              normed + size_t(seq.first_logit_row_ + j) * n_embd);
    }
  }
  MatMul(model.output, normed, n_logit_rows, b.logits.get(), b.matmul.get(), ws.pool());
  if (hp.final_softcap > 0) SoftCap(b.logits.get(), n_logit_rows * model.n_logits(), hp.final_softcap);
}

}  // namespace kakeya
