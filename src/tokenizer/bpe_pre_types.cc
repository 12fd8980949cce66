#include "tokenizer/bpe_pre_types.h"

#include <vector>

#include "base/error.h"

namespace kakeya {
namespace {

// The regexes exactly as llama.cpp's llm_tokenizer_bpe constructor lists them.
constexpr const char* kGpt2 =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)";
constexpr const char* kLlama3 =
    "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|"
    "\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
constexpr const char* kQwen2 =
    "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|"
    "\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
// Qwen3.5's: QWEN2 with combining marks (\p{M}) kept with the letters before
// them and never taken into a punctuation run.
constexpr const char* kQwen35 =
    "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|"
    "[^\\r\\n\\p{L}\\p{N}]?[\\p{L}\\p{M}]+|\\p{N}| ?[^\\s\\p{L}\\p{M}\\p{N}]+[\\r\\n]*|"
    "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
constexpr const char* kThreeDigits = "[0-9][0-9][0-9]";

struct Entry {
  std::vector<std::string_view> names;
  std::vector<const char*> regexes;
  bool ignore_merges = false;
  bool add_bos = false;
  bool clean_spaces = true;
  bool sentencepiece_text = false;
  bool force_add_bos = false;
};

// Names and flags as in llama_vocab::impl::load, regexes as in the
// llm_tokenizer_bpe constructor. Only types whose regexes we reproduce are
// listed; the others (deepseek-llm, bloom, chatglm, tekken, gpt-4o, ...) are
// rejected rather than tokenized subtly wrong.
const Entry kEntries[] = {
    {.names = {"default"},
     .regexes = {"[\\p{P}\\$\\+<=>\\^~\\|]+", kGpt2, "\\p{N}+", kThreeDigits}},
    {.names = {"gpt-2", "phi-2", "jina-es", "jina-de", "gigachat", "jina-v2-es", "jina-v2-de",
               "a.x-4.0", "mellum", "exaone4", "mpt", "olmo", "jais"},
     .regexes = {kGpt2}},
    {.names = {"trillion", "granite-docling"}, .regexes = {kGpt2}, .clean_spaces = false},
    // llama.cpp's LLAMA3 type also turns on ignore_merges and add_bos.
    {.names = {"llama3", "llama-v3", "llama-bpe", "falcon3", "falcon-h1", "pixtral", "midm-2.0",
               "lfm2"},
     .regexes = {kLlama3},
     .ignore_merges = true,
     .add_bos = true},
    {.names = {"dbrx", "smaug-bpe"}, .regexes = {kLlama3}},
    {.names = {"qwen2", "deepseek-r1-qwen", "kormo", "hunyuan"},
     .regexes = {kQwen2},
     .clean_spaces = false},
    {.names = {"stablelm2", "megrez"}, .regexes = {kQwen2}},
    {.names = {"qwen35"}, .regexes = {kQwen35}, .clean_spaces = false},
    {.names = {"deepseek-coder"},
     .regexes = {"[\\r\\n]", "\\s?\\p{L}+", "\\s?\\p{P}+", "[一-龥ࠀ-一가-퟿]+", "\\p{N}"},
     .clean_spaces = false},
    // llama.cpp's DEEPSEEK3_LLM (DeepSeek-V3 and V4); its HUNYUAN_DENSE, JOYAI_LLM and
    // HY_V4 share the regexes and the flag.
    {.names = {"deepseek-v3", "hunyuan-dense", "hy_v4", "joyai-llm"},
     .regexes = {"\\p{N}{1,3}", "[一-龥぀-ゟ゠-ヿ]+",
                 "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|"
                 "[^\\r\\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+| ?[\\p{P}\\p{S}]+[\\r\\n]*|"
                 "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"},
     .clean_spaces = false},
    {.names = {"starcoder", "refact", "codeshell", "exaone", "minerva-7b"},
     .regexes = {"\\p{N}", kGpt2}},
    {.names = {"command-r", "smollm"}, .regexes = {"\\p{N}", kGpt2}, .clean_spaces = false},
    {.names = {"falcon"}, .regexes = {"[\\p{P}\\$\\+<=>\\^~\\|`]+", kGpt2, kThreeDigits}},
    // Merges see whole lines; newline runs are split off only because no merge
    // spans a newline. llama.cpp forces add_bos (some Gemma 4 GGUFs say false).
    {.names = {"gemma4"},
     .regexes = {"[^\\n]+|[\\n]+"},
     .sentencepiece_text = true,
     .force_add_bos = true},
};

}  // namespace

BpePreType FindBpePreType(std::string_view name) {
  std::string supported;
  for (const Entry& entry : kEntries) {
    for (std::string_view candidate : entry.names) {
      if (candidate == name) {
        return BpePreType{std::vector<std::string>(entry.regexes.begin(), entry.regexes.end()),
                          entry.ignore_merges,
                          entry.add_bos,
                          entry.clean_spaces,
                          entry.sentencepiece_text,
                          entry.force_add_bos};
      }
      supported += supported.empty() ? "" : ", ";
      supported += candidate;
    }
  }
  Fail("tokenizer.ggml.pre: unknown pre-tokenizer '", name, "'; supported: ", supported);
}

}  // namespace kakeya
