// The sampling flags `kakeya run` and `kakeya bench` share: llama.cpp's
// names and defaults, and how drafts are verified when sampling.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "grammar/grammar.h"
#include "sampling/sampling_params.h"
#include "speculative/verifier.h"

namespace kakeya::cli {

struct SamplingFlags {
  SamplingParams params;
  int64_t seed = -1;  // -1: a random seed
  std::vector<std::string> dry_breakers;  // --dry-sequence-breaker, escapes processed; "none" clears
  std::string verify = "match";
  std::string grammar_file;      // --grammar-file: GBNF
  std::string json_schema;       // --json-schema: a JSON Schema as text
  std::string json_schema_file;  // --json-schema-file

  // The parameters with the seed drawn if -1 was given (Validate()d); throws
  // Error naming the flag.
  SamplingParams Resolve() const;
  SampledVerify Verify() const;
  // The grammar the flags ask for, as a matcher at its start over
  // `tokenizer`'s vocabulary; null when none. Throws Error naming the flag,
  // the file and the problem.
  std::shared_ptr<const GrammarMatcher> Grammar(const Tokenizer& tokenizer) const;
};

void AddSamplingFlags(CLI::App& app, SamplingFlags& f);

}  // namespace kakeya::cli
