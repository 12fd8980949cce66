// A one-line progress bar on stderr, redrawn in place, for long benchmark
// runs; silent when stderr is not a terminal, so logs and pipes stay clean.
#pragma once

#include <string>

namespace kakeya::cli {

class ProgressBar {
 public:
  explicit ProgressBar(int total);
  ~ProgressBar();  // erases the line
  // The next unit starts; `label` says what it is. The bar counts the
  // units finished before it.
  void Start(const std::string& label);

 private:
  void Draw(const std::string& label) const;
  int total_;
  int started_ = 0;
  bool enabled_;
};

}  // namespace kakeya::cli
