// Writes a "logits fixture" (tests/fixtures/models/README.md, `<prompt>.logits.json`) from the
// reference engine, llama.cpp, in its "exact" configuration: CPU, flash attention off, F32 KV cache,
// full-size SWA cache. Built and run by scripts/dump-reference-logits.sh against the llama.cpp
// that scripts/compare-reference.sh builds; it links libllama only, so it stays a plain g++ build.
//
//   dump_logits -m MODEL.gguf (-f PROMPT.txt | --prompt-ids "1,2,3") -n N_PREDICT -o OUT.json
//               [-t THREADS] [--load-mtp]

#include "llama.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

constexpr const char kProgramName[] = "dump_logits";
#include "reference_util.h"

namespace {

// Fixed by the fixture format: tests read these values back from the file and rely on them.
constexpr int kContextSize = 2048;
constexpr int kPhysicalBatch = 512;
constexpr int kGeneratedTopK = 20;
constexpr int kPromptTopK = 5;

struct Options {
    std::string model_path, prompt_path, out_path, prompt_ids_csv;
    int n_predict = -1;
    int n_threads = 2;
    bool load_mtp = false;
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
        else if (flag == "-f") options.prompt_path = value();
        else if (flag == "-o") options.out_path = value();
        else if (flag == "-n") options.n_predict = parse_int(value(), "-n");
        else if (flag == "-t") options.n_threads = parse_int(value(), "-t");
        else if (flag == "--prompt-ids") options.prompt_ids_csv = value();
        else if (flag == "--load-mtp") options.load_mtp = true;
        else fail("unknown argument '" + flag + "'");
    }
    if (options.model_path.empty()) fail("-m MODEL.gguf is required");
    if (options.prompt_path.empty() && options.prompt_ids_csv.empty()) fail("-f PROMPT.txt or --prompt-ids is required");
    if (options.out_path.empty()) fail("-o OUT.json is required");
    if (options.n_predict < 0) fail("-n N_PREDICT (>= 0) is required");
    if (options.n_threads < 1) fail("-t must be at least 1");
    return options;
}

std::vector<llama_token> parse_token_ids(const std::string & csv, int n_vocab) {
    std::vector<llama_token> ids;
    std::stringstream stream(csv);
    for (std::string item; std::getline(stream, item, ',');) {
        const int id = parse_int(item, "token id in --prompt-ids");
        if (id < 0 || id >= n_vocab) fail("token id " + item + " is outside the vocabulary");
        ids.push_back(id);
    }
    return ids;
}

std::vector<llama_token> tokenize(const llama_vocab * vocab, const std::string & text) {
    const bool add_bos = llama_vocab_get_add_bos(vocab);
    // A first call with no room reports the count as a negative number.
    const int needed = -llama_tokenize(vocab, text.data(), (int32_t) text.size(), nullptr, 0, add_bos, true);
    std::vector<llama_token> ids(std::max(needed, 0));
    if (llama_tokenize(vocab, text.data(), (int32_t) text.size(), ids.data(), (int32_t) ids.size(), add_bos, true) != needed) {
        fail("tokenization failed");
    }
    return ids;
}

std::string piece_hex(const llama_vocab * vocab, llama_token token) {
    std::vector<char> piece(64);
    int length = llama_token_to_piece(vocab, token, piece.data(), (int32_t) piece.size(), 0, true);
    if (length < 0) {
        piece.resize(-length);
        length = llama_token_to_piece(vocab, token, piece.data(), (int32_t) piece.size(), 0, true);
    }
    std::string hex;
    char byte_hex[3];
    for (int i = 0; i < length; ++i) {
        std::snprintf(byte_hex, sizeof byte_hex, "%02x", (unsigned char) piece[i]);
        hex += byte_hex;
    }
    return hex;
}

std::string number(double value) {
    char text[32];
    std::snprintf(text, sizeof text, "%.9g", value);
    return text;
}

