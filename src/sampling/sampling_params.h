// What a request asks of the sampler: the filters and temperature, the seed,
// and the repetition controls. Flags and defaults are llama.cpp's (its
// common_params_sampling), so that settings carry over.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace kakeya {

struct SamplingParams {
  float temperature = 0.8f;  // <= 0: greedy (Argmax), filters ignored
  int top_k = 40;            // <= 0: off
  float top_p = 0.95f;       // >= 1: off
  float min_p = 0.05f;       // <= 0: off
  uint64_t seed = 0;

  // Repetition controls (penalties.h), all off by default.
  int repeat_last_n = 64;         // tokens the three penalties below look back over; 0: off, -1: all
  float repeat_penalty = 1.0f;    // 1: off
  float frequency_penalty = 0.0f;
  float presence_penalty = 0.0f;
  float dry_multiplier = 0.0f;    // 0: DRY off
  float dry_base = 1.75f;
  int dry_allowed_length = 2;
  int dry_penalty_last_n = -1;    // 0: off, -1: all
  std::vector<std::string> dry_sequence_breakers = {"\n", ":", "\"", "*"};

  // Throws kakeya::Error naming the flag (--temp, --top-k, --top-p, --min-p,
  // --repeat-penalty, ...) for a value out of range.
  void Validate() const;
};

}  // namespace kakeya
