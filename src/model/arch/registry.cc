#include "model/arch/architecture.h"

namespace kakeya {

// Defined in the family files of this folder.
extern const Architecture kLlama, kQwen2, kQwen3, kQwen3Moe;  // llama.cc
extern const Architecture kGemma2, kGemma3;                   // gemma.cc
extern const Architecture kGemma4;                            // gemma4.cc
extern const Architecture kGlm4Moe;                           // glm4moe.cc
extern const Architecture kDeepseek4;                         // deepseek4.cc
extern const Architecture kQwen35, kQwen35Moe;                // qwen35.cc

namespace {
constexpr const Architecture* kArchitectures[] = {
    &kLlama, &kQwen2, &kQwen3, &kQwen3Moe, &kGemma2, &kGemma3, &kGemma4, &kGlm4Moe, &kDeepseek4, &kQwen35, &kQwen35Moe,
};
}  // namespace

const Architecture* FindArchitecture(std::string_view name) {
  for (const Architecture* a : kArchitectures) {
    if (a->name == name) return a;
  }
  return nullptr;
}

std::string SupportedArchitectureNames() {
  std::string out;
  for (const Architecture* a : kArchitectures) {
    if (!out.empty()) out += ", ";
    out += a->name;
  }
  return out;
}

}  // namespace kakeya
