// The `stop` parameter: generation ends where one of the stop strings first
// appears in the text, and the stop string itself never reaches the client.
// A stop string can span several tokens, so text that could still become
// the start of one is held back until the next token decides it.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace kakeya {

class StopStringMatcher {
 public:
  // `stops` may be empty (then every Push returns its text at once).
  explicit StopStringMatcher(std::vector<std::string> stops);

  // Appends generated text; returns the part that can go to the client now.
  // After a stop string matched, returns only the text before it and
  // matched() turns true; further pushes return "".
  std::string Push(std::string_view text);
  // The held text at the end of the generation (no stop string came).
  std::string Finish();

  bool matched() const { return matched_; }

 private:
  // Start of the longest suffix of pending_ that is a proper prefix of a
  // stop string (pending_.size() if none).
  size_t HoldFrom() const;

  std::vector<std::string> stops_;
  std::string pending_;  // text not yet handed out
  bool matched_ = false;
};

}  // namespace kakeya