std::string json_string(const std::string & text) {
    std::string out = "\"";
    for (const unsigned char c : text) {
        if (c == '"' || c == '\\') { out += '\\'; out += (char) c; }
        else if (c == '\n') out += "\\n";
        else if (c == '\r') out += "\\r";
        else if (c == '\t') out += "\\t";
        else if (c < 0x20) { char esc[8]; std::snprintf(esc, sizeof esc, "\\u%04x", c); out += esc; }
        else out += (char) c;  // UTF-8 passes through unchanged
    }
    return out + "\"";
}

template <typename T, typename Format>
std::string json_array(const std::vector<T> & items, Format format) {
    std::string out = "[";
    for (size_t i = 0; i < items.size(); ++i) out += (i ? "," : "") + format(items[i]);
    return out + "]";
}

// One prediction, serialized; also returns the greedy token so generation can continue from it.
std::string step_json(const float * logits, int n_vocab, int top_k, llama_token * greedy) {
    std::vector<int> order(n_vocab);
    for (int i = 0; i < n_vocab; ++i) order[i] = i;
    top_k = std::min(top_k, n_vocab);
    // Ties by increasing id keep the choice identical to "first index of the maximum".
    std::partial_sort(order.begin(), order.begin() + top_k, order.end(),
                      [&](int a, int b) { return logits[a] != logits[b] ? logits[a] > logits[b] : a < b; });
    const double max_logit = logits[order[0]];
    double sum = 0.0;
    for (int i = 0; i < n_vocab; ++i) sum += std::exp((double) logits[i] - max_logit);
    *greedy = order[0];
    std::string top;
    for (int rank = 0; rank < top_k; ++rank) {
        top += std::string(rank ? "," : "") + "[" + std::to_string(order[rank]) + "," + number(logits[order[rank]]) + "]";
    }
    return "{\"argmax\":" + std::to_string(order[0]) + ",\"logsumexp\":" + number(max_logit + std::log(sum)) +
           ",\"top\":[" + top + "]}";
}

llama_context * fresh_context(llama_model * model, int n_threads) {
    llama_context_params params = llama_context_default_params();
    params.n_ctx = kContextSize;
    params.n_batch = kContextSize;
    params.n_ubatch = kPhysicalBatch;
    params.n_threads = n_threads;
    params.n_threads_batch = n_threads;
    params.flash_attn_type = LLAMA_FLASH_ATTN_TYPE_DISABLED;
    params.type_k = GGML_TYPE_F32;
    params.type_v = GGML_TYPE_F32;
    params.swa_full = true;
    llama_context * ctx = llama_init_from_model(model, params);
    if (!ctx) fail("cannot create a llama context");
    return ctx;
}

// Without all_logits only the last row is output: a prefill that computes no other rows is what a
// decoder does, and the fixture's steps must come from that path.
void decode(llama_context * ctx, const std::vector<llama_token> & tokens, int first_pos, bool all_logits) {
    llama_batch batch = llama_batch_init((int32_t) tokens.size(), 0, 1);
    for (size_t i = 0; i < tokens.size(); ++i) {
        batch.token[i] = tokens[i];
        batch.pos[i] = first_pos + (llama_pos) i;
        batch.n_seq_id[i] = 1;
        batch.seq_id[i][0] = 0;
        batch.logits[i] = all_logits || i + 1 == tokens.size();
    }
    batch.n_tokens = (int32_t) tokens.size();
    const int32_t status = llama_decode(ctx, batch);
    llama_batch_free(batch);
    if (status != 0) fail("llama_decode failed with status " + std::to_string(status));
}

}  // namespace

