// Left recursion makes the matcher's expansion of a rule reference loop
// forever, so the parser refuses it (as llama.cpp's validation does).
#pragma once

#include <cstdint>
#include <optional>

#include "grammar/grammar_internal.h"

namespace kakeya {

// A rule that can reach itself before matching any character (through
// references at the start of alternatives, or after references to rules that
// can match the empty string), or nullopt.
std::optional<uint32_t> FindLeftRecursion(const Grammar& grammar);

}  // namespace kakeya
