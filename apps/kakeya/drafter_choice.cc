#include "drafter_choice.h"

#include <filesystem>

#include "base/error.h"
#include "commands.h"

namespace kakeya::cli {

void UseShippedDefaults(ModelFlags& f) {
  if (!f.model.empty()) return;
  f.model = ShippedTargetPath();
  if (!std::filesystem::exists(f.model)) {
    Fail("no -m MODEL given, and the default model ", f.model,
         " is missing (it ships in the repository's models/ folder; KAKEYA_MODELS_DIR points elsewhere)");
  }
}

DrafterSources SourcesOf(const ModelFlags& f) {
  std::error_code ec;
  const bool shipped = f.draft.empty() && std::filesystem::equivalent(f.model, ShippedTargetPath(), ec);
  return {f.draft, shipped ? f.model : ""};
}

DrafterSetup SetupOf(const ModelFlags& f, const Model& target, Context& context, const SamplingParams& sampling,
                     int max_block) {
  return DrafterSetup{target, context, "", sampling, max_block, f.draft_vocab};
}

void AddModelFlags(CLI::App& app, ModelFlags& f, const std::string& spec_note) {
  app.add_option("-m,--model", f.model,
                 "GGUF model file (default: the shipped kakeya-pystdlib model in models/, with its drafters)")
      ->check(CLI::ExistingFile);
  std::string help = "Speculative decoding: none (plain decoding); auto (the default: every drafter available ";
  help += "-- prompt lookup, the --draft file's, the shipped model's drafters, the target's NextN layers -- and the ";
  help += "fastest measured proposes)";
  for (const DrafterKind& k : DrafterKinds()) {
    help += ", " + std::string(k.name) + " (" + std::string(k.help);
    if (!k.alias.empty()) help += "; also as " + std::string(k.alias) + ", its earlier name";
    help += ")";
  }
  app.add_option("--spec", f.spec, help + spec_note)->check(CLI::IsMember(SpecNames()))->capture_default_str();
  std::string kinds;
  for (const DrafterKind& k : DrafterKinds()) {
    if (k.holds != nullptr) kinds += std::string(kinds.empty() ? "" : ", ") + std::string(k.name);
  }
  app.add_option("--draft", f.draft, "Drafter GGUF; its kind (" + kinds + ") is read from the file's metadata")
      ->check(CLI::ExistingFile);
  AddDraftVocabFlag(app, f);
}

void AddDraftVocabFlag(CLI::App& app, ModelFlags& f) {
  app.add_option("--draft-vocab", f.draft_vocab,
                 "Token ids the mtp and dspark drafters score with the target's output head: the first N (rounded up "
                 "to 16), 0 for all. Default: the first " + std::to_string(kDefaultDraftVocab) + " where the "
                 "vocabulary is byte-level BPE (ids in merge order, frequent tokens first) and over twice that size, "
                 "else all. A smaller head drafts faster; tokens past N are never drafted. Output is exact either way")
      ->check(CLI::Range(0, 1 << 24));
}

std::vector<std::string> SpecNames() {
  std::vector<std::string> names = {"none", "auto"};
  for (const DrafterKind& k : DrafterKinds()) {
    names.emplace_back(k.name);
    if (!k.alias.empty() && FindDrafterKind(k.alias) == &k) names.emplace_back(k.alias);
  }
  return names;
}

}  // namespace kakeya::cli
