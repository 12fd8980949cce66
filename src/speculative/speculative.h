// Lossless speculative decoding: the decode loop (DESIGN.md "The speculative
// step"). A drafter proposes a block, the target verifies the whole block in
// one batched forward, the agreeing prefix plus the target's own next token
// is committed and the rest trimmed from the target's cache in O(1).
#pragma once

#include <span>
#include <string>
#include <vector>

#include "engine/generate.h"
#include "speculative/drafter.h"

namespace kakeya {

struct SpecOptions {
  int block = 0;        // rows per verify step (1 + drafts); 0 = adaptive
  int max_block = 16;   // upper bound for the adaptive size; rows the target context must allow
  bool trace = false;   // record every step in SpecStats::trace (allocates per step)
};

// One verify step, for comparing proposals with another engine's.
struct SpecTraceStep {
  int pos = 0;                 // tokens in the target's cache before the step (the bonus's position)
  std::vector<TokenId> draft;  // the proposals
  int accepted = 0;            // how many of them the target kept
};

// Steps that proposed a draft, per drafter (auto picks one per step).
struct DrafterStats {
  std::string name;
  int steps = 0;
  int drafted = 0;
  int accepted = 0;
  std::vector<int> drafted_by_pos;   // [i]: steps that proposed a draft at position i
  std::vector<int> accepted_by_pos;  // [i]: ... and had it accepted
  double draft_ms = 0;
  double verify_ms = 0;
};

struct SpecStats {
  std::string method;
  int block = 0;                    // the fixed block, or 0 when adaptive
  int steps = 0;                    // verify steps (target forwards after the prefill)
  int drafted = 0;                  // draft tokens proposed
  int accepted = 0;                 // draft tokens accepted
  std::vector<int> drafted_by_pos;  // [i]: steps that proposed a draft at position i
  std::vector<int> accepted_by_pos; // [i]: ... and had it accepted
  double draft_ms = 0;
  double verify_ms = 0;   // target forward + verification
  double commit_ms = 0;   // trims, commits, drafter bookkeeping
  std::vector<DrafterStats> by_drafter;
  std::vector<SpecTraceStep> trace;  // with SpecOptions::trace
  // Tokens committed per verify step, the bonus included (1.0: no draft ever accepted).
  double mean_accept_len() const { return steps > 0 ? double(steps + accepted) / steps : 0.0; }
};

// Generates after `prompt` like Generate() (same options, callback and
// result), verifying drafter proposals in blocks. With greedy sampling the
// tokens are byte-identical to Generate()'s; with temperature > 0 they follow
// the same distribution. The target context needs max_logit_rows >= max_block.
GenerateResult GenerateSpeculative(Context& target, Drafter& drafter, std::span<const TokenId> prompt,
                                   const GenerateOptions& options, const SpecOptions& spec,
                                   const TokenCallback& on_token, SpecStats* stats);

}  // namespace kakeya
