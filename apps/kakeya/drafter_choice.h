// Which model and drafter a command runs, from -m, --spec and --draft:
// shared by `kakeya run`, `chat`, `serve` and `bench spec`. Without -m the
// shipped model (models/) runs, with its shipped drafters. The drafter kinds
// themselves are the registry's (speculative/drafter_registry.h).
#pragma once

#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "speculative/drafter_registry.h"

namespace kakeya::cli {

struct ModelFlags {
  std::string model;
  std::string spec = "auto";
  std::string draft;
  int draft_vocab = -1;  // --draft-vocab; -1: DraftVocabSize's default
};

// No -m: the shipped model; throws Error if it is missing.
void UseShippedDefaults(ModelFlags& f);

// Where the command's drafter files come from: --draft, or the shipped
// drafters when the shipped model runs without --draft.
DrafterSources SourcesOf(const ModelFlags& f);

// The drafters' set-up for a command's target context (DrafterSetup).
DrafterSetup SetupOf(const ModelFlags& f, const Model& target, Context& context, const SamplingParams& sampling,
                     int max_block);

// -m, --spec, --draft and --draft-vocab; spec_note ends --spec's help (what the command adds to it).
void AddModelFlags(CLI::App& app, ModelFlags& f, const std::string& spec_note = "");

// --draft-vocab alone (bench spec has -m and --draft of its own).
void AddDraftVocabFlag(CLI::App& app, ModelFlags& f);

// --spec's values: none, auto, and every kind's name and alias.
std::vector<std::string> SpecNames();

}  // namespace kakeya::cli
