// Tokenizer::FromGguf: the tokenizer type a GGUF's tokenizer.ggml.model
// names (docs/formats/tokenizers.md). Apart from tokenizer.cc, which the
// types build on, so that the base does not depend on its subclasses.
#include "base/error.h"
#include "gguf/gguf.h"
#include "tokenizer/bpe_tokenizer.h"
#include "tokenizer/spm_tokenizer.h"
#include "tokenizer/tokenizer.h"

namespace kakeya {

std::unique_ptr<Tokenizer> Tokenizer::FromGguf(const GgufFile& gguf) {
  constexpr std::string_view kModelKey = "tokenizer.ggml.model";
  const std::optional<std::string_view> model = gguf.FindString(kModelKey);
  if (!model) Fail(kModelKey, ": missing (the GGUF has no tokenizer)");
  if (*model == "llama") return std::make_unique<SpmTokenizer>(gguf);
  if (*model == "gpt2" || *model == "gemma4") return std::make_unique<BpeTokenizer>(gguf, *model);
  Fail(kModelKey, ": unsupported tokenizer model '", *model,
       "'; supported: llama (SentencePiece), gpt2 (byte-level BPE), gemma4 (BPE on UTF-8)");
}

}  // namespace kakeya
