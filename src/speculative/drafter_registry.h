// The drafters kakeya has, by name: the CLI's --spec values and their help
// come from this table, and each drafter lives in its own file
// (speculative/*_drafter.h). Adding a drafter is one file plus one line in
// drafter_registry.cc.
#pragma once

#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "model/context.h"
#include "model/model.h"
#include "sampling/sampler.h"
#include "speculative/drafter.h"

namespace kakeya {

// What a drafter is built from.
struct DrafterSetup {
  const Model& target;
  Context& target_context;  // its pool is shared; its n_ctx bounds the drafter's cache
  std::string draft_path;   // --draft FILE, or empty
  SamplingParams sampling;  // the target's (drafters that sample draw from the same filters)
  int max_block = 16;       // rows of the largest verify step (1 + drafts)
};

struct DrafterKind {
  std::string_view name;  // the --spec value
  std::string_view help;  // one line for --help
  // Builds the drafter; throws Error naming what is missing or does not fit
  // the target (a file's hidden size, vocabulary, tap layers, KV geometry).
  std::unique_ptr<Drafter> (*make)(const DrafterSetup& setup);
};

std::span<const DrafterKind> DrafterKinds();
const DrafterKind* FindDrafterKind(std::string_view name);

// A drafter kind and its file ("" for kinds that need none).
struct DrafterChoice {
  std::string kind;
  std::string path;
};
// `--spec auto`: an AutoDrafter over prompt lookup and each of `choices`
// (speculative/auto_drafter.h). Its drafters propose greedily (one-hot
// proposals, which sampled verification accepts losslessly too).
std::unique_ptr<Drafter> MakeAutoDrafter(const DrafterSetup& setup, const std::vector<DrafterChoice>& choices);

// The kind of drafter a GGUF file holds, from its metadata (docs/formats/drafters.md):
// "block" for general.architecture = dflash, "mtp" for gemma4-assistant or
// a NextN sidecar (nextn_predict_layers > 0 and no trunk tensors), "draft"
// for any other language model. Throws Error on a file that is not GGUF.
std::string DrafterKindOfFile(const std::string& path);

}  // namespace kakeya
