#include "tokenizer/bpe_tokenizer.h"

#include <cstdio>

#include "base/error.h"
#include "gguf/gguf.h"
#include "tokenizer/bpe_pre_types.h"
#include "tokenizer/byte_unicode.h"
#include "tokenizer/sentencepiece_text.h"
#include "tokenizer/symbol_merge.h"
#include "tokenizer/utf8.h"

namespace kakeya {
namespace {

constexpr std::string_view kMergesKey = "tokenizer.ggml.merges";
constexpr std::string_view kGemma4 = "gemma4";

BpePreType ReadPreType(const GgufFile& gguf, std::string_view model) {
  // llama.cpp ignores the key for gemma4 models, and reads a missing key as
  // its "default" pre-tokenizer.
  if (model == kGemma4) return FindBpePreType(kGemma4);
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

// llama.cpp's defaults: BOS = EOS = 11 for gpt2, none for gemma4 (its GGUFs name them).
BpeTokenizer::BpeTokenizer(const GgufFile& gguf, std::string_view model)
    : BpeTokenizer(gguf, ReadPreType(gguf, model), model == kGemma4 ? -1 : 11) {}

BpeTokenizer::BpeTokenizer(const GgufFile& gguf, const BpePreType& pre, TokenId default_bos_eos)
    : pre_(pre.regexes, "tokenizer.ggml.pre") {
  ignore_merges_ = pre.ignore_merges;
  clean_spaces_ = pre.clean_spaces;
  sentencepiece_text_ = pre.sentencepiece_text;
  // add_bos by default only for llama3-type pre-tokenizers; no space prefix
  // (the key only affects detokenization here).
  LoadVocab(gguf, default_bos_eos, default_bos_eos, pre.add_bos);
  if (pre.force_add_bos && !add_bos_) {
    if (bos_ < 0) Fail("tokenizer.ggml.bos_token_id: missing, but this vocabulary always adds BOS");
    add_bos_ = true;
  }
  add_space_prefix_ = gguf.FindBool("tokenizer.ggml.add_space_prefix").value_or(false);
  LoadMerges(gguf);
  for (int b = 0; b < 256; ++b) {
    const auto byte = static_cast<uint8_t>(b);
    byte_fallback_[b] = FindToken(sentencepiece_text_ ? ByteTokenText(byte)
                                                      : std::string(1, static_cast<char>(byte)));
  }
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
    std::string text = utf8::Sanitize(fragment.text);
    if (sentencepiece_text_) text = EscapeSpaces(text);
    for (std::string_view piece : pre_.Split(text)) {
      if (!sentencepiece_text_) {
        word.clear();
        AppendByteEncoded(word, piece);
        piece = word;
      }
      EncodeWord(piece, out);
    }
  }
  if (add_special && add_eos_) out.push_back(eos_);
  return out;
}

void BpeTokenizer::EncodeWord(std::string_view word, std::vector<TokenId>& out) const {
  // llama.cpp takes a Gemma 4 newline run that is a token whole instead of
  // merging it (its merge lookup refuses newlines; PR 21343). Gemma 4's own
  // merges rebuild the same token, but a vocabulary without them would not.
  const bool newline_run = sentencepiece_text_ && word.find_first_not_of('\n') == word.npos;
  if (ignore_merges_ || newline_run) {
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
    // Not in the vocabulary: llama.cpp emits the fallback tokens it finds for
    // the symbol's bytes and silently drops the others.
    for (char c : symbol) {
      if (const TokenId id = byte_fallback_[static_cast<uint8_t>(c)]; id >= 0) out.push_back(id);
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
      return sentencepiece_text_ ? UnescapeSpaces(texts_[id]) : DecodeByteLevel(texts_[id]);
    case kTokenByte: {
      const int byte = ParseByteToken(texts_[id]);
      return byte < 0 ? "" : std::string(1, static_cast<char>(byte));
    }
    default:
      return "";  // UNUSED and UNDEFINED are suppressed like llama.cpp does
  }
}

std::string BpeTokenizer::Decode(std::span<const TokenId> ids, bool render_special) const {
  std::string text = ConcatenatePieces(ids, render_special);
  if (clean_spaces_) CleanSpaces(text);
  return text;
}

}  // namespace kakeya
