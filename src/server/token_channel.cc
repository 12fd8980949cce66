#include "server/token_channel.h"

namespace kakeya {

bool TokenChannel::Push(Token token) {
  std::lock_guard lock(mu_);
  if (abandoned_) return false;
  queue_.push_back(std::move(token));
  ready_.notify_one();
  return true;
}

void TokenChannel::Close(const GenerationOutcome& outcome) {
  std::lock_guard lock(mu_);
  outcome_ = outcome;
  ready_.notify_one();
}

std::optional<GenerationOutcome> TokenChannel::Wait(std::vector<Token>* tokens, std::chrono::milliseconds timeout) {
  std::unique_lock lock(mu_);
  ready_.wait_for(lock, timeout, [&] { return !queue_.empty() || outcome_.has_value(); });
  for (Token& t : queue_) tokens->push_back(std::move(t));
  queue_.clear();
  return outcome_;
}

void TokenChannel::Abandon() {
  std::lock_guard lock(mu_);
  abandoned_ = true;
  queue_.clear();
}

bool TokenChannel::abandoned() const {
  std::lock_guard lock(mu_);
  return abandoned_;
}

}  // namespace kakeya
