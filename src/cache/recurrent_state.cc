#include "cache/recurrent_state.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "base/error.h"

namespace kakeya {
namespace {

// A trim drops at most max_rollback rows, so a forward reads the convolution
// inputs of the kernel's reach before its first row, which the ring keeps
// beside the rows a later trim may drop.
int ConvSlots(const RecurrentLayerShape& s, int max_rollback) { return s.conv_kernel - 1 + max_rollback; }
// The rule's inputs from the base on: a forward replays at most max_rollback
// rows before its first one and keeps at most max_rollback of its own.
int StepSlots(int max_rollback) { return 2 * max_rollback; }

size_t LayerFloats(const RecurrentLayerShape& s, int max_rollback) {
  if (s.conv_channels == 0) return 0;
  return 2 * size_t(s.state_floats()) + size_t(ConvSlots(s, max_rollback)) * s.conv_channels +
         size_t(StepSlots(max_rollback)) * s.step_floats();
}

}  // namespace

size_t RecurrentStateBytes(const std::vector<RecurrentLayerShape>& layers, int max_rollback) {
  size_t floats = 0;
  for (const RecurrentLayerShape& s : layers) floats += LayerFloats(s, max_rollback);
  return floats * sizeof(float);
}

RecurrentState::RecurrentState(const std::vector<RecurrentLayerShape>& layers, int max_rollback)
    : max_rollback_(max_rollback), step_slots_(StepSlots(max_rollback)),
      bytes_(RecurrentStateBytes(layers, max_rollback)) {
  if (max_rollback < 1) Fail("a recurrent state needs room to roll back at least one row, not ", max_rollback);
  storage_.reset(static_cast<float*>(std::calloc(std::max<size_t>(bytes_, 1), 1)));
  if (!storage_) Fail("out of memory allocating ", bytes_, " bytes of recurrent state");
  float* next = storage_.get();
  for (const RecurrentLayerShape& s : layers) {
    Layer& L = layers_.emplace_back();
    L.shape = s;
    if (s.conv_channels == 0) continue;
    L.state[0] = next, next += s.state_floats();
    L.state[1] = next, next += s.state_floats();
    L.conv_slots = ConvSlots(s, max_rollback);
    L.conv = next, next += size_t(L.conv_slots) * s.conv_channels;
    L.steps = next, next += size_t(step_slots_) * s.step_floats();
  }
}

RecurrentPlan RecurrentState::Plan(int first, int rows, int committed) const {
  RecurrentPlan p;
  p.first = first;
  p.rows = rows;
  p.from_head = head_pos_ == first;
  p.base_pos = base_pos_;
  p.base_buffer = base_buffer_;
  // The lowest position a trim can reach after this forward.
  const int lowest = std::max(committed, first + rows - max_rollback_);
  p.new_base = std::max(base_pos_, lowest);
  p.swap = p.from_head && p.new_base == first && base_pos_ != first;
  p.head_buffer = p.swap ? base_buffer_ : 1 - base_buffer_;
  return p;
}

void RecurrentState::Advance(const RecurrentPlan& p) {
  base_pos_ = p.new_base;
  base_buffer_ = 1 - p.head_buffer;
  head_pos_ = p.first + p.rows;
}

void RecurrentState::Clear() {
  for (Layer& L : layers_) {
    if (L.shape.conv_channels == 0) continue;
    std::memset(L.state[0], 0, sizeof(float) * 2 * L.shape.state_floats());
  }
  base_pos_ = 0;
  base_buffer_ = 0;
  head_pos_ = -1;
}

}  // namespace kakeya
