// Tokenizers read from GGUF metadata (docs/formats/tokenizers.md): SentencePiece
// (`tokenizer.ggml.model = llama`), byte-level BPE (`gpt2`) with the
// pre-tokenizer named by `tokenizer.ggml.pre`, and Gemma 4's BPE on UTF-8
// with spaces escaped to "▁" (`gemma4`).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace kakeya {

class GgufFile;

using TokenId = int32_t;

// Values of tokenizer.ggml.token_type (llama.cpp's llama_token_type).
enum TokenType : int32_t {
  kTokenUndefined = 0,
  kTokenNormal = 1,
  kTokenUnknown = 2,
  kTokenControl = 3,
  kTokenUserDefined = 4,
  kTokenUnused = 5,
  kTokenByte = 6,
};

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;

  // Throws Error naming the key when the metadata is missing or inconsistent,
  // or the tokenizer model / pre-tokenizer is not supported (listing those that are).
  static std::unique_ptr<Tokenizer> FromGguf(const GgufFile& gguf);

  // add_special: add BOS/EOS as the GGUF's add_bos_token/add_eos_token say.
  // parse_special: text like "<|im_start|>" becomes the control token.
  virtual std::vector<TokenId> Encode(std::string_view text, bool add_special,
                                      bool parse_special) const = 0;
  // The bytes of one token (byte tokens give their raw byte, which may be an
  // incomplete UTF-8 sequence). Control tokens give "" unless render_special.
  virtual std::string TokenToPiece(TokenId id, bool render_special) const = 0;
  // Concatenated pieces, with the model's leading-space / cleanup rules.
  virtual std::string Decode(std::span<const TokenId> ids, bool render_special) const = 0;

  int32_t n_vocab() const { return static_cast<int32_t>(texts_.size()); }
  // Whether ids number the tokens in the order their merges were learned,
  // frequent tokens first (byte-level BPE: Qwen, Llama 3, DeepSeek, GLM), so
  // that a drafter may score the lowest ids only (DraftVocabSize).
  virtual bool frequent_tokens_first() const { return false; }
  std::string_view TokenText(TokenId id) const { return texts_[id]; }
  TokenId bos() const { return bos_; }  // -1 if none
  TokenId eos() const { return eos_; }  // -1 if none
  bool add_bos() const { return add_bos_; }
  bool add_eos() const { return add_eos_; }
  // End of generation: EOS, EOT and other end-of-generation control tokens.
  bool IsEndOfGeneration(TokenId id) const;

 protected:
  // A piece of the input after special-token splitting (docs/formats/tokenizers.md 4.2):
  // raw text still to be tokenized, or one special token.
  struct Fragment {
    std::string_view text;
    TokenId token = -1;  // -1 for raw text
  };

  // Reads what all tokenizer types share (docs/formats/tokenizers.md 4.1): tokens, types,
  // special ids, add_bos/add_eos, the end-of-generation set and the special
  // token list. The arguments are the tokenizer type's defaults.
  void LoadVocab(const GgufFile& gguf, TokenId default_bos, TokenId default_eos,
                 bool default_add_bos);
  // The id whose text is `text` (the last one if several), or -1.
  TokenId FindToken(std::string_view text) const;
  bool HasType(TokenId id, TokenType type) const { return types_[id] == type; }
  // The pieces of `ids` joined; with add_space_prefix_, one leading space of
  // the first token is dropped (llama.cpp's detokenize, remove_special off).
  std::string ConcatenatePieces(std::span<const TokenId> ids, bool render_special) const;
  // Cuts `text` at occurrences of special tokens (SplitSpecial in special_tokens.cc).
  std::vector<Fragment> SplitSpecial(std::string_view text, bool parse_special) const;

  std::vector<std::string> texts_;  // tokenizer.ggml.tokens
  std::vector<int32_t> types_;      // tokenizer.ggml.token_type, after llama.cpp's fix-ups
  std::vector<TokenId> end_of_generation_;
  TokenId bos_ = -1;
  TokenId eos_ = -1;
  bool add_bos_ = false;
  bool add_eos_ = false;
  bool add_space_prefix_ = false;  // tokenizer.ggml.add_space_prefix

 private:
  void LoadSpecialIds(const GgufFile& gguf, TokenId default_bos, TokenId default_eos,
                      bool default_add_bos);
  void BuildEndOfGeneration(const GgufFile& gguf);
  // The id under the first present key, else the first token with one of
  // `texts` (forced to CONTROL, as llama.cpp does), else -1.
  TokenId ReadOrDetectId(const GgufFile& gguf, std::span<const std::string_view> keys,
                         std::span<const std::string_view> texts);
  void BuildSpecialTokens(const GgufFile& gguf);

  std::unordered_map<std::string_view, TokenId> ids_;  // views into texts_
  std::vector<TokenId> special_tokens_;  // CONTROL, USER_DEFINED, UNKNOWN; longest text first
  std::vector<bool> rstrip_;             // special token eats the whitespace after it
};

}  // namespace kakeya
