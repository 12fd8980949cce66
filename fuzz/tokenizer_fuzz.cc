// libFuzzer target for the tokenizers: prompts, chat messages and the server's
// request bodies are untrusted text, tokenized with every vocabulary type kakeya
// reads (SentencePiece, byte-level BPE with each pre-tokenizer regex of the
// fixtures, Gemma 4's BPE). The first input byte picks the vocabulary and the
// flags, the rest is the text. Any text must encode to ids inside the
// vocabulary, and those ids must decode, with no crash, no sanitizer report,
// no hang. Byte-level BPE with a token for every byte also gives valid UTF-8
// back: the pieces of its ids spell the input's bytes (malformed bytes become
// U+FFFD first, and a byte without a token is dropped, as in llama.cpp; Decode
// may differ: it cleans up spaces before
// punctuation where Hugging Face's clean_up_tokenization_spaces does). Run
// with scripts/fuzz.sh tokenizer.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_set>
#include <vector>

#include "base/error.h"
#include "gguf/gguf.h"
#include "tokenizer/byte_unicode.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/utf8.h"

namespace {

struct Vocab {
  std::unique_ptr<kakeya::GgufFile> file;
  std::unique_ptr<kakeya::Tokenizer> tokenizer;
  bool every_byte;  // byte-level BPE (tokenizer.ggml.model = gpt2) with a token for each of the 256 bytes
};

std::vector<Vocab> LoadVocabs() {
  // One vocabulary per tokenizer type and pre-tokenizer of tests/fixtures/tokenizer.
  const char* const kNames[] = {"llama-spm-8000", "phi-3",  "gpt-2",  "llama-bpe",      "qwen2",
                                "deepseek-coder", "falcon", "starcoder", "gemma-4"};
  std::vector<Vocab> vocabs;
  for (const char* name : kNames) {
    Vocab v;
    v.file = kakeya::GgufFile::Open(std::string(KAKEYA_TOKENIZER_FIXTURES) + "/ggml-vocab-" + name + ".gguf");
    v.tokenizer = kakeya::Tokenizer::FromGguf(*v.file);
    v.every_byte = v.file->GetString("tokenizer.ggml.model") == "gpt2";
    std::unordered_set<std::string_view> texts;
    for (kakeya::TokenId id = 0; id < v.tokenizer->n_vocab(); ++id) texts.insert(v.tokenizer->TokenText(id));
    for (int b = 0; b < 256; ++b) v.every_byte = v.every_byte && texts.count(kakeya::ByteToUnicode(uint8_t(b)));
    if (v.every_byte) std::fprintf(stderr, "tokenizer_fuzz: %s spells every valid UTF-8 input back\n", name);
    vocabs.push_back(std::move(v));
  }
  return vocabs;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::vector<Vocab> vocabs = LoadVocabs();
  if (size == 0) return 0;
  const Vocab& vocab = vocabs[data[0] % vocabs.size()];
  const bool parse_special = (data[0] / vocabs.size()) & 1;
  const bool add_special = (data[0] / vocabs.size()) & 2;
  const std::string_view text(reinterpret_cast<const char*>(data + 1), size - 1);
  const kakeya::Tokenizer& tok = *vocab.tokenizer;
  std::vector<kakeya::TokenId> ids;
  try {
    ids = tok.Encode(text, add_special, parse_special);
  } catch (const kakeya::Error&) {
    return 0;  // a clear refusal is allowed; anything else is a finding
  }
  std::string pieces;
  for (const kakeya::TokenId id : ids) {
    if (id < 0 || id >= tok.n_vocab()) std::abort();
    pieces += tok.TokenToPiece(id, true);
  }
  (void)tok.Decode(ids, false);
  const bool exact = vocab.every_byte && !parse_special && !add_special && kakeya::utf8::Sanitize(text) == text;
  if (exact && pieces != text) std::abort();
  return 0;
}
