// The sampling flags `kakeya run` and `kakeya bench` share: llama.cpp's
// names and defaults, and how drafts are verified when sampling.
#pragma once

#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "sampling/sampling_params.h"
#include "speculative/verifier.h"

namespace kakeya::cli {

struct SamplingFlags {
  SamplingParams params;
  int64_t seed = -1;  // -1: a random seed
  std::vector<std::string> dry_breakers;  // --dry-sequence-breaker, escapes processed; "none" clears
  std::string verify = "match";

  // The parameters with the seed drawn if -1 was given (Validate()d); throws
  // Error naming the flag.
  SamplingParams Resolve() const;
  SampledVerify Verify() const;
};

void AddSamplingFlags(CLI::App& app, SamplingFlags& f);

}  // namespace kakeya::cli
