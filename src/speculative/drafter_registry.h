// Every drafter kind kakeya has, one row each (drafter_registry.cc): its
// --spec name, how a file of its kind is recognised, how it is built, its
// shipped file, whether it runs with no file. The command line, the server,
// the bench and `auto` read the table; none keeps a list of its own. Adding a
// drafter is one file (speculative/*_drafter.{h,cc}) plus one row (ADR 0012).
#pragma once

#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "gguf/gguf.h"
#include "model/model.h"
#include "speculative/drafter.h"

namespace kakeya {

struct DrafterKind {
  std::string_view name;   // the --spec value; the drafter's name() in statistics
  std::string_view alias;  // an earlier --spec name that still runs this kind, or ""
  std::string_view help;   // one line of --help
  // Whether a GGUF file holds a drafter of this kind; null for a kind that
  // reads no file. At most one kind holds any file.
  bool (*holds)(const GgufFile& file);
  // Whether the kind runs with no file on `target` (prompt lookup always, MTP
  // on the target's own NextN layers); null: never.
  bool (*built_in)(const Model& target);
  // The shipped model's drafter of this kind: the shipped target's path with
  // ".gguf" replaced by this suffix; "" when none ships.
  std::string_view shipped_suffix;
  // Builds it from setup.path (empty: no file); throws Error naming what is
  // missing or does not fit the target (hidden size, vocabulary, taps, KV).
  std::unique_ptr<Drafter> (*make)(const DrafterSetup& setup);
};

std::span<const DrafterKind> DrafterKinds();
// The kind a --spec value names (its name, or else its alias), or null.
const DrafterKind* FindDrafterKind(std::string_view spec);
// The kind of drafter a file holds, from its metadata (docs/formats/drafters.md);
// throws Error naming the file when it is not GGUF or holds no drafter kakeya runs.
const DrafterKind& DrafterKindOfFile(const std::string& path);

// Where a command's drafter files come from.
struct DrafterSources {
  std::string draft = "";           // --draft FILE, or ""
  std::string shipped_target = "";  // the shipped target's path when it runs without --draft, else ""
};

// A drafter kind and the file it reads ("" for none).
struct DrafterChoice {
  const DrafterKind* kind;
  std::string path;
};

// Every drafter the target can run, in table order: a kind whose file the
// --draft file is, or whose shipped file exists, or that runs built in.
std::vector<DrafterChoice> AvailableDrafters(const DrafterSources& sources, const Model& target);

// `--spec auto`: an AutoDrafter (auto_drafter.h) over `choices`, each
// proposing greedily (one-hot proposals, which sampled verification accepts
// losslessly too); one choice alone is returned as it is.
std::unique_ptr<Drafter> MakeAutoDrafter(const DrafterSetup& setup, const std::vector<DrafterChoice>& choices);

// A drafter over the ones a target has (AvailableDrafters): for "auto" an
// AutoDrafter over all of them, else the kind `spec` names (by name, or else
// by alias) with its file; a kind that is not there is built without a file,
// so that its Error says what it needs.
std::unique_ptr<Drafter> MakeDrafterFrom(std::string_view spec, const std::vector<DrafterChoice>& available,
                                         const DrafterSetup& setup);

// The drafter a command's --spec asks for: null for "none" (plain
// decoding), else MakeDrafterFrom over the drafters of `sources`. Throws
// Error for an unknown value and for a --draft file of another kind than
// --spec names.
std::unique_ptr<Drafter> MakeDrafter(std::string_view spec, const DrafterSources& sources, const DrafterSetup& setup);

}  // namespace kakeya
