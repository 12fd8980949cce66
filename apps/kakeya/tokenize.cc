// `kakeya tokenize`: the token ids (and pieces) of a text.
#include <cstdio>

#include <nlohmann/json.hpp>

#include "commands.h"
#include "gguf/gguf.h"
#include "tokenizer/tokenizer.h"

namespace kakeya::cli {
namespace {

struct TokenizeFlags {
  std::string model;
  std::string prompt;
  std::string prompt_file;
  bool no_special = false;
  bool json = false;
};

int Tokenize(const TokenizeFlags& f) {
  const std::string text = ReadPrompt(f.prompt, f.prompt_file);
  // Only the vocabulary is needed: no weights are bound, so this also works
  // on vocabulary-only GGUF files.
  const std::unique_ptr<GgufFile> gguf = GgufFile::Open(f.model);
  const std::unique_ptr<Tokenizer> tok = Tokenizer::FromGguf(*gguf);
  const std::vector<TokenId> ids = tok->Encode(text, !f.no_special, true);
  if (f.json) {
    nlohmann::json pieces = nlohmann::json::array();
    for (TokenId id : ids) pieces.push_back(tok->TokenToPiece(id, true));
    nlohmann::json out = {{"tokens", ids}, {"pieces", pieces}};
    std::puts(out.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
  } else {
    for (TokenId id : ids) {
      const std::string piece = tok->TokenToPiece(id, true);
      std::printf("%6d -> '%s'\n", id, piece.c_str());
    }
  }
  return 0;
}

}  // namespace

Runner AddTokenizeCommand(CLI::App& app) {
  auto f = std::make_shared<TokenizeFlags>();
  app.add_option("-m,--model", f->model, "GGUF model (or vocabulary-only) file")->required()->check(CLI::ExistingFile);
  app.add_option("-p,--prompt", f->prompt, "Text to tokenize");
  app.add_option("-f,--file", f->prompt_file, "Read the text from a file");
  app.add_flag("--no-special", f->no_special, "Do not add BOS/EOS");
  app.add_flag("--json", f->json, "Print {\"tokens\": [...], \"pieces\": [...]}");
  return [f] { return Tokenize(*f); };
}

}  // namespace kakeya::cli
