// Tokenizer parity with llama.cpp (docs/formats/tokenizers.md).
//
// Reference data (tests/fixtures/tokenizer/README.md): the .inp/.out pairs of
// nine vocabularies (gemma-4 included) come unchanged from llama.cpp's models/
// directory, where the ids were produced by each original model's Hugging Face
// tokenizer. The tenth, ggml-vocab-llama-spm-8000 (the vocabulary of the test models), has no
// Hugging Face tokenizer: its .out was produced by llama.cpp itself
// (`llama-tokenize --no-bos --no-parse-special`, the path test-tokenizer-0
// uses), so it is independent reference data for our SPM byte fallback, not
// something derived from this code. So is the eleventh's, ggml-vocab-deepseek-v3
// (llama-bpe's vocabulary with the deepseek-v3 pre-tokenizer: the .inp and
// .out made by scripts/make-tokenizer-fixture.sh with the reference engine,
// the vocabulary written by the test), whose .inp adds 14 texts of its own.
// The twelfth, ggml-vocab-qwen35 (qwen2's vocabulary with the qwen35
// pre-tokenizer, written by the test as well), has llama.cpp's own .inp and
// ids made by the reference engine with the same script. So have the
// special-tokens texts, tokenized on qwen2 and qwen35 with parse_special off
// and on.
#include "tokenizer/tokenizer.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "base/error.h"
#include "gguf/gguf.h"
#include "gguf_copy.h"
#include "test_files.h"
#include "tokenizer/pre_tokenizer.h"

