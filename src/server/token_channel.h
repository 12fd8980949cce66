// One request's tokens on their way from the scheduler thread, where the
// callbacks run and must return quickly, to the thread of the connection
// that waits for them. A mutex, a condition variable and a queue.
#pragma once

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <optional>
#include <vector>

#include "server/logprobs.h"
#include "server/scheduler.h"

namespace kakeya {

class TokenChannel {
 public:
  struct Token {
    TokenId id;
    std::optional<TokenLogprob> logprob;  // when the request asked and the scheduler gave logits
  };

  // Producer side (scheduler thread). Push returns false once the consumer
  // has gone (Abandon), which stops the generation.
  bool Push(Token token);
  void Close(const GenerationOutcome& outcome);

  // Consumer side. Waits until tokens arrive, the generation ends or
  // `timeout` passes; moves the arrived tokens to the end of *tokens.
  // Returns the outcome once the producer closed and every token was taken.
  std::optional<GenerationOutcome> Wait(std::vector<Token>* tokens, std::chrono::milliseconds timeout);
  // The client went away or no longer wants tokens (a stop string matched).
  void Abandon();
  bool abandoned() const;

 private:
  mutable std::mutex mu_;
  std::condition_variable ready_;
  std::vector<Token> queue_;
  std::optional<GenerationOutcome> outcome_;
  bool abandoned_ = false;
};

}  // namespace kakeya
