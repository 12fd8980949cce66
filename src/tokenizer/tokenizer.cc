// The vocabulary metadata shared by all tokenizer types, following
// llama.cpp's llama_vocab::impl::load (Tokenizer::FromGguf, which picks the
// type, is tokenizer_from_gguf.cc).
#include "tokenizer/tokenizer.h"

#include <algorithm>
#include <cctype>
#include <limits>
#include <set>

#include "base/error.h"
#include "gguf/gguf.h"

namespace kakeya {
namespace {

constexpr std::string_view kTokensKey = "tokenizer.ggml.tokens";
constexpr std::string_view kTypesKey = "tokenizer.ggml.token_type";

// Texts that llama.cpp treats as end of generation whatever the metadata says,
// and forces to CONTROL. Being CONTROL, such a token is not rendered as text
// by default, and its text is cut out of the input whole only with
// parse_special; without it the text is tokenized as plain text, even where
// the GGUF says NORMAL or USER_DEFINED. That is why Qwen2's vocabulary, whose
// "</s>" (128247) is a NORMAL token, gives "</s>" as that one token with
// parse_special and as "</", "s", ">" without, and why Phi-3's USER_DEFINED
// "</s>" is matched only with parse_special. The list is llama.cpp's, with the
// texts of Gemma 4 (<eos>, <turn|>, <|tool_response>), PaddleOCR (</s>),
// gpt-oss's harmony format, Solar Open, Kimi-K2, DeepSeek-OCR and MiniMax;
// BuildEndOfGeneration takes two of them back as llama.cpp does.
constexpr std::string_view kEndOfGenerationTexts[] = {
    "<|eot_id|>", "<|im_end|>", "<|end|>", "<|return|>", "<|call|>", "<|flush|>", "<|calls|>",
    "<end_of_turn>", "<|endoftext|>", "</s>", "<|eom_id|>", "<EOT>", "_<EOT>", "[EOT]", "[EOS]",
    "<|end_of_text|>", "<end_of_utterance>", "<eos>", "<turn|>", "<|tool_response>",
    "<｜end▁of▁sentence｜>", "[e~[",
};

// gpt-oss's harmony markers, which llama.cpp makes USER_DEFINED whatever the
// GGUF says so that they are always rendered.
constexpr std::string_view kAlwaysRenderedTexts[] = {
    "<|channel|>", "<|message|>", "<|start|>", "<|constrain|>"};

// Special ids llama.cpp finds by text when their key is missing; found tokens
// are forced to CONTROL, and some are end of generation. llama.cpp takes the
// first match in hash-map order when several texts exist; we take the first
// in list order.
struct DetectedId {
  std::vector<std::string_view> keys;  // current name first, then deprecated aliases
  std::vector<std::string_view> texts;
  bool end_of_generation;
};

const DetectedId kDetectedIds[] = {
    {{"tokenizer.ggml.eot_token_id"},
     {"<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>", "<|end_of_text|>",
      "<EOT>", "_<EOT>", "[EOT]", "<｜end▁of▁sentence｜>", "<end_of_utterance>"},
     true},
    {{"tokenizer.ggml.eom_token_id"}, {"<|eom_id|>"}, true},
    {{"tokenizer.ggml.fim_pre_token_id", "tokenizer.ggml.prefix_token_id"},
     {"<|fim_prefix|>", "<fim-prefix>", "<fim_prefix>", "<｜fim▁begin｜>", "<PRE>", "▁<PRE>",
      "<|code_prefix|>", "<|prefix|>"},
     false},
    {{"tokenizer.ggml.fim_suf_token_id", "tokenizer.ggml.suffix_token_id"},
     {"<|fim_suffix|>", "<fim-suffix>", "<fim_suffix>", "<｜fim▁hole｜>", "<SUF>", "▁<SUF>",
      "<|code_suffix|>", "<|suffix|>"},
     false},
    {{"tokenizer.ggml.fim_mid_token_id", "tokenizer.ggml.middle_token_id"},
     {"<|fim_middle|>", "<fim-middle>", "<fim_middle>", "<｜fim▁end｜>", "<MID>", "▁<MID>",
      "<|code_middle|>", "<|middle|>"},
     false},
    {{"tokenizer.ggml.fim_pad_token_id"},
     {"<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>", "[PAD]"},
     true},
    {{"tokenizer.ggml.fim_rep_token_id"},
     {"<|fim_repo|>", "<|repo_name|>", "<fim-repo>", "<REPO>", "<reponame>"},
     true},
    {{"tokenizer.ggml.fim_sep_token_id"}, {"<|file_sep|>"}, true},
};

std::vector<int32_t> ReadTypes(const GgufFile& gguf, size_t n_tokens) {
  // Without the array every token is NORMAL (llama.cpp's default attribute).
  if (gguf.Find(kTypesKey) == nullptr) return std::vector<int32_t>(n_tokens, kTokenNormal);
  const std::vector<int64_t> raw = gguf.GetIntArray(kTypesKey);
  if (raw.size() != n_tokens) {
    Fail(kTypesKey, ": ", raw.size(), " entries for ", n_tokens, " tokens (", kTokensKey, ")");
  }
  std::vector<int32_t> types(n_tokens);
  for (size_t i = 0; i < n_tokens; ++i) {
    if (raw[i] < kTokenUndefined || raw[i] > kTokenByte) {
      Fail(kTypesKey, ": entry ", i, " has unknown token type ", raw[i], " (expected 0..6)");
    }
    types[i] = static_cast<int32_t>(raw[i]);
  }
  return types;
}

// An explicit id must be in range; a type default that is not is dropped.
TokenId ReadId(const GgufFile& gguf, std::string_view key, TokenId fallback, size_t n_tokens) {
  if (std::optional<uint32_t> id = gguf.FindU32(key)) {
    if (*id >= n_tokens) Fail(key, ": id ", *id, " is out of range (", n_tokens, " tokens)");
    return static_cast<TokenId>(*id);
  }
  return fallback >= 0 && static_cast<size_t>(fallback) < n_tokens ? fallback : -1;
}

std::string Lowercase(std::string_view text) {
  std::string out(text);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

}  // namespace

bool Tokenizer::IsEndOfGeneration(TokenId id) const {
  return std::binary_search(end_of_generation_.begin(), end_of_generation_.end(), id);
}

std::string Tokenizer::ConcatenatePieces(std::span<const TokenId> ids, bool render_special) const {
  std::string out;
  for (size_t i = 0; i < ids.size(); ++i) {
    std::string piece = TokenToPiece(ids[i], render_special);
    // Only the first token is considered, even when it renders as nothing
    // (e.g. an unrendered BOS): llama.cpp clears its remove_space flag after it.
    if (i == 0 && add_space_prefix_ && !piece.empty() && piece[0] == ' ') piece.erase(0, 1);
    out += piece;
  }
  return out;
}

TokenId Tokenizer::FindToken(std::string_view text) const {
  const auto it = ids_.find(text);
  return it == ids_.end() ? -1 : it->second;
}

void Tokenizer::LoadVocab(const GgufFile& gguf, TokenId default_bos, TokenId default_eos,
                          bool default_add_bos) {
  if (gguf.Find(kTokensKey) == nullptr) Fail(kTokensKey, ": missing (the GGUF has no vocabulary)");
  const std::vector<std::string_view> tokens = gguf.GetStringArray(kTokensKey);
  if (tokens.empty()) Fail(kTokensKey, ": the vocabulary is empty");
  if (tokens.size() > static_cast<size_t>(std::numeric_limits<TokenId>::max())) {
    Fail(kTokensKey, ": ", tokens.size(), " tokens do not fit 32-bit ids");
  }
  texts_.reserve(tokens.size());
  for (size_t i = 0; i < tokens.size(); ++i) {
    // llama.cpp renames empty tokens so that they can never match text.
    texts_.push_back(tokens[i].empty() ? StrCat("[EMPTY_", i, "]") : std::string(tokens[i]));
  }
  types_ = ReadTypes(gguf, texts_.size());
  // Built after texts_ is complete: the keys view its strings. A duplicate
  // text maps to its last id, as llama.cpp's token_to_id does.
  for (size_t i = 0; i < texts_.size(); ++i) ids_[texts_[i]] = static_cast<TokenId>(i);

  LoadSpecialIds(gguf, default_bos, default_eos, default_add_bos);
  BuildEndOfGeneration(gguf);
  BuildSpecialTokens(gguf);
}

void Tokenizer::LoadSpecialIds(const GgufFile& gguf, TokenId default_bos, TokenId default_eos,
                               bool default_add_bos) {
  const size_t n = texts_.size();
  bos_ = ReadId(gguf, "tokenizer.ggml.bos_token_id", default_bos, n);
  eos_ = ReadId(gguf, "tokenizer.ggml.eos_token_id", default_eos, n);
  add_bos_ = gguf.FindBool("tokenizer.ggml.add_bos_token").value_or(default_add_bos);
  add_eos_ = gguf.FindBool("tokenizer.ggml.add_eos_token").value_or(false);
  if (add_bos_ && bos_ < 0) Fail("tokenizer.ggml.add_bos_token: set, but there is no BOS token");
  if (add_eos_ && eos_ < 0) Fail("tokenizer.ggml.add_eos_token: set, but there is no EOS token");
}

// llama.cpp's "auto-detect special tokens by text" and special_eog_ids.
void Tokenizer::BuildEndOfGeneration(const GgufFile& gguf) {
  std::set<TokenId> ids = {eos_};
  for (const DetectedId& detected : kDetectedIds) {
    const TokenId id = ReadOrDetectId(gguf, detected.keys, detected.texts);
    if (detected.end_of_generation) ids.insert(id);
  }
  for (std::string_view text : kEndOfGenerationTexts) {
    const TokenId id = FindToken(text);
    if (id < 0) continue;
    ids.insert(id);
    types_[id] = kTokenControl;
  }
  for (std::string_view text : kAlwaysRenderedTexts) {
    if (const TokenId id = FindToken(text); id >= 0) types_[id] = kTokenUserDefined;
  }
  ids.erase(-1);

  // The two texts of the list llama.cpp takes back, judging by the others
  // present: in gpt-oss's and Solar Open's vocabularies "<|end|>" ends a
  // message, not the generation, and is made USER_DEFINED; in Gemma 4's
  // (known by its "<|tool_response>") "</s>" is plain text, made NORMAL.
  const auto present = [&](std::string_view text) {
    const TokenId id = FindToken(text);
    return id >= 0 && ids.contains(id);
  };
  const bool has_call = present("<|call|>") || present("<|calls|>");
  if (present("<|end|>") && has_call && (present("<|return|>") || present("<|flush|>"))) {
    const TokenId end = FindToken("<|end|>");
    ids.erase(end);
    types_[end] = kTokenUserDefined;
  }
  if (present("</s>") && present("<|tool_response>")) {
    const TokenId s = FindToken("</s>");
    ids.erase(s);
    types_[s] = kTokenNormal;
  }
  end_of_generation_.assign(ids.begin(), ids.end());
}

TokenId Tokenizer::ReadOrDetectId(const GgufFile& gguf, std::span<const std::string_view> keys,
                                  std::span<const std::string_view> texts) {
  for (std::string_view key : keys) {
    if (const TokenId id = ReadId(gguf, key, -1, texts_.size()); id >= 0) return id;
  }
  for (std::string_view text : texts) {
    if (const TokenId id = FindToken(text); id >= 0) {
      types_[id] = kTokenControl;
      return id;
    }
  }
  return -1;
}

void Tokenizer::BuildSpecialTokens(const GgufFile& gguf) {
  for (size_t i = 0; i < texts_.size(); ++i) {
    const int32_t type = types_[i];
    if (type == kTokenControl || type == kTokenUserDefined || type == kTokenUnknown) {
      special_tokens_.push_back(static_cast<TokenId>(i));
    }
  }
  // llama.cpp uses an unstable std::sort here; stable keeps equal lengths in id order.
  std::stable_sort(special_tokens_.begin(), special_tokens_.end(),
                   [&](TokenId a, TokenId b) { return texts_[a].size() > texts_[b].size(); });

  // llama.cpp marks the special tokens of Phi-3 models RSTRIP (by model name).
  rstrip_.assign(texts_.size(), false);
  const std::string name = Lowercase(gguf.FindString("general.name").value_or(""));
  if (name.find("phi-3") == std::string::npos && name.find("phi3") == std::string::npos) return;
  for (TokenId id : special_tokens_) rstrip_[id] = true;
  for (std::string_view text : {"</s>"}) {
    if (TokenId id = FindToken(text); id >= 0) rstrip_[id] = true;
  }
  for (std::string_view text : {"<unk>", "<s>", "<|endoftext|>"}) {
    if (TokenId id = FindToken(text); id >= 0) rstrip_[id] = false;
  }
}

}  // namespace kakeya