namespace kakeya {
namespace {

namespace fs = std::filesystem;

const fs::path kFixtures = KAKEYA_FIXTURES;

// README: split on "\n__ggml_vocab_test__\n" and drop the final empty piece.
// gemma-4's .inp lacks the final separator: what follows the last one is the
// last text.
std::vector<std::string> ReadTexts(const fs::path& path) {
  const std::string all = ReadFile(path);
  const std::string separator = "\n__ggml_vocab_test__\n";
  std::vector<std::string> texts;
  size_t start = 0;
  for (size_t pos; (pos = all.find(separator, start)) != std::string::npos;) {
    texts.push_back(all.substr(start, pos - start));
    start = pos + separator.size();
  }
  if (start < all.size()) texts.push_back(all.substr(start));
  return texts;
}

std::vector<std::vector<TokenId>> ReadIds(const fs::path& path) {
  std::istringstream in(ReadFile(path));
  std::vector<std::vector<TokenId>> lines;
  for (std::string line; std::getline(in, line);) {
    std::istringstream fields(line);
    std::vector<TokenId> ids;
    for (TokenId id; fields >> id;) ids.push_back(id);
    lines.push_back(std::move(ids));
  }
  return lines;
}

struct Loaded {
  std::unique_ptr<GgufFile> gguf;
  std::unique_ptr<Tokenizer> tokenizer;
};

// Loaded once per file: the big vocabularies take a moment to index.
const Tokenizer& TokenizerFor(const fs::path& path) {
  static std::map<std::string, Loaded> cache;
  Loaded& loaded = cache[path.string()];
  if (!loaded.tokenizer) {
    loaded.gguf = GgufFile::Open(path.string());
    loaded.tokenizer = Tokenizer::FromGguf(*loaded.gguf);
  }
  return *loaded.tokenizer;
}

// deepseek-v3's vocabulary is llama-bpe's and qwen35's is qwen2's, with
// tokenizer.ggml.pre changed (scripts/make-tokenizer-fixture.sh): written here
// rather than kept twice.
fs::path VocabularyWithPre(const std::string& from, const std::string& pre) {
  static TempDir dir("tokenizer_test");
  const std::string path = dir.File("ggml-vocab-" + pre + ".gguf");
  if (!fs::exists(path)) {
    WriteEditedCopy((kFixtures / "tokenizer" / ("ggml-vocab-" + from + ".gguf")).string(), path,
                    SetString("tokenizer.ggml.pre", pre), nullptr);
  }
  return path;
}

const Tokenizer& Vocab(const std::string& name) {
  if (name == "deepseek-v3") return TokenizerFor(VocabularyWithPre("llama-bpe", name));
  if (name == "qwen35") return TokenizerFor(VocabularyWithPre("qwen2", name));
  return TokenizerFor(kFixtures / "tokenizer" / ("ggml-vocab-" + name + ".gguf"));
}

std::string Hex(std::string_view bytes) {
  std::string out;
  for (char c : bytes) {
    char hex[3];
    std::snprintf(hex, sizeof(hex), "%02x", static_cast<uint8_t>(c));
    out += hex;
  }
  return out;
}

std::string Ids(const std::vector<TokenId>& ids) {
  std::string out;
  for (TokenId id : ids) {
    out += ' ';
    out += std::to_string(id);
  }
  return out;
}

const std::vector<std::string> kVocabs = {
    "llama-spm", "llama-spm-8000", "phi-3",     "llama-bpe", "qwen2",
    "gpt-2",     "deepseek-coder", "starcoder", "falcon",    "gemma-4",   "deepseek-v3",
    "qwen35",
};

// The 46 texts every .inp shares, and the extra ones of the fixtures made with
// scripts/make-tokenizer-fixture.sh.
size_t TextCount(const std::string& vocab) {
  if (vocab == "deepseek-v3") return 60;
  if (vocab == "qwen35") return 50;
  return 46;
}

class VocabTest : public ::testing::TestWithParam<std::string> {
 protected:
  fs::path Base() const { return kFixtures / "tokenizer" / ("ggml-vocab-" + GetParam() + ".gguf"); }
};

TEST_P(VocabTest, EncodeMatchesLlamaCpp) {
  const Tokenizer& tok = Vocab(GetParam());
  const auto texts = ReadTexts(Base().string() + ".inp");
  const auto expected = ReadIds(Base().string() + ".out");
  ASSERT_EQ(texts.size(), TextCount(GetParam()));
  ASSERT_EQ(expected.size(), texts.size());
  int passed = 0;
  for (size_t i = 0; i < texts.size(); ++i) {
    const std::vector<TokenId> ids =
        tok.Encode(texts[i], /*add_special=*/false, /*parse_special=*/false);
    EXPECT_EQ(Ids(ids), Ids(expected[i]))
        << GetParam() << " test " << i + 1 << " text hex " << Hex(texts[i]);
    passed += ids == expected[i];
  }
  std::printf("%s: %d/%zu texts tokenized exactly like llama.cpp\n", GetParam().c_str(), passed,
              texts.size());
}

// README: llama.cpp gives the text back exactly, except that the vocabularies
// that apply Hugging Face's clean-up rule drop the space before '?' in tests
// 33 and 46 ("😁 ?" -> "😁?"). gemma-4 is one of them: llama.cpp keeps the
// BPE default clean_spaces = true for it.
TEST_P(VocabTest, DecodeRoundTrips) {
  const Tokenizer& tok = Vocab(GetParam());
  const auto texts = ReadTexts(Base().string() + ".inp");
  const bool cleans_spaces = GetParam() == "llama-bpe" || GetParam() == "gpt-2" ||
                             GetParam() == "starcoder" || GetParam() == "falcon" ||
                             GetParam() == "gemma-4";
  for (size_t i = 0; i < texts.size(); ++i) {
    std::string want = texts[i];
    if (cleans_spaces && (i + 1 == 33 || i + 1 == 46)) {
      const size_t space = want.find(" ?");
      ASSERT_NE(space, std::string::npos);
      want.erase(space, 1);
    }
    const std::vector<TokenId> ids = tok.Encode(texts[i], false, false);
    EXPECT_EQ(Hex(tok.Decode(ids, /*render_special=*/false)), Hex(want))
        << GetParam() << " test " << i + 1;
  }
}

INSTANTIATE_TEST_SUITE_P(Fixtures, VocabTest, ::testing::ValuesIn(kVocabs), [](const auto& info) {
  std::string name = info.param;
  std::replace(name.begin(), name.end(), '-', '_');
  return name;
});

// special-tokens.inp on qwen2 and qwen35, with parse_special off and on: the
// ids of the reference engine (scripts/make-tokenizer-fixture.sh). The texts
// hold CONTROL and USER_DEFINED tokens' text and "</s>", a NORMAL token in
// these GGUFs that llama.cpp forces to CONTROL (tokenizer.cc,
// kEndOfGenerationTexts): one token with parse_special, plain text without.
class SpecialTokensTest : public ::testing::TestWithParam<std::tuple<std::string, bool>> {};

TEST_P(SpecialTokensTest, EncodeMatchesLlamaCpp) {
  const auto& [vocab, parse_special] = GetParam();
  const Tokenizer& tok = Vocab(vocab);
  const fs::path dir = kFixtures / "tokenizer";
  const auto texts = ReadTexts(dir / "special-tokens.inp");
  const std::string out = "ggml-vocab-" + vocab + ".gguf.special-tokens" +
                          (parse_special ? ".parse-special" : "") + ".out";
  const auto expected = ReadIds(dir / out);
  ASSERT_EQ(texts.size(), 24u);
  ASSERT_EQ(expected.size(), texts.size());
  int passed = 0;
  for (size_t i = 0; i < texts.size(); ++i) {
    const std::vector<TokenId> ids = tok.Encode(texts[i], /*add_special=*/false, parse_special);
    EXPECT_EQ(Ids(ids), Ids(expected[i])) << out << " test " << i + 1 << " text " << texts[i];
    passed += ids == expected[i];
    // Specials rendered, the text comes back whole (no clean-up for these
    // pre-tokenizers).
    EXPECT_EQ(Hex(tok.Decode(ids, /*render_special=*/true)), Hex(texts[i]))
        << out << " test " << i + 1;
  }
  std::printf("%s: %d/%zu texts tokenized exactly like llama.cpp\n", out.c_str(), passed,
              texts.size());
}

INSTANTIATE_TEST_SUITE_P(
    Fixtures, SpecialTokensTest,
    ::testing::Combine(::testing::Values("qwen2", "qwen35"), ::testing::Bool()),
    [](const auto& info) {
      return std::get<0>(info.param) + (std::get<1>(info.param) ? "_parse_special" : "_plain");
    });

// Every model fixture: llama.cpp's prompt ids (BOS added, special text
// parsed) and the bytes of each generated token rendered with specials.
TEST(ModelFixtures, PromptIdsAndPiecesMatchLlamaCpp) {
  int files = 0;
  for (const auto& dir : fs::directory_iterator(kFixtures / "models")) {
    if (!dir.is_directory() || !fs::exists(dir.path().string() + ".gguf")) continue;
    const Tokenizer& tok = TokenizerFor(dir.path().string() + ".gguf");
    for (const auto& file : fs::directory_iterator(dir.path())) {
      const std::string name = file.path().filename().string();
      if (!name.ends_with(".logits.json")) continue;
      ++files;
      const auto json = nlohmann::json::parse(ReadFile(file.path()));
      const std::string prompt = json.at("prompt");
      const auto prompt_ids = json.at("prompt_ids").get<std::vector<TokenId>>();
      EXPECT_EQ(Ids(tok.Encode(prompt, /*add_special=*/true, /*parse_special=*/true)),
                Ids(prompt_ids))
          << file.path();
      const auto generated = json.at("generated_ids").get<std::vector<TokenId>>();
      const auto pieces = json.at("generated_pieces_hex").get<std::vector<std::string>>();
      ASSERT_EQ(generated.size(), pieces.size()) << file.path();
      for (size_t i = 0; i < generated.size(); ++i) {
        EXPECT_EQ(Hex(tok.TokenToPiece(generated[i], /*render_special=*/true)), pieces[i])
            << file.path() << " generated token " << i << " id " << generated[i];
      }
    }
  }
  EXPECT_GE(files, 30);
}

TEST(Tokenizer, SpecialTokensAndDefaults) {
  const Tokenizer& spm = Vocab("llama-spm");
  EXPECT_EQ(spm.bos(), 1);
  EXPECT_EQ(spm.eos(), 2);
  EXPECT_TRUE(spm.add_bos());
  EXPECT_EQ(spm.Encode("Hello world", true, false), (std::vector<TokenId>{1, 15043, 3186}));
  // The space prefix also follows a parsed special token.
  const std::vector<TokenId> parsed = spm.Encode("Hello</s>world", false, true);
  EXPECT_EQ(Ids(parsed), Ids({15043, 2, 3186}));
  EXPECT_NE(spm.Encode("Hello</s>world", false, false), parsed);
  EXPECT_TRUE(spm.IsEndOfGeneration(2));
  EXPECT_FALSE(spm.IsEndOfGeneration(1));
  // Control tokens render only on request.
  EXPECT_EQ(spm.TokenToPiece(1, false), "");
  EXPECT_EQ(spm.TokenToPiece(1, true), "<s>");
  EXPECT_EQ(spm.Decode(parsed, true), "Hello</s> world");

  const Tokenizer& llama3 = Vocab("llama-bpe");
  EXPECT_TRUE(llama3.add_bos());  // llama3 pre-tokenizer default
  EXPECT_EQ(llama3.Encode("Hi", true, false).front(), 128000);
  const TokenId eot = 128009;
  ASSERT_EQ(llama3.TokenText(eot), "<|eot_id|>");
  EXPECT_TRUE(llama3.IsEndOfGeneration(eot));
  EXPECT_TRUE(llama3.IsEndOfGeneration(llama3.eos()));

  const Tokenizer& qwen = Vocab("qwen2");
  EXPECT_FALSE(qwen.add_bos());
  const std::vector<TokenId> chat = qwen.Encode("<|im_start|>user\nhi<|im_end|>", true, true);
  ASSERT_EQ(chat.size(), 5u);
  EXPECT_EQ(qwen.TokenText(chat.front()), "<|im_start|>");
  EXPECT_EQ(qwen.TokenText(chat.back()), "<|im_end|>");
  EXPECT_TRUE(qwen.IsEndOfGeneration(chat.back()));
  EXPECT_FALSE(qwen.IsEndOfGeneration(chat.front()));
  EXPECT_GT(qwen.Encode("<|im_start|>user\nhi<|im_end|>", true, false).size(), 5u);
  EXPECT_EQ(qwen.Decode(chat, true), "<|im_start|>user\nhi<|im_end|>");
  EXPECT_EQ(qwen.Decode(chat, false), "user\nhi");
}

TEST(Tokenizer, Phi3SpecialTokensRstrip) {
  // llama.cpp marks Phi-3's special tokens RSTRIP (by general.name), "</s>"
  // included: the spaces after it are dropped, then the space prefix that
  // follows any special token is added. "</s>" is USER_DEFINED in this GGUF,
  // but llama.cpp forces it to CONTROL (kEndOfGenerationTexts), so only
  // parse_special cuts it out. Ids from the reference engine
  // (scripts/dump-reference-tokens.sh, with and without --parse-special).
  const Tokenizer& phi3 = Vocab("phi-3");
  EXPECT_EQ(Ids(phi3.Encode("Hello</s>   world", false, true)), Ids({15043, 2, 3186}));
  EXPECT_EQ(Ids(phi3.Encode("Hello</s>world", false, true)), Ids({15043, 2, 3186}));
  EXPECT_EQ(Ids(phi3.Encode("Hello</s>   world", false, false)),
            Ids({15043, 829, 29879, 29958, 259, 3186}));
  EXPECT_TRUE(phi3.IsEndOfGeneration(32000));  // <|endoftext|>, the EOS
  ASSERT_EQ(phi3.TokenText(32007), "<|end|>");
  EXPECT_TRUE(phi3.IsEndOfGeneration(32007));
}

TEST(Tokenizer, DecodeFollowsLlamaCppSpaceRules) {
  // SPM: the prefix space of the first token is dropped, but an unrendered
  // BOS counts as that first token (llama.cpp's detokenize).
  const Tokenizer& spm = Vocab("llama-spm");
  EXPECT_EQ(spm.Decode(std::vector<TokenId>{15043, 3186}, false), "Hello world");
  EXPECT_EQ(spm.Decode(std::vector<TokenId>{1, 15043, 3186}, false), " Hello world");
  // gpt2-type vocabularies apply the clean-up rule; qwen2 does not.
  const std::string text = "a ' b it 's ok . I 'd";
  const Tokenizer& gpt2 = Vocab("gpt-2");
  EXPECT_EQ(gpt2.Decode(gpt2.Encode(text, false, false), false), "a'b it's ok. I 'd");
  const Tokenizer& qwen = Vocab("qwen2");
  EXPECT_EQ(qwen.Decode(qwen.Encode(text, false, false), false), text);
}

TEST(Tokenizer, Gemma4DefaultsAndText) {
  const Tokenizer& gemma = Vocab("gemma-4");
  EXPECT_EQ(gemma.bos(), 2);
  EXPECT_EQ(gemma.eos(), 1);
  EXPECT_TRUE(gemma.add_bos());
  // Spaces are escaped to "▁" before merging and unescaped by the decoder; no
  // space prefix is added.
  const std::vector<TokenId> hello = gemma.Encode("Hello world", true, false);
  EXPECT_EQ(Ids(hello), Ids({2, 9259, 1902}));
  ASSERT_EQ(gemma.TokenText(1902), "\u2581world");
  EXPECT_EQ(gemma.TokenToPiece(1902, false), " world");
  EXPECT_EQ(gemma.Decode(hello, false), "Hello world");
  // A character without a token falls back to its bytes as <0xXX> tokens,
  // which decode to the raw bytes.
  const std::string llama = "\U0001F999";
  const std::vector<TokenId> bytes = gemma.Encode(llama, false, false);
  ASSERT_EQ(bytes.size(), 4u);
  EXPECT_EQ(gemma.TokenText(bytes[0]), "<0xF0>");
  EXPECT_EQ(gemma.Decode(bytes, false), llama);
  // An input "▁" cannot be told from an escaped space, so it decodes to " "
  // (llama.cpp does the same).
  EXPECT_EQ(gemma.Decode(gemma.Encode("\u2581", false, false), false), " ");
  // Gemma 4's end of turn and tool-call stop are end of generation (llama.cpp's list).
  const TokenId end_of_turn = 106;
  ASSERT_EQ(gemma.TokenText(end_of_turn), "<turn|>");
  EXPECT_TRUE(gemma.IsEndOfGeneration(end_of_turn));
  EXPECT_TRUE(gemma.IsEndOfGeneration(50));  // <|tool_response>
}

// docs/formats/tokenizers.md 4.2 step 3: without parse_special, USER_DEFINED tokens are still
// cut out whole (CONTROL and UNKNOWN ones are not), and render as their text.
TEST(Tokenizer, UserDefinedTokensMatchWithoutParseSpecial) {
  const Tokenizer& gemma = Vocab("gemma-4");
  ASSERT_EQ(gemma.TokenText(100), "<|channel>");  // USER_DEFINED in the GGUF
  ASSERT_EQ(gemma.TokenText(101), "<channel|>");
  ASSERT_EQ(gemma.TokenText(2202), "hi");
  const std::vector<TokenId> channel = gemma.Encode("<|channel>hi<channel|>", false, false);
  EXPECT_EQ(Ids(channel), Ids({100, 2202, 101}));
  EXPECT_EQ(gemma.Decode(channel, false), "<|channel>hi<channel|>");
  // <|tool_response> is USER_DEFINED in the GGUF too, but llama.cpp forces its
  // end-of-generation texts to CONTROL: only parse_special cuts it out.
  EXPECT_EQ(Ids(gemma.Encode("<|tool_response>", false, true)), Ids({50}));
  EXPECT_GT(gemma.Encode("<|tool_response>", false, false).size(), 1u);
  // A CONTROL token's text stays plain text.
  EXPECT_EQ(Ids(gemma.Encode("<turn|>", false, true)), Ids({106}));
  EXPECT_GT(gemma.Encode("<turn|>", false, false).size(), 1u);

  // deepseek-coder's added tokens for the bytes that never occur in UTF-8
  // ("ö" is 32011) are USER_DEFINED: the character is taken whole, not as its
  // two byte-level symbols.
  const Tokenizer& deepseek = Vocab("deepseek-coder");
  ASSERT_EQ(deepseek.TokenText(32011), "\u00f6");
  const std::vector<TokenId> word = deepseek.Encode("sch\u00f6n", false, false);
  EXPECT_NE(std::find(word.begin(), word.end(), 32011), word.end()) << Ids(word);
  EXPECT_EQ(deepseek.Decode(word, false), "sch\u00f6n");
}

// \s is Unicode White_Space as in llama.cpp's splitters: U+180E is not
// whitespace there (PCRE2's own \s says it is), U+0085 is.
TEST(PreTokenizer, WhitespaceIsLlamaCppsSet) {
  const PreTokenizer gpt2(
      {"'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)"}, "test");
  EXPECT_EQ(gpt2.Split("a\u180E  b"), (std::vector<std::string_view>{"a", "\u180E", " ", " b"}));
  EXPECT_EQ(gpt2.Split("a\u0085\u0085b"),
            (std::vector<std::string_view>{"a", "\u0085", "\u0085", "b"}));
}

TEST(Tokenizer, InvalidUtf8IsTokenizedLikeLlamaCpp) {
  // llama.cpp turns each invalid byte into U+FFFD before BPE pre-tokenization;
  // SPM byte-falls-back on it. Neither may crash, and the BPE result is the
  // same as for the replacement character itself.
  const Tokenizer& qwen = Vocab("qwen2");
  EXPECT_EQ(qwen.Encode("a\xff"
                        "b",
                        false, false),
            qwen.Encode("a\xEF\xBF\xBD"
                        "b",
                        false, false));
  const Tokenizer& spm = Vocab("llama-spm");
  const std::vector<TokenId> ids = spm.Encode("a\xff", false, false);
  EXPECT_EQ(spm.Decode(ids, false), "a\xff");
}

// A 100 KB prompt encodes and decodes back (its speed is measured by benchmarks, not here).
TEST(Tokenizer, LongPromptRoundTrips) {
  std::string text;
  for (const std::string& t :
       ReadTexts(kFixtures / "tokenizer" / "ggml-vocab-llama-spm.gguf.inp")) {
    text += t + " ";
  }
  while (text.size() < 100 * 1024) text += text;
  for (const std::string name : {"llama-spm", "llama-bpe", "qwen2", "deepseek-coder", "falcon"}) {
    const Tokenizer& tok = Vocab(name);
    const std::vector<TokenId> ids = tok.Encode(text, false, true);
    EXPECT_GT(tok.Decode(ids, false).size(), text.size() / 2) << name;
  }
}

// Long runs of one character class are where regex backtracking or merge
// queues could turn quadratic (or overflow a recursion): they must tokenize.
TEST(Tokenizer, PathologicalInputsTokenize) {
  const size_t n = 100 * 1024;
  std::vector<std::string> inputs = {std::string(n, ' '), std::string(n, '\n'), std::string(n, 'a'),
                                     std::string(n, '7'), std::string(n, '!')};
  std::string mixed;
  while (mixed.size() < n) mixed += " \n\t \xF0\x9F\xA6\x99x1 ";
  inputs.push_back(mixed + "z");
  for (const std::string& name : kVocabs) {
    const Tokenizer& tok = Vocab(name);
    for (const std::string& input : inputs) {
      const std::vector<TokenId> ids = tok.Encode(input, false, false);
      EXPECT_FALSE(ids.empty()) << name << " input starting with " << Hex(input.substr(0, 8));
    }
  }
}

// Minimal GGUFs for the error paths.
std::unique_ptr<Tokenizer> FromWriter(const GgufWriter& writer, std::vector<uint8_t>& bytes) {
  bytes = writer.Serialize();
  const auto gguf = GgufFile::FromMemory(bytes.data(), bytes.size(), "test.gguf");
  return Tokenizer::FromGguf(*gguf);
}

std::string ErrorOf(const GgufWriter& writer) {
  std::vector<uint8_t> bytes;
  try {
    FromWriter(writer, bytes);
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

GgufWriter BpeWriter() {
  GgufWriter w;
  w.SetString("tokenizer.ggml.model", "gpt2");
  w.SetString("tokenizer.ggml.pre", "gpt-2");
  w.SetStringArray("tokenizer.ggml.tokens", {"a", "b", "ab"});
  w.SetStringArray("tokenizer.ggml.merges", {"a b"});
  return w;
}

TEST(Tokenizer, TinyBpeWorks) {
  std::vector<uint8_t> bytes;
  const auto tok = FromWriter(BpeWriter(), bytes);
  EXPECT_EQ(tok->Encode("abba", false, false), (std::vector<TokenId>{2, 1, 0}));
  EXPECT_FALSE(tok->add_bos());
}

// Gemma 4's rules on a vocabulary small enough to reason about by hand.
GgufWriter Gemma4Writer(bool with_bos) {
  GgufWriter w;
  w.SetString("tokenizer.ggml.model", "gemma4");
  w.SetStringArray("tokenizer.ggml.tokens",
                   {"<pad>", "<eos>", "<bos>", "\n", "\n\n", "\u2581", "a", "\u2581a", "<0x62>"});
  w.SetI32Array("tokenizer.ggml.token_type", {3, 3, 3, 1, 1, 1, 1, 1, 6});
  w.SetStringArray("tokenizer.ggml.merges", {"\u2581 a"});
  if (with_bos) w.SetU32("tokenizer.ggml.bos_token_id", 2);
  w.SetU32("tokenizer.ggml.eos_token_id", 1);
  w.SetBool("tokenizer.ggml.add_bos_token", false);
  return w;
}

TEST(Tokenizer, TinyGemma4Works) {
  std::vector<uint8_t> bytes;
  const auto tok = FromWriter(Gemma4Writer(/*with_bos=*/true), bytes);
  EXPECT_TRUE(tok->add_bos()) << "forced on whatever add_bos_token says";
  // "▁a" by the merge, "▁" alone, and "b" (no token) by byte fallback.
  const std::vector<TokenId> ids = tok->Encode(" a b", true, false);
  EXPECT_EQ(Ids(ids), Ids({2, 7, 5, 8}));
  EXPECT_EQ(tok->Decode(ids, false), " a b");
  // No merge builds "\n\n", but a newline run that is a token is taken whole.
  EXPECT_EQ(Ids(tok->Encode("a\n\n", false, false)), Ids({6, 4}));

  // gemma4 has no default BOS, and BOS is always added.
  const GgufWriter no_bos = Gemma4Writer(/*with_bos=*/false);
  EXPECT_NE(ErrorOf(no_bos).find("tokenizer.ggml.bos_token_id"), std::string::npos)
      << ErrorOf(no_bos);
}

// The texts llama.cpp forces to CONTROL, and the ones it takes back: with
// "<|return|>" and "<|call|>" present, "<|end|>" (here CONTROL and the EOS)
// becomes USER_DEFINED and no end of generation, and so does gpt-oss's
// "<|channel|>"; with "<|tool_response>" present, "</s>" stays NORMAL. The ids
// are the reference engine's for this vocabulary written to a file
// (scripts/dump-reference-tokens.sh, with and without --parse-special), the
// end-of-generation set its llama_vocab_is_eog.
TEST(Tokenizer, ForcedTokenTypesLikeLlamaCpp) {
  GgufWriter w;
  w.SetString("tokenizer.ggml.model", "gpt2");
  w.SetString("tokenizer.ggml.pre", "gpt-2");
  std::vector<std::string> tokens = {"<|end|>",     "<|return|>", "<|call|>",
                                     "<|channel|>", "</s>",       "<|tool_response>", "\u010a"};
  for (char c : std::string_view("<|endrtucalh/so_p>x")) tokens.emplace_back(1, c);
  std::vector<int32_t> types(tokens.size(), kTokenNormal);
  for (size_t i = 0; i < 4; ++i) types[i] = kTokenControl;
  w.SetStringArray("tokenizer.ggml.tokens", tokens);
  w.SetI32Array("tokenizer.ggml.token_type", types);
  w.SetStringArray("tokenizer.ggml.merges", {});
  w.SetU32("tokenizer.ggml.eos_token_id", 0);
  std::vector<uint8_t> bytes;
  const auto tok = FromWriter(w, bytes);

  const std::string text = "<|end|>x<|channel|>x</s>x<|tool_response>x<|return|>x<|call|>";
  EXPECT_EQ(Ids(tok->Encode(text, false, false)),
            Ids({0,  25, 3,  25, 7,  19, 20, 24, 25, 7,  8,  13, 21, 21, 17,
                 22, 12, 9,  20, 23, 21, 10, 20, 9,  24, 25, 7,  8,  12, 9,
                 13, 14, 12, 10, 8,  24, 25, 7,  8,  15, 16, 17, 17, 8,  24}));
  EXPECT_EQ(Ids(tok->Encode(text, false, true)),
            Ids({0, 25, 3, 25, 7, 19, 20, 24, 25, 5, 25, 1, 25, 2}));
  for (TokenId id = 0; id < 7; ++id) {
    EXPECT_EQ(tok->IsEndOfGeneration(id), id == 1 || id == 2 || id == 5) << tokens[id];
  }
}

TEST(Tokenizer, ErrorsNameTheKey) {
  GgufWriter no_tokens;
  no_tokens.SetString("tokenizer.ggml.model", "llama");
  EXPECT_NE(ErrorOf(no_tokens).find("tokenizer.ggml.tokens"), std::string::npos)
      << ErrorOf(no_tokens);

  GgufWriter no_model;
  EXPECT_NE(ErrorOf(no_model).find("tokenizer.ggml.model"), std::string::npos) << ErrorOf(no_model);

  GgufWriter unknown_model = BpeWriter();
  unknown_model.SetString("tokenizer.ggml.model", "t5");
  EXPECT_NE(ErrorOf(unknown_model).find("tokenizer.ggml.model"), std::string::npos);

  GgufWriter unknown_pre = BpeWriter();
  unknown_pre.SetString("tokenizer.ggml.pre", "no-such-pre");
  const std::string pre_error = ErrorOf(unknown_pre);
  EXPECT_NE(pre_error.find("tokenizer.ggml.pre"), std::string::npos) << pre_error;
  EXPECT_NE(pre_error.find("qwen2"), std::string::npos)
      << "lists the supported ones: " << pre_error;

  GgufWriter bad_merge = BpeWriter();
  bad_merge.SetStringArray("tokenizer.ggml.merges", {"a b", "abc"});
  EXPECT_NE(ErrorOf(bad_merge).find("tokenizer.ggml.merges: entry 1 'abc' has no space"),
            std::string::npos)
      << ErrorOf(bad_merge);

  GgufWriter no_merges = BpeWriter();
  no_merges.SetStringArray("tokenizer.ggml.merges", {});
  EXPECT_EQ(ErrorOf(no_merges), "(no error)");

  GgufWriter short_types = BpeWriter();
  short_types.SetI32Array("tokenizer.ggml.token_type", {1, 1});
  EXPECT_NE(ErrorOf(short_types).find("tokenizer.ggml.token_type"), std::string::npos);

  GgufWriter short_scores;
  short_scores.SetString("tokenizer.ggml.model", "llama");
  short_scores.SetStringArray("tokenizer.ggml.tokens", {"<unk>", "<s>", "</s>"});
  short_scores.SetF32Array("tokenizer.ggml.scores", {0.0f});
  EXPECT_NE(ErrorOf(short_scores).find("tokenizer.ggml.scores"), std::string::npos);

  GgufWriter bad_eos = BpeWriter();
  bad_eos.SetU32("tokenizer.ggml.eos_token_id", 7);
  EXPECT_NE(ErrorOf(bad_eos).find("tokenizer.ggml.eos_token_id"), std::string::npos);
}

}  // namespace
}  // namespace kakeya
