#include "speculative/drafter_registry.h"

#include <filesystem>

#include "base/error.h"
#include "model/arch/architecture.h"
#include "model/model_loader.h"
#include "speculative/assistant_drafter.h"
#include "speculative/auto_drafter.h"
#include "speculative/dflash_drafter.h"
#include "speculative/draft_model_drafter.h"
#include "speculative/dspark_drafter.h"
#include "speculative/mtp_drafter.h"
#include "speculative/ngram_drafter.h"

namespace kakeya {
namespace {

std::string_view ArchitectureOf(const GgufFile& f) { return f.GetString("general.architecture"); }

// NextN blocks and no trunk: an MTP sidecar (ModelLoader::IsSidecar).
bool IsMtpSidecar(const GgufFile& f) {
  const std::string_view arch = ArchitectureOf(f);
  return FindArchitecture(arch) != nullptr && ModelLoader(f, arch).IsSidecar();
}

bool Always(const Model&) { return true; }
bool HasNextn(const Model& target) { return !target.nextn.empty(); }
bool IsDraftModel(const GgufFile& f) { return FindArchitecture(ArchitectureOf(f)) != nullptr && !IsMtpSidecar(f); }
// A dflash file with a Markov head or hyper-connection stages is DSpark
// (the reference tells them apart by the Markov head).
bool IsDSpark(const GgufFile& f) {
  return ArchitectureOf(f) == "dflash" &&
         (f.FindTensor("markov_w1.weight") != nullptr || f.FindU32("dflash.hyper_connection.count").value_or(0) > 0);
}
bool IsDFlash(const GgufFile& f) { return ArchitectureOf(f) == "dflash" && !IsDSpark(f); }
bool IsAssistant(const GgufFile& f) { return ArchitectureOf(f) == "gemma4-assistant"; }

// One row per kind: name, alias, help, holds, built_in, shipped_suffix, make.
// Their order is auto's order and --help's.
constexpr DrafterKind kKinds[] = {
    {"ngram", "", "prompt lookup: what followed the last occurrence of the current suffix",
     nullptr, Always, "", MakeNgramDrafter},
    {"draft", "", "a smaller language model of the same vocabulary (--draft FILE)",
     IsDraftModel, nullptr, "-draft.gguf", MakeDraftModelDrafter},
    {"dflash", "block", "DFlash block drafter: one forward proposes a whole block from the target's hidden states (--draft FILE)",
     IsDFlash, nullptr, "-dflash.gguf", MakeDFlashDrafter},
    {"dspark", "", "DSpark: DeepSeek-V4's block drafter, deepseek4 stages and a Markov head over the target's hidden states (--draft FILE)",
     IsDSpark, nullptr, "-dspark.gguf", MakeDSparkDrafter},
    {"mtp", "", "multi-token prediction: the target's NextN layers, or an MTP sidecar (--draft FILE)",
     IsMtpSidecar, HasNextn, "-mtp.gguf", MakeMtpDrafter},
    {"assistant", "mtp", "Gemma 4's assistant: a small stack that attends to the target's cache (--draft FILE)",
     IsAssistant, nullptr, "", MakeAssistantDrafter},
};

// The shipped target's drafter of this kind, if it ships one and it is there.
std::string ShippedFile(const DrafterKind& kind, const std::string& shipped_target) {
  if (shipped_target.empty() || kind.shipped_suffix.empty()) return "";
  const std::string path =
      std::filesystem::path(shipped_target).replace_extension().string() + std::string(kind.shipped_suffix);
  return std::filesystem::exists(path) ? path : "";
}

}  // namespace

std::span<const DrafterKind> DrafterKinds() { return kKinds; }

const DrafterKind* FindDrafterKind(std::string_view spec) {
  for (const DrafterKind& k : kKinds) {
    if (k.name == spec) return &k;
  }
  for (const DrafterKind& k : kKinds) {
    if (!k.alias.empty() && k.alias == spec) return &k;
  }
  return nullptr;
}

const DrafterKind& DrafterKindOfFile(const std::string& path) {
  const std::unique_ptr<GgufFile> file = GgufFile::Open(path);
  for (const DrafterKind& k : kKinds) {
    if (k.holds != nullptr && k.holds(*file)) return k;
  }
  Fail(path, ": general.architecture = ", ArchitectureOf(*file), " is no drafter kakeya runs (a draft model's ",
       SupportedArchitectureNames(), ", dflash, dspark, an MTP sidecar or gemma4-assistant)");
}

std::vector<DrafterChoice> AvailableDrafters(const DrafterSources& sources, const Model& target) {
  const DrafterKind* draft_kind = sources.draft.empty() ? nullptr : &DrafterKindOfFile(sources.draft);
  std::vector<DrafterChoice> out;
  for (const DrafterKind& k : kKinds) {
    std::string path = draft_kind == nullptr ? ShippedFile(k, sources.shipped_target)
                       : draft_kind == &k     ? sources.draft
                                              : "";
    if (!path.empty() || (k.built_in != nullptr && k.built_in(target))) out.push_back({&k, std::move(path)});
  }
  return out;
}

std::unique_ptr<Drafter> MakeAutoDrafter(const DrafterSetup& setup, const std::vector<DrafterChoice>& choices) {
  DrafterSetup greedy = setup;
  greedy.sampling.temperature = 0.0f;
  std::vector<std::unique_ptr<Drafter>> drafters;
  for (const DrafterChoice& c : choices) {
    greedy.path = c.path;
    drafters.push_back(c.kind->make(greedy));
  }
  if (drafters.size() == 1) return std::move(drafters.front());
  return std::make_unique<AutoDrafter>(std::move(drafters));
}

std::unique_ptr<Drafter> MakeDrafterFrom(std::string_view spec, const std::vector<DrafterChoice>& available,
                                         const DrafterSetup& setup) {
  if (spec == "auto") return MakeAutoDrafter(setup, available);
  const DrafterKind* kind = FindDrafterKind(spec);
  if (kind == nullptr) Fail("--spec ", spec, " is no drafter kind");
  // By name first: an alias ("mtp" for the assistant) only when no kind of that name is there.
  const DrafterChoice* chosen = nullptr;
  for (const DrafterChoice& c : available) {
    if (c.kind->name == spec || (chosen == nullptr && c.kind->alias == spec)) chosen = &c;
  }
  DrafterSetup with_file = setup;
  with_file.path = chosen != nullptr ? chosen->path : "";
  // Not available: the kind's own builder says what it is missing.
  return (chosen != nullptr ? chosen->kind : kind)->make(with_file);
}

std::unique_ptr<Drafter> MakeDrafter(std::string_view spec, const DrafterSources& sources, const DrafterSetup& setup) {
  if (spec == "none") {
    if (!sources.draft.empty()) Fail("--draft ", sources.draft, " was given with --spec none");
    return nullptr;
  }
  if (spec != "auto" && FindDrafterKind(spec) == nullptr) Fail("--spec ", spec, " is no drafter kind");
  if (spec != "auto" && !sources.draft.empty()) {
    const DrafterKind& held = DrafterKindOfFile(sources.draft);
    if (held.name != spec && held.alias != spec) {
      Fail("--draft ", sources.draft, " holds a '", held.name, "' drafter but --spec is ", spec, " (pass --spec ",
           held.name, " or auto)");
    }
  }
  return MakeDrafterFrom(spec, AvailableDrafters(sources, setup.target), setup);
}

}  // namespace kakeya
