#include "model/workspace.h"

#include <algorithm>
#include <cstring>

#include "base/error.h"

namespace kakeya {

namespace {

std::unique_ptr<ThreadPool> OwnPool(const WorkspaceOptions& o) {
  if (o.shared_pool != nullptr) return nullptr;
  if (o.n_threads < 1 || o.n_threads > 1024) Fail("thread count ", o.n_threads, " is out of range (1 .. 1024)");
  return std::make_unique<ThreadPool>(o.n_threads);
}

}  // namespace

Workspace::Workspace(const Model& model, const WorkspaceOptions& options)
    : model_(model),
      options_(options),
      own_pool_(OwnPool(options)),
      pool_(options.shared_pool != nullptr ? *options.shared_pool : *own_pool_) {
  if (options_.n_ctx < 1 || options_.n_ctx > (1 << 24)) {
    Fail("context size ", options_.n_ctx, " is out of range (1 .. ", 1 << 24, ")");
  }
  if (options_.max_rows < 1 || options_.max_rows > 65536) {
    Fail("batch size ", options_.max_rows, " is out of range (1 .. 65536)");
  }
  if (options_.max_logit_rows == 0) options_.max_logit_rows = options_.max_rows;
  if (options_.max_logit_rows < 1 || options_.max_logit_rows > options_.max_rows) {
    Fail("max_logit_rows ", options_.max_logit_rows, " is out of range (1 .. batch size ", options_.max_rows, ")");
  }
  buffers_ = std::make_unique<ForwardBuffers>(model, options_.max_rows, options_.max_logit_rows, options_.n_ctx,
                                              pool_.size());
}

Workspace::~Workspace() = default;

void Workspace::AddHiddenTaps(const std::vector<int>& layers) {
  const HParams& hp = model_.hparams();
  std::vector<int> taps = taps_;
  for (int l : layers) {
    if (l < 0 || l > hp.n_layer) Fail("hidden tap ", l, " is out of range (0 .. ", hp.n_layer, ")");
    taps.push_back(l);
  }
  std::sort(taps.begin(), taps.end());
  taps.erase(std::unique(taps.begin(), taps.end()), taps.end());
  if (taps == taps_) return;
  taps_ = std::move(taps);
  tap_rows_ = Buffer<float>(taps_.size() * options_.max_rows * hp.hidden_width());
}

float* Workspace::tap(int layer, int row) const {
  const auto it = std::find(taps_.begin(), taps_.end(), layer);
  if (it == taps_.end()) return nullptr;
  const size_t width = model_.hparams().hidden_width();
  return tap_rows_.get() + (size_t(it - taps_.begin()) * options_.max_rows + row) * width;
}

const float* Workspace::logits(int r) const {
  return buffers_->logits.get() + size_t(r) * model_.n_logits();
}

}  // namespace kakeya
