#include "cache/compressed_kv.h"

#include <algorithm>
#include <cstdlib>
#include <random>

#include "base/error.h"

namespace kakeya {

namespace {

// Rows of each part of a layer: {slots, width} for raw keys, inputs, blocks,
// index inputs, index blocks.
struct Extents {
  int slots[5] = {};
  int width[5] = {};
  size_t floats() const {
    size_t n = 0;
    for (int i = 0; i < 5; ++i) n += size_t(slots[i]) * width[i];
    return n;
  }
};

Extents ExtentsOf(const CompressedLayerShape& s, int n_ctx, int max_pending) {
  Extents e;
  auto ring = [&](int span) { return std::min(n_ctx, span + max_pending); };
  e.slots[0] = ring(s.window), e.width[0] = s.key_dim;
  if (s.ratio > 0) {
    // A block is made when its last position is written, so a ring of
    // span + max_pending rows still holds every input a pending row's block reads.
    e.slots[1] = ring(s.input_span), e.width[1] = 2 * s.input_width;
    e.slots[2] = n_ctx / s.ratio + 1, e.width[2] = s.key_dim;
    if (s.index_dim > 0) {
      e.slots[3] = e.slots[1], e.width[3] = 4 * s.index_dim;
      e.slots[4] = e.slots[2], e.width[4] = s.index_dim;
    }
  }
  return e;
}

}  // namespace

size_t CompressedKvBytes(const std::vector<CompressedLayerShape>& layers, int n_ctx, int max_pending) {
  size_t floats = 0;
  for (const CompressedLayerShape& s : layers) floats += ExtentsOf(s, n_ctx, max_pending).floats();
  return floats * sizeof(float);
}

CompressedKv::CompressedKv(const std::vector<CompressedLayerShape>& layers, int n_ctx, int max_pending)
    : bytes_(CompressedKvBytes(layers, n_ctx, max_pending)) {
  storage_.reset(static_cast<float*>(std::calloc(std::max<size_t>(bytes_, 1), 1)));
  if (!storage_) Fail("out of memory allocating ", bytes_, " bytes of compressed KV cache");
  float* next = storage_.get();
  double per_position = 0;
  for (const CompressedLayerShape& s : layers) {
    if (s.ratio > 0) per_position += (double(s.key_dim) / s.ratio + s.index_dim / 4.0) * sizeof(float);
    const Extents e = ExtentsOf(s, n_ctx, max_pending);
    Layer& L = layers_.emplace_back();
    L.shape = s;
    Rows* parts[5] = {&L.raw, &L.inputs, &L.blocks, &L.index_inputs, &L.index_blocks};
    for (int i = 0; i < 5; ++i) {
      *parts[i] = {next, std::max(e.slots[i], 1), e.width[i]};
      next += size_t(e.slots[i]) * e.width[i];
    }
  }
  bytes_per_position_ = static_cast<size_t>(per_position + 0.5);
}

void CompressedKv::FillRandom(uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal;
  float* const data = storage_.get();
  for (size_t i = 0; i < bytes_ / sizeof(float); ++i) data[i] = normal(rng);
}

}  // namespace kakeya
