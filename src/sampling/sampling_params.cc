#include "sampling/sampling_params.h"

#include <cmath>

#include "base/error.h"

namespace kakeya {

void SamplingParams::Validate() const {
  if (!(std::isfinite(temperature) && temperature >= 0)) {
    Fail("--temp ", temperature, " is out of range; pass 0 (greedy) or a finite positive value");
  }
  if (top_k < 0) Fail("--top-k ", top_k, " is negative; pass 0 (off) or a positive count");
  if (!(top_p > 0 && top_p <= 1)) {
    Fail("--top-p ", top_p, " is out of range; pass a value in (0, 1] (1 = off)");
  }
  if (!(min_p >= 0 && min_p <= 1)) {
    Fail("--min-p ", min_p, " is out of range; pass a value in [0, 1] (0 = off)");
  }
  if (repeat_last_n < -1) Fail("--repeat-last-n ", repeat_last_n, " is out of range; pass -1 (all), 0 (off) or a count");
  if (!(std::isfinite(repeat_penalty) && repeat_penalty > 0)) {
    Fail("--repeat-penalty ", repeat_penalty, " is out of range; pass a positive value (1 = off)");
  }
  if (!std::isfinite(frequency_penalty)) Fail("--frequency-penalty ", frequency_penalty, " is not a finite number");
  if (!std::isfinite(presence_penalty)) Fail("--presence-penalty ", presence_penalty, " is not a finite number");
  if (!(std::isfinite(dry_multiplier) && dry_multiplier >= 0)) {
    Fail("--dry-multiplier ", dry_multiplier, " is out of range; pass 0 (off) or a positive value");
  }
  if (!(std::isfinite(dry_base) && dry_base >= 1)) Fail("--dry-base ", dry_base, " is out of range; pass a value >= 1");
  if (dry_allowed_length < 1) Fail("--dry-allowed-length ", dry_allowed_length, " is out of range; pass 1 or more");
  if (dry_penalty_last_n < -1) {
    Fail("--dry-penalty-last-n ", dry_penalty_last_n, " is out of range; pass -1 (all), 0 (off) or a count");
  }
  for (const std::string& b : dry_sequence_breakers) {
    if (b.empty()) Fail("--dry-sequence-breaker: an empty breaker would match every token");
  }
}

}  // namespace kakeya
