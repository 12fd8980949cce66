#include "speculative/drafter_registry.h"

#include "base/error.h"
#include "gguf/gguf.h"
#include "speculative/assistant_drafter.h"
#include "speculative/dflash_drafter.h"
#include "speculative/auto_drafter.h"
#include "speculative/draft_model_drafter.h"
#include "speculative/mtp_drafter.h"
#include "speculative/ngram_drafter.h"

namespace kakeya {
namespace {

std::unique_ptr<Drafter> MakeNgram(const DrafterSetup& s) {
  return std::make_unique<NgramDrafter>(NgramOptions{.n_ctx = s.target_context.options().n_ctx});
}

std::unique_ptr<Drafter> MakeDraftModel(const DrafterSetup& s) {
  if (s.draft_path.empty()) Fail("--spec draft needs a draft model: pass --draft MODEL");
  DraftModelOptions o;
  o.n_ctx = s.target_context.options().n_ctx;
  o.max_block = s.max_block;
  o.shared_pool = &s.target_context.pool();
  o.sampling = s.sampling;
  return std::make_unique<DraftModelDrafter>(s.target, s.draft_path, o);
}

std::unique_ptr<Drafter> MakeBlock(const DrafterSetup& s) {
  if (s.draft_path.empty()) Fail("--spec block needs a DFlash drafter: pass --draft FILE");
  return std::make_unique<DFlashDrafter>(s.target, s.draft_path, s.target_context.options().n_ctx,
                                         s.target_context.pool());
}

std::unique_ptr<Drafter> MakeMtp(const DrafterSetup& s) {
  if (!s.draft_path.empty() && GgufFile::Open(s.draft_path)->GetString("general.architecture") == "gemma4-assistant") {
    return MakeAssistantDrafter(s);
  }
  MtpOptions o;
  o.n_ctx = s.target_context.options().n_ctx;
  o.max_batch = s.target_context.options().max_batch;
  o.shared_pool = &s.target_context.pool();
  return std::make_unique<MtpDrafter>(s.target, s.draft_path, o);
}

constexpr DrafterKind kKinds[] = {
    {"ngram", "prompt lookup: what followed the last occurrence of the current suffix", MakeNgram},
    {"draft", "a smaller language model of the same vocabulary (--draft FILE)", MakeDraftModel},
    {"block", "DFlash block drafter: one forward of the drafter proposes a whole block from the target's hidden states (--draft FILE)", MakeBlock},
    {"mtp", "multi-token prediction: the target's NextN layers, or an MTP sidecar or gemma4-assistant file (--draft FILE)", MakeMtp},
};

}  // namespace

std::span<const DrafterKind> DrafterKinds() { return kKinds; }

const DrafterKind* FindDrafterKind(std::string_view name) {
  for (const DrafterKind& k : kKinds) {
    if (k.name == name) return &k;
  }
  return nullptr;
}

std::unique_ptr<Drafter> MakeAutoDrafter(const DrafterSetup& setup, const std::vector<DrafterChoice>& choices) {
  DrafterSetup greedy = setup;
  greedy.sampling.temperature = 0.0f;
  std::vector<std::unique_ptr<Drafter>> drafters;
  drafters.push_back(MakeNgram(greedy));
  for (const DrafterChoice& c : choices) {
    const DrafterKind* kind = FindDrafterKind(c.kind);
    if (kind == nullptr) Fail("unknown drafter kind ", c.kind);
    greedy.draft_path = c.path;
    drafters.push_back(kind->make(greedy));
  }
  if (drafters.size() == 1) return std::move(drafters.front());
  return std::make_unique<AutoDrafter>(std::move(drafters));
}

std::string DrafterKindOfFile(const std::string& path) {
  const std::unique_ptr<GgufFile> file = GgufFile::Open(path);
  const std::string arch(file->GetString("general.architecture"));
  if (arch == "dflash") return "block";
  if (arch == "gemma4-assistant") return "mtp";
  const auto nextn = file->FindU32(arch + ".nextn_predict_layers");
  if (nextn.has_value() && *nextn > 0 && file->FindTensor("blk.0.attn_norm.weight") == nullptr) return "mtp";
  return "draft";
}

}  // namespace kakeya
