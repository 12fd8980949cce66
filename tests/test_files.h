// What tests that write their own models share: a scratch folder removed at
// the end, the small SentencePiece vocabulary those models carry, and the
// check that a broken one is refused with a message.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "base/error.h"
#include "gguf/gguf.h"
#include "model/model.h"

namespace kakeya {

// The bytes of a file the tests read (a template, a fixture's text); throws
// naming it if it cannot be read.
inline std::string ReadFile(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read " + path.string());
  std::ostringstream bytes;
  bytes << in.rdbuf();
  return bytes.str();
}

// <tmp>/kakeya_<tag>_<pid>, created now and removed with its contents at the
// end of the scope; the pid keeps concurrent runs apart.
class TempDir {
 public:
  explicit TempDir(const std::string& tag)
      : path_(std::filesystem::temp_directory_path() / ("kakeya_" + tag + "_" + std::to_string(getpid()))) {
    std::filesystem::create_directories(path_);
  }
  ~TempDir() { std::filesystem::remove_all(path_); }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  std::string File(const std::string& name) const { return (path_ / name).string(); }

 private:
  std::filesystem::path path_;
};

// tokenizer.* keys of an n_vocab-token SentencePiece vocabulary the engine
// loads: <unk> <s> </s>, the 256 byte tokens, then filler pieces "▁w<id>".
inline void AddFillerVocabulary(GgufWriter& w, int n_vocab) {
  std::vector<std::string> tokens = {"<unk>", "<s>", "</s>"};
  std::vector<int32_t> types = {2, 3, 3};
  for (int b = 0; b < 256; ++b) {
    char piece[8];
    std::snprintf(piece, sizeof piece, "<0x%02X>", b);
    tokens.push_back(piece);
    types.push_back(6);
  }
  while (tokens.size() < static_cast<size_t>(n_vocab)) {
    tokens.push_back("\xE2\x96\x81w" + std::to_string(tokens.size()));
    types.push_back(1);
  }
  w.SetString("tokenizer.ggml.model", "llama");
  w.SetStringArray("tokenizer.ggml.tokens", tokens);
  w.SetF32Array("tokenizer.ggml.scores", std::vector<float>(tokens.size(), 0.0f));
  w.SetI32Array("tokenizer.ggml.token_type", types);
  w.SetU32("tokenizer.ggml.bos_token_id", 1);
  w.SetU32("tokenizer.ggml.eos_token_id", 2);
}

// Model::Load(path) must throw Error whose message contains `needle`.
inline void ExpectLoadError(const std::string& path, const std::string& needle) {
  try {
    Model::Load(path);
    ADD_FAILURE() << "loading " << path << " succeeded; expected an error about " << needle;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos)
        << "message: " << e.what() << "\nexpected to mention: " << needle;
  }
}

}  // namespace kakeya
