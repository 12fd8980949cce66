// The cost of a target forward as a function of its rows, measured in the
// decode loop (speculative.cc sizes drafts with it; ADR 0004, ADR 0009).
#pragma once

namespace kakeya {

// What a step's forward costs: a line through the measured ms of recent
// forwards against their extra rows (rows - 1), decayed so that it follows
// the machine. The row cost differs by an order of magnitude between models
// (~5% of a step for a memory-bound 1B model, ~25% for the compute-bound
// shipped 20M one), so it is measured, not assumed. One per forward stream:
// a lone sequence's, or a server's shared by all of its slots.
class StepCost {
 public:
  void Observe(int extra_rows, double ms);
  bool measured() const { return w_ > 0; }
  double BaseMs() const;  // one row
  double RowMs() const;   // each further row
  // A step of one row beside `other_rows` rows of other sequences.
  double PlainMs(int other_rows) const { return BaseMs() + RowMs() * other_rows; }

 private:
  void AddPoint(double x, double y);
  double SlopeMs() const;
  double w_ = 0, x_ = 0, y_ = 0, xx_ = 0, xy_ = 0;  // decayed sums of (extra rows, ms)
};

}  // namespace kakeya
