#include "progress_bar.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>

namespace kakeya::cli {

ProgressBar::ProgressBar(int total) : total_(std::max(1, total)), enabled_(isatty(STDERR_FILENO) != 0) {
  if (enabled_) Draw("");
}

ProgressBar::~ProgressBar() {
  if (enabled_) std::fprintf(stderr, "\r\033[K");
}

void ProgressBar::Start(const std::string& label) {
  if (enabled_) Draw(label);
  started_ = std::min(started_ + 1, total_);
}

void ProgressBar::Draw(const std::string& label) const {
  constexpr int kWidth = 30;
  const int done = started_;  // every unit started before this one has finished
  const int filled = done * kWidth / total_;
  // \033[K clears what a longer label left on the line.
  std::fprintf(stderr, "\r[%s%s] %3d%% %d/%d %s\033[K", std::string(filled, '#').c_str(),
               std::string(kWidth - filled, '.').c_str(), done * 100 / total_, done, total_, label.c_str());
  std::fflush(stderr);
}

}  // namespace kakeya::cli
