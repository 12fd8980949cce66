#include "server/stop_strings.h"

#include <algorithm>

namespace kakeya {

StopStringMatcher::StopStringMatcher(std::vector<std::string> stops) : stops_(std::move(stops)) {}

std::string StopStringMatcher::Push(std::string_view text) {
  if (matched_) return "";
  pending_.append(text);
  // Only text held back or just added can contain a match: anything handed
  // out earlier was no prefix of a stop string, so no match starts there.
  size_t first = std::string::npos;
  for (const std::string& stop : stops_) first = std::min(first, pending_.find(stop));
  if (first != std::string::npos) {
    matched_ = true;
    std::string out = pending_.substr(0, first);
    pending_.clear();
    return out;
  }
  const size_t hold = HoldFrom();
  std::string out = pending_.substr(0, hold);
  pending_.erase(0, hold);
  return out;
}

std::string StopStringMatcher::Finish() {
  std::string out;
  if (!matched_) out.swap(pending_);
  pending_.clear();
  return out;
}

size_t StopStringMatcher::HoldFrom() const {
  for (size_t start = 0; start < pending_.size(); ++start) {
    const std::string_view tail = std::string_view(pending_).substr(start);
    for (const std::string& stop : stops_) {
      if (stop.size() > tail.size() && std::string_view(stop).starts_with(tail)) return start;
    }
  }
  return pending_.size();
}

}  // namespace kakeya