int main(int argc, char ** argv) {
    const Options options = parse_options(argc, argv);
    llama_log_set(only_errors_log, nullptr);
    llama_backend_init();

    llama_model_params model_params = llama_model_default_params();
    model_params.n_gpu_layers = 0;
    model_params.load_mtp = options.load_mtp;
    llama_model * model = llama_model_load_from_file(options.model_path.c_str(), model_params);
    if (!model) fail("cannot load model '" + options.model_path + "'");
    const llama_vocab * vocab = llama_model_get_vocab(model);
    const int n_vocab = llama_vocab_n_tokens(vocab);

    const std::string prompt = options.prompt_path.empty() ? "" : read_file(options.prompt_path);
    const std::vector<llama_token> prompt_ids = options.prompt_ids_csv.empty()
        ? tokenize(vocab, prompt) : parse_token_ids(options.prompt_ids_csv, n_vocab);
    const int n_prompt = (int) prompt_ids.size();
    if (n_prompt == 0) fail("the prompt has no tokens");
    if (n_prompt + options.n_predict > kContextSize) {
        fail("prompt (" + std::to_string(n_prompt) + ") + n_predict exceeds the context of " + std::to_string(kContextSize));
    }

    // Pass 1: the prompt in one call, then one token per call, exactly as a greedy decoder would.
    std::vector<llama_token> generated_ids;
    std::vector<std::string> steps;
    llama_context * ctx = fresh_context(model, options.n_threads);
    decode(ctx, prompt_ids, 0, false);
    for (int step = 0; step < options.n_predict; ++step) {
        llama_token greedy;
        steps.push_back(step_json(llama_get_logits_ith(ctx, -1), n_vocab, kGeneratedTopK, &greedy));
        generated_ids.push_back(greedy);
        if (step + 1 < options.n_predict) decode(ctx, {greedy}, n_prompt + step, false);
    }
    llama_free(ctx);

    // Pass 2 on a fresh context, so its KV cache holds nothing from the generation.
    std::vector<std::string> prompt_steps;
    ctx = fresh_context(model, options.n_threads);
    decode(ctx, prompt_ids, 0, true);
    for (int pos = 0; pos < n_prompt; ++pos) {
        llama_token unused;
        prompt_steps.push_back(step_json(llama_get_logits_ith(ctx, pos), n_vocab, kPromptTopK, &unused));
    }
    llama_free(ctx);

    int first_eog_step = -1;
    std::vector<std::string> pieces_hex;
    for (size_t i = 0; i < generated_ids.size(); ++i) {
        if (first_eog_step < 0 && llama_vocab_is_eog(vocab, generated_ids[i])) first_eog_step = (int) i;
        pieces_hex.push_back(piece_hex(vocab, generated_ids[i]));
    }

    const std::string model_name = options.model_path.substr(options.model_path.find_last_of('/') + 1);
    auto as_int = [](llama_token id) { return std::to_string(id); };
    auto as_string = [](const std::string & s) { return json_string(s); };
    auto verbatim = [](const std::string & s) { return s; };
    const std::string json =
        "{\"source\":\"dump_logits (libllama)\",\"model\":" + json_string(model_name) +
        ",\"n_vocab\":" + std::to_string(n_vocab) + ",\"n_threads\":" + std::to_string(options.n_threads) +
        ",\"n_ctx\":" + std::to_string(kContextSize) + ",\"n_ubatch\":" + std::to_string(kPhysicalBatch) +
        ",\"swa_full\":true,\"flash_attn\":\"off\",\"kv_type\":\"f32\",\"prompt\":" + json_string(prompt) +
        ",\"prompt_ids\":" + json_array(prompt_ids, as_int) + ",\"generated_ids\":" + json_array(generated_ids, as_int) +
        ",\"generated_pieces_hex\":" + json_array(pieces_hex, as_string) +
        ",\"first_eog_step\":" + std::to_string(first_eog_step) + ",\"steps\":" + json_array(steps, verbatim) +
        ",\"prompt_steps\":" + json_array(prompt_steps, verbatim) + "}\n";

    FILE * out = std::fopen(options.out_path.c_str(), "wb");
    if (!out || std::fwrite(json.data(), 1, json.size(), out) != json.size() || std::fclose(out) != 0) {
        fail("cannot write '" + options.out_path + "'");
    }
    llama_model_free(model);
    llama_backend_free();
    return 0;
}
