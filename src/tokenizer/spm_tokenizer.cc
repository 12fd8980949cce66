#include "tokenizer/spm_tokenizer.h"

#include "base/error.h"
#include "gguf/gguf.h"
#include "tokenizer/sentencepiece_text.h"
#include "tokenizer/symbol_merge.h"

namespace kakeya {
namespace {

std::vector<float> ReadScores(const GgufFile& gguf, size_t n_tokens) {
  constexpr std::string_view kKey = "tokenizer.ggml.scores";
  const GgufValue* value = gguf.Find(kKey);
  if (value == nullptr) return std::vector<float>(n_tokens, 0.0f);
  std::vector<float> scores;
  if (value->type == GgufType::kArray && value->elem_type != GgufType::kFloat32 &&
      value->elem_type != GgufType::kFloat64) {
    for (int64_t s : gguf.GetIntArray(kKey)) scores.push_back(static_cast<float>(s));
  } else {
    scores = gguf.GetF32Array(kKey);
  }
  if (scores.size() != n_tokens) {
    Fail(kKey, ": ", scores.size(), " entries for ", n_tokens, " tokens (tokenizer.ggml.tokens)");
  }
  return scores;
}

}  // namespace

SpmTokenizer::SpmTokenizer(const GgufFile& gguf) {
  // llama.cpp's SPM defaults: BOS 1, EOS 2, add_bos true.
  LoadVocab(gguf, 1, 2, true);
  scores_ = ReadScores(gguf, texts_.size());
  // Gemma GGUFs set this false; llama's default is true.
  add_space_prefix_ = gguf.FindBool("tokenizer.ggml.add_space_prefix").value_or(true);
  for (TokenId id = 0; id < n_vocab(); ++id) {
    if (types_[id] == kTokenByte && ParseByteToken(texts_[id]) < 0) {
      Fail("tokenizer.ggml.token_type: token ", id, " '", texts_[id],
           "' is a BYTE token but not of the form <0xXX>");
    }
  }
  for (int b = 0; b < 256; ++b) {
    const TokenId id = FindToken(ByteTokenText(static_cast<uint8_t>(b)));
    byte_tokens_[b] = id >= 0 ? id : FindToken(std::string(1, static_cast<char>(b)));
  }
}

std::vector<TokenId> SpmTokenizer::Encode(std::string_view text, bool add_special,
                                          bool parse_special) const {
  std::vector<TokenId> out;
  if (add_special && add_bos_) out.push_back(bos_);
  // The space prefix goes before the first text and before any text that
  // follows a special token (llama.cpp's is_prev_special).
  bool prev_special = true;
  for (const Fragment& fragment : SplitSpecial(text, parse_special)) {
    if (fragment.token >= 0) {
      out.push_back(fragment.token);
      prev_special = true;
      continue;
    }
    std::string raw;
    if (add_space_prefix_ && prev_special) raw = " ";
    raw += fragment.text;
    Merge(EscapeSpaces(raw), out);
    prev_special = false;
  }
  if (add_special && add_eos_) out.push_back(eos_);
  return out;
}

void SpmTokenizer::Merge(std::string_view text, std::vector<TokenId>& out) const {
  // Any adjacent pair whose concatenation is a token may merge, best score first.
  auto score = [&](std::string_view left, std::string_view right) -> std::optional<double> {
    const TokenId id = FindToken(std::string_view(left.data(), left.size() + right.size()));
    if (id < 0) return std::nullopt;
    return scores_[id];
  };
  const std::vector<MergeSymbol> symbols = MergeSymbols(text, score);

  // Every merged symbol is a token; only single characters can be missing.
  // (llama.cpp's resegment also re-splits via recorded merges, which for that
  // reason never triggers.)
  for (int i = symbols.empty() ? -1 : 0; i >= 0; i = symbols[i].next) {
    const std::string_view symbol = text.substr(symbols[i].start, symbols[i].size);
    const TokenId id = FindToken(symbol);
    if (id >= 0) {
      out.push_back(id);
    } else {
      AppendBytes(symbol, out);
    }
  }
}

void SpmTokenizer::AppendBytes(std::string_view symbol, std::vector<TokenId>& out) const {
  for (char c : symbol) {
    const uint8_t byte = static_cast<uint8_t>(c);
    if (byte_tokens_[byte] < 0) {
      Fail("tokenizer.ggml.tokens: byte fallback needs token ", ByteTokenText(byte),
           " (or the 1-byte token), which the vocabulary lacks");
    }
    out.push_back(byte_tokens_[byte]);
  }
}

std::string SpmTokenizer::TokenToPiece(TokenId id, bool render_special) const {
  if (id < 0 || id >= n_vocab()) return "";
  switch (types_[id]) {
    case kTokenControl:
    case kTokenUnknown:
      return render_special ? texts_[id] : "";
    case kTokenUserDefined:
      return texts_[id];
    case kTokenNormal:
      return UnescapeSpaces(texts_[id]);
    case kTokenByte:
      return std::string(1, static_cast<char>(ParseByteToken(texts_[id])));
    default:
      return "";  // UNUSED and UNDEFINED are suppressed like llama.cpp does
  }
}

std::string SpmTokenizer::Decode(std::span<const TokenId> ids, bool render_special) const {
  return ConcatenatePieces(ids, render_special);
}

}  // namespace kakeya
