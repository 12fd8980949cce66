#include "drafter_choice.h"

#include <algorithm>
#include <filesystem>

#include "base/error.h"
#include "commands.h"

namespace kakeya::cli {

void UseShippedDefaults(ModelFlags& f) {
  if (f.model.empty()) {
    f.model = ShippedTargetPath();
    if (!std::filesystem::exists(f.model)) {
      Fail("no -m MODEL given, and the default model ", f.model,
           " is missing (it ships in the repository's models/ folder; KAKEYA_MODELS_DIR points elsewhere)");
    }
  }
  std::error_code ec;
  if (!std::filesystem::equivalent(f.model, ShippedTargetPath(), ec) || !f.draft.empty()) return;
  const std::string shipped_drafter = ShippedDrafterPath(f.spec);
  if (!shipped_drafter.empty() && std::filesystem::exists(shipped_drafter)) f.draft = shipped_drafter;
  f.shipped_target = true;
}

std::vector<DrafterChoice> AutoChoices(const ModelFlags& f, const Model& target) {
  std::vector<DrafterChoice> choices;
  if (!f.draft.empty()) choices.push_back({DrafterKindOfFile(f.draft), f.draft});
  if (f.shipped_target) {
    for (const std::string kind : {"draft", "block", "mtp"}) {
      if (std::filesystem::exists(ShippedDrafterPath(kind))) choices.push_back({kind, ShippedDrafterPath(kind)});
    }
  }
  const bool has_mtp = std::any_of(choices.begin(), choices.end(), [](const DrafterChoice& c) { return c.kind == "mtp"; });
  if (!has_mtp && !target.nextn.empty()) choices.push_back({"mtp", ""});
  return choices;
}

std::unique_ptr<Drafter> MakeDrafter(const ModelFlags& f, const Model& target, Context& ctx,
                                     const SamplingParams& sampling, int max_block) {
  const DrafterSetup setup{target, ctx, f.draft, sampling, max_block};
  if (f.spec == "auto") return MakeAutoDrafter(setup, AutoChoices(f, target));
  if (f.spec == "none") {
    if (!f.draft.empty()) Fail("--draft ", f.draft, " was given with --spec none");
    return nullptr;
  }
  if (!f.draft.empty() && DrafterKindOfFile(f.draft) != f.spec) {
    const std::string kind = DrafterKindOfFile(f.draft);
    Fail("--draft ", f.draft, " holds a '", kind, "' drafter but --spec is ", f.spec, " (pass --spec ", kind, " or auto)");
  }
  return FindDrafterKind(f.spec)->make(setup);
}

void AddModelFlags(CLI::App& app, ModelFlags& f, const std::string& spec_note) {
  app.add_option("-m,--model", f.model,
                 "GGUF model file (default: the shipped kakeya-pystdlib model in models/, with its drafters)")
      ->check(CLI::ExistingFile);
  app.add_option("--spec", f.spec, SpecHelp() + spec_note)->check(CLI::IsMember(SpecNames()))->capture_default_str();
  app.add_option("--draft", f.draft,
                 "Drafter GGUF; its kind is read from the file: a language model of the same vocabulary "
                 "(draft), a DFlash block drafter (block), an MTP sidecar or gemma4-assistant (mtp)")
      ->check(CLI::ExistingFile);
}

std::string SpecHelp() {
  std::string help = "Speculative decoding: none (plain decoding); auto (the default: every drafter available ";
  help += "-- ngram, the --draft file's, the shipped model's drafters, the target's NextN layers -- and the ";
  help += "fastest measured proposes)";
  for (const DrafterKind& k : DrafterKinds()) help += ", " + std::string(k.name) + " (" + std::string(k.help) + ")";
  return help;
}

std::vector<std::string> SpecNames() {
  std::vector<std::string> names = {"none", "auto"};
  for (const DrafterKind& k : DrafterKinds()) names.emplace_back(k.name);
  return names;
}

}  // namespace kakeya::cli
