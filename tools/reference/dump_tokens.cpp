// Writes the expected token ids of a tokenizer fixture (tests/fixtures/tokenizer/README.md, `X.gguf.out`)
// from the reference engine, llama.cpp: each text of `X.gguf.inp` tokenized the way its test-tokenizer-0
// does it, with add-special and parse-special off. Only the vocabulary is loaded, so any GGUF works,
// vocab-only files included. Built and run by scripts/dump-reference-tokens.sh.
//
//   dump_tokens -m VOCAB.gguf -i TEXTS.inp -o OUT.out [--parse-special] [--verbose]
//
// --parse-special turns llama.cpp's parse_special on (add-special stays off): text such as "<|im_start|>"
// becomes the control token, as in a chat prompt, instead of being tokenized as plain text.
//
// --verbose passes llama.cpp's log through: its loader lists the GGUF's keys, tokenizer.ggml.pre included
// (a name llama.cpp does not know fails the load instead).

#include "llama.h"

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

constexpr const char kProgramName[] = "dump_tokens";
#include "reference_util.h"

namespace {

struct Options {
    std::string model_path, inp_path, out_path;
    bool parse_special = false;
    bool verbose = false;
};

Options parse_options(int argc, char ** argv) {
    Options options;
    for (int i = 1; i < argc; ++i) {
        const std::string flag = argv[i];
        auto value = [&]() -> std::string {
            if (i + 1 >= argc) fail("missing value after " + flag);
            return argv[++i];
        };
        if (flag == "-m") options.model_path = value();
        else if (flag == "-i") options.inp_path = value();
        else if (flag == "-o") options.out_path = value();
        else if (flag == "--parse-special") options.parse_special = true;
        else if (flag == "--verbose") options.verbose = true;
        else fail("unknown argument '" + flag + "'");
    }
    if (options.model_path.empty()) fail("-m VOCAB.gguf is required");
    if (options.inp_path.empty()) fail("-i TEXTS.inp is required");
    if (options.out_path.empty()) fail("-o OUT.out is required");
    return options;
}

// README: every text is followed by the separator. A tail after the last one (gemma-4's .inp has no final
// separator) is a text too, as tests/tokenizer_test.cc reads it.
std::vector<std::string> split_texts(const std::string & all) {
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

std::vector<llama_token> tokenize(const llama_vocab * vocab, const std::string & text, bool parse_special) {
    const int needed =
        -llama_tokenize(vocab, text.data(), (int32_t) text.size(), nullptr, 0, false, parse_special);
    if (needed <= 0) return {};
    std::vector<llama_token> ids(needed);
    if (llama_tokenize(vocab, text.data(), (int32_t) text.size(), ids.data(), needed, false, parse_special) !=
        needed) {
        fail("llama_tokenize gave a different count the second time");
    }
    return ids;
}

}  // namespace

int main(int argc, char ** argv) {
    const Options options = parse_options(argc, argv);
    if (!options.verbose) llama_log_set(only_errors_log, nullptr);
    llama_backend_init();

    llama_model_params params = llama_model_default_params();
    params.vocab_only = true;
    llama_model * model = llama_model_load_from_file(options.model_path.c_str(), params);
    if (model == nullptr) fail("cannot load '" + options.model_path + "'");
    const llama_vocab * vocab = llama_model_get_vocab(model);

    std::string out;
    for (const std::string & text : split_texts(read_file(options.inp_path))) {
        for (const llama_token id : tokenize(vocab, text, options.parse_special)) out += " " + std::to_string(id);
        out += '\n';
    }

    std::ofstream file(options.out_path, std::ios::binary);
    if (!(file << out) || !file.flush()) fail("cannot write '" + options.out_path + "'");

    llama_model_free(model);
    llama_backend_free();
    return 0;
}
