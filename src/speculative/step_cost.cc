#include "speculative/step_cost.h"

#include <algorithm>

namespace kakeya {
namespace {

constexpr double kDecay = 0.9;         // weight of the older points at each new one
constexpr double kPriorRowCost = 0.1;  // one more row, relative to a step (docs/design.md's target)
constexpr double kPriorSpread = 8;     // extra rows at the prior's second point
constexpr double kPriorRowSpread = 1;  // the prior slope's weight, as a variance of the rows

}  // namespace

// The cost line. Before any timing: a prior line at kPriorRowCost of a
// step through the first step's cost, worth two steps, so that the first
// fits are sane; after that the slope is still pulled toward that prior
// (SlopeMs) and kept within [1%, 100%] of the mean (timing noise on a busy
// machine can tilt a fit anywhere).
void StepCost::Observe(int extra_rows, double ms) {
  if (w_ == 0) {
    const double base = ms / (1 + kPriorRowCost * extra_rows);
    AddPoint(0, base);
    AddPoint(kPriorSpread, base * (1 + kPriorRowCost * kPriorSpread));
  }
  AddPoint(extra_rows, ms);
}

void StepCost::AddPoint(double x, double y) {
  w_ = kDecay * w_ + 1;
  x_ = kDecay * x_ + x;
  y_ = kDecay * y_ + y;
  xx_ = kDecay * xx_ + x * x;
  xy_ = kDecay * xy_ + x * y;
}

// Least squares, pulled toward the prior slope (kPriorRowCost of the mean
// step) as if the rows had varied by kPriorRowSpread around their mean: where
// the recent steps' row counts hardly vary (a server full of plain rows,
// drafting now and then), their timing noise cannot tell the slope, and a
// slope of nearly zero would make drafts look free.
double StepCost::SlopeMs() const {
  const double spread = w_ * xx_ - x_ * x_;  // w^2 * variance of the rows
  const double prior = kPriorRowSpread * w_ * w_;
  return ((w_ * xy_ - x_ * y_) + prior * kPriorRowCost * (y_ / w_)) / (spread + prior);
}

double StepCost::BaseMs() const {
  if (w_ == 0) return 1;
  return std::max(1e-6, (y_ - SlopeMs() * x_) / w_);
}

double StepCost::RowMs() const {
  if (w_ == 0) return kPriorRowCost;
  const double mean = y_ / w_;
  return std::clamp(SlopeMs(), 0.01 * mean, mean);
}

}  // namespace kakeya
