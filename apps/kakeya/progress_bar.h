// A one-line progress bar on stderr, redrawn in place, for long benchmark
// runs; silent when stderr is not a terminal, so logs and pipes stay clean.
#pragma once

#include <string>

namespace kakeya::cli {

class ProgressBar {
 public:
  explicit ProgressBar(int total);
  ~ProgressBar();  // erases the line
  // One more unit done; `label` says what runs next.
  void Step(const std::string& label);

 private:
  void Draw(const std::string& label) const;
  int total_;
  int done_ = 0;
  bool enabled_;
};

}  // namespace kakeya::cli
