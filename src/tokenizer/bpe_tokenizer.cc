#include "tokenizer/bpe_tokenizer.h"

#include <cstdio>

#include "base/error.h"
#include "gguf/gguf.h"
#include "tokenizer/bpe_pre_types.h"
#include "tokenizer/byte_unicode.h"
#include "tokenizer/symbol_merge.h"
#include "tokenizer/utf8.h"

namespace kakeya {
namespace {

constexpr std::string_view kMergesKey = "tokenizer.ggml.merges";

BpePreType ReadPreType(const GgufFile& gguf) {
  // A missing key means llama.cpp's "default" pre-tokenizer.
  return FindBpePreType(gguf.FindString("tokenizer.ggml.pre").value_or("default"));
}

// GPT-2 code points back to bytes (llama.cpp's llama_decode_text, including
// its marker for code points outside the map, which quotes the whole token).
std::string DecodeByteLevel(std::string_view text) {
  std::string out;
  for (uint32_t cp : utf8::Decode(text)) {
    if (const int byte = UnicodeToByte(cp); byte >= 0) {
      out += static_cast<char>(byte);
      continue;
    }
    std::string encoded;
    utf8::Append(encoded, cp);
    out += "[UNK_BYTE_0x";
    for (char c : encoded) {
      char hex[3];
      std::snprintf(hex, sizeof(hex), "%02x", static_cast<uint8_t>(c));
      out += hex;
    }
    out += text;
    out += ']';
  }
  return out;
}

// Hugging Face's clean_up_tokenization_spaces as llama.cpp's detokenize does
// it, three in-place passes: drop the space before ? ! . , ; turn " ' " into
// "'"; drop the space before 's 'm 're 've (not 't 'd 'll).
void CleanSpaces(std::string& text) {
  size_t total = text.size();
  auto pass = [&](auto&& keep_prev_space) {
    const size_t n = total;
    total = n ? 1 : 0;
    for (size_t i = 1; i < n; ++i) {
      const char x = text[i];
      if (!keep_prev_space(i, n)) --total;
      text[total++] = x;
    }
  };
  pass([&](size_t i, size_t) {
    const char x = text[i];
    return !(text[i - 1] == ' ' && (x == '?' || x == '!' || x == '.' || x == ','));
  });
  pass([&](size_t& i, size_t n) {
    if (text[i] == '\'' && i + 1 < n && text[i - 1] == ' ' && text[i + 1] == ' ') {
      text[++i] = '\0';  // the space after is skipped, as in llama.cpp
      return false;
    }
    return true;
  });
  pass([&](size_t i, size_t n) {
    if (text[i - 1] != ' ' || text[i] != '\'' || i + 1 >= n) return true;
    const char x1 = text[i + 1];
    if (x1 == 's' || x1 == 'm') return false;
    if (x1 == 't' || x1 == 'd' || i + 2 >= n) return true;
    const char x2 = text[i + 2];
    return !((x1 == 'r' && x2 == 'e') || (x1 == 'v' && x2 == 'e'));
  });
  text.resize(total);
}

}  // namespace

BpeTokenizer::BpeTokenizer(const GgufFile& gguf) : BpeTokenizer(gguf, ReadPreType(gguf)) {}

BpeTokenizer::BpeTokenizer(const GgufFile& gguf, const BpePreType& pre)
    : pre_(pre.regexes, "tokenizer.ggml.pre") {
  ignore_merges_ = pre.ignore_merges;
  clean_spaces_ = pre.clean_spaces;
  // llama.cpp's BPE defaults: BOS = EOS = 11, add_bos only for llama3-type
  // pre-tokenizers, no space prefix (the key only affects detokenization here).
  LoadVocab(gguf, 11, 11, pre.add_bos);
  add_space_prefix_ = gguf.FindBool("tokenizer.ggml.add_space_prefix").value_or(false);
  LoadMerges(gguf);
}

void BpeTokenizer::LoadMerges(const GgufFile& gguf) {
  if (gguf.Find(kMergesKey) == nullptr) Fail(kMergesKey, ": missing (required for BPE)");
  for (std::string_view merge : gguf.GetStringArray(kMergesKey)) merges_.emplace_back(merge);
  // merges_ is complete: the keys below view its strings.
  for (size_t i = 0; i < merges_.size(); ++i) {
    const std::string_view merge = merges_[i];
    // Split at the first space after position 0, as llama.cpp does.
    const size_t space = merge.find(' ', 1);
    if (space == std::string_view::npos)
      Fail(kMergesKey, ": entry ", i, " '", merge, "' has no space");
    // On duplicates the first (lowest) rank wins, like llama.cpp's emplace.
    ranks_.emplace(Pair{merge.substr(0, space), merge.substr(space + 1)}, static_cast<int>(i));
  }
}

std::vector<TokenId> BpeTokenizer::Encode(std::string_view text, bool add_special,
                                          bool parse_special) const {
  std::vector<TokenId> out;
  if (add_special && add_bos_) out.push_back(bos_);
  std::string word;
  for (const Fragment& fragment : SplitSpecial(text, parse_special)) {
    if (fragment.token >= 0) {
      out.push_back(fragment.token);
      continue;
    }
    // llama.cpp's unicode_regex_split works on code points; invalid bytes
    // become U+FFFD there, and must be valid UTF-8 for PCRE2 here.
    const std::string clean = utf8::Sanitize(fragment.text);
    for (std::string_view piece : pre_.Split(clean)) {
      word.clear();
      AppendByteEncoded(word, piece);
      EncodeWord(word, out);
    }
  }
  if (add_special && add_eos_) out.push_back(eos_);
  return out;
}

void BpeTokenizer::EncodeWord(std::string_view word, std::vector<TokenId>& out) const {
  if (ignore_merges_) {
    if (const TokenId id = FindToken(word); id >= 0) {
      out.push_back(id);
      return;
    }
  }
  // Lowest merge rank first.
  auto rank = [&](std::string_view left, std::string_view right) -> std::optional<double> {
    const auto it = ranks_.find(Pair{left, right});
    if (it == ranks_.end()) return std::nullopt;
    return -static_cast<double>(it->second);
  };
  const std::vector<MergeSymbol> symbols = MergeSymbols(word, rank);

  for (int i = symbols.empty() ? -1 : 0; i >= 0; i = symbols[i].next) {
    const std::string_view symbol = word.substr(symbols[i].start, symbols[i].size);
    if (const TokenId id = FindToken(symbol); id >= 0) {
      out.push_back(id);
      continue;
    }
    // Not in the vocabulary: llama.cpp emits the 1-byte tokens it finds for
    // the symbol's bytes and silently drops the others.
    for (char c : symbol) {
      if (const TokenId id = FindToken(std::string_view(&c, 1)); id >= 0) out.push_back(id);
    }
  }
}

std::string BpeTokenizer::TokenToPiece(TokenId id, bool render_special) const {
  if (id < 0 || id >= n_vocab()) return "";
  switch (types_[id]) {
    case kTokenControl:
    case kTokenUnknown:
      return render_special ? texts_[id] : "";
    case kTokenUserDefined:
      return texts_[id];
    case kTokenNormal:
      return DecodeByteLevel(texts_[id]);
    default:
      return "";  // BYTE, UNUSED and UNDEFINED are suppressed like llama.cpp does
  }
}

std::string BpeTokenizer::Decode(std::span<const TokenId> ids, bool render_special) const {
  std::string text = ConcatenatePieces(ids, render_special);
  if (clean_spaces_) CleanSpaces(text);
  return text;
}

}  // namespace kakeya
