// Which model and drafter a command runs, from -m, --spec and --draft:
// shared by `kakeya run`, `chat` and `serve`. Without -m the shipped model
// (models/) runs, with its shipped drafters.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "model/context.h"
#include "model/model.h"
#include "sampling/sampler.h"
#include "speculative/drafter.h"
#include "speculative/drafter_registry.h"

namespace kakeya::cli {

struct ModelFlags {
  std::string model;
  std::string spec = "auto";
  std::string draft;
  bool shipped_target = false;  // -m is the shipped model, so auto uses its shipped drafters
};

// No -m: the shipped model. For the shipped model, --spec draft, block and
// mtp use its shipped drafters when no --draft is given, and auto all of them.
void UseShippedDefaults(ModelFlags& f);

// The drafters auto runs: the --draft file's, or the shipped target's
// shipped drafters, and the target's own NextN layers.
std::vector<DrafterChoice> AutoChoices(const ModelFlags& f, const Model& target);

// The drafter --spec asks for, or null for plain decoding. A --draft file's
// kind comes from its metadata (drafter_registry.h).
std::unique_ptr<Drafter> MakeDrafter(const ModelFlags& f, const Model& target, Context& ctx,
                                     const SamplingParams& sampling, int max_block);

// -m, --spec and --draft; spec_note ends --spec's help (what the command adds to it).
void AddModelFlags(CLI::App& app, ModelFlags& f, const std::string& spec_note = "");

// --spec's help text and values.
std::string SpecHelp();
std::vector<std::string> SpecNames();

}  // namespace kakeya::cli
