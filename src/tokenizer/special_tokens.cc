// Special-token partitioning (docs/formats/tokenizers.md 4.2), as llama.cpp's
// tokenizer_st_partition: before the model tokenizer runs, every occurrence of
// a special token's text is cut out of the raw text, longest tokens first.
#include <cctype>

#include "tokenizer/tokenizer.h"

namespace kakeya {

std::vector<Tokenizer::Fragment> Tokenizer::SplitSpecial(std::string_view text,
                                                         bool parse_special) const {
  std::vector<Fragment> fragments;
  if (text.empty()) return fragments;
  fragments.push_back({text});
  std::vector<Fragment> next;
  for (TokenId id : special_tokens_) {
    // Without parse_special, USER_DEFINED tokens are still matched
    // (Hugging Face compatible); CONTROL and UNKNOWN text stays plain text.
    // The types are llama.cpp's after its fix-ups (tokenizer.cc), so the
    // text of an end-of-generation token, "</s>" say, is CONTROL here even
    // where the GGUF says NORMAL or USER_DEFINED.
    if (!parse_special && !HasType(id, kTokenUserDefined)) continue;
    const std::string_view special = texts_[id];
    next.clear();
    for (const Fragment& fragment : fragments) {
      if (fragment.token >= 0) {
        next.push_back(fragment);
        continue;
      }
      std::string_view rest = fragment.text;
      for (size_t pos; (pos = rest.find(special)) != std::string_view::npos;) {
        if (pos > 0) next.push_back({rest.substr(0, pos)});
        next.push_back({special, id});
        rest.remove_prefix(pos + special.size());
        while (rstrip_[id] && !rest.empty() && std::isspace(static_cast<unsigned char>(rest[0]))) {
          rest.remove_prefix(1);
        }
      }
      if (!rest.empty()) next.push_back({rest});
    }
    fragments.swap(next);
  }
  return fragments;
}

}  // namespace kakeya
