// Writes a "drafts fixture" (tests/fixtures/models2/README.md, `<drafter>/<prompt>.drafts.json`) from the
// reference engine: the loop of llama.cpp's examples/speculative-simple, driven through libllama-common's
// common/speculative.h exactly as that example drives it, plus recording. Configuration as for the logits
// fixtures: CPU, flash attention off, F32 KV cache (target and drafter), full SWA cache, greedy target.
// Built and run by scripts/dump-reference-drafts.sh.
//
//   dump_drafts -m TARGET.gguf -f PROMPT.txt -n N_PREDICT -o OUT.json
//               [--spec-type draft-mtp|draft-dspark] [--n-max 3] [-md DRAFT.gguf] [-t THREADS]
//
// The drafter's logits are read by interposing llama_decode (see below): common_speculative_draft keeps
// its decodes to itself, and only the last one's logits survive the call.

#include "common.h"
#include "llama.h"
#include "log.h"
#include "sampling.h"
#include "speculative.h"

#include <dlfcn.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <numeric>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

constexpr const char kProgramName[] = "dump_drafts";
#include "reference_util.h"

namespace {

// Fixed by the fixture format: tests read these values back from the file and rely on them.
constexpr int kContextSize = 2048;
constexpr int kPhysicalBatch = 512;
constexpr int kDraftTopK = 5;

struct Options {
    std::string model_path, prompt_path, out_path, draft_path, spec_type = "draft-mtp";
    int n_predict = -1;
    int n_threads = 2;
    int n_max = 3;
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
        else if (flag == "-md") options.draft_path = value();
        else if (flag == "-n") options.n_predict = parse_int(value(), "-n");
        else if (flag == "-t") options.n_threads = parse_int(value(), "-t");
        else if (flag == "--n-max") options.n_max = parse_int(value(), "--n-max");
        else if (flag == "--spec-type") options.spec_type = value();
        else fail("unknown argument '" + flag + "'");
    }
    if (options.model_path.empty()) fail("-m TARGET.gguf is required");
    if (options.prompt_path.empty()) fail("-f PROMPT.txt is required");
    if (options.out_path.empty()) fail("-o OUT.json is required");
    if (options.n_predict < 0) fail("-n N_PREDICT (>= 0) is required");
    if (options.n_threads < 1) fail("-t must be at least 1");
    if (options.n_max < 1) fail("--n-max must be at least 1");
    // Drafters whose output row i is proposal i: MTP (the i-th single-row draft decode: the NextN block, or an
    // assistant given with -md) and DSpark with its anchor row proposing (row i of the one block decode). DFlash's
    // rows are one off (its anchor proposes nothing), which the schema's draft_top does not say.
    if (options.spec_type != "draft-mtp" && options.spec_type != "draft-dspark") {
        fail("--spec-type '" + options.spec_type + "' is not supported (draft-mtp, draft-dspark)");
    }
    if (options.spec_type == "draft-dspark" && options.draft_path.empty()) fail("draft-dspark needs -md DSPARK.gguf");
    return options;
}

std::string number(double value) { char text[32]; std::snprintf(text, sizeof text, "%.9g", value); return text; }

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
std::string ids_json(const std::vector<llama_token> & ids) {
    return json_array(ids, [](llama_token id) { return std::to_string(id); });
}

std::string base_name(const std::string & path) { return path.substr(path.find_last_of('/') + 1); }

// One output row of the drafter, as it came out of llama_decode.
struct DraftRow { llama_token argmax; std::string top_json; };

// The drafter keeps a top-k(10) sampler on the backend by default; its rows then hold only those candidates'
// logits (raw: top-k does not rescale), which contain the top 5. Without one they are the whole vocabulary.
DraftRow read_row(llama_context * ctx, int32_t i) {
    const float * logits = llama_get_logits_ith(ctx, i);
    const llama_token * ids = llama_get_sampled_candidates_ith(ctx, i);
    const int n = (int) llama_get_sampled_logits_count_ith(ctx, i);
    if (!logits || !ids || n <= 0) fail("the drafter produced no logits for row " + std::to_string(i));
    std::vector<int> order(n);
    std::iota(order.begin(), order.end(), 0);
    const int top_k = std::min(kDraftTopK, n);
    std::partial_sort(order.begin(), order.begin() + top_k, order.end(), [&](int a, int b) {
        return logits[a] != logits[b] ? logits[a] > logits[b] : ids[a] < ids[b];
    });
    std::string top;
    for (int rank = 0; rank < top_k; ++rank) {
        top += std::string(rank ? "," : "") + "[" + std::to_string(ids[order[rank]]) + "," + number(logits[order[rank]]) + "]";
    }
    return {ids[order[0]], "[" + top + "]"};
}

struct DraftRecorder {
    llama_context * ctx = nullptr;  // the drafter's context; the target's decodes are never recorded
    bool active = false;            // only inside common_speculative_draft, not the catch-up decodes of _process
    std::vector<DraftRow> rows;
};

DraftRecorder recorder;

}  // namespace

// Interposes libllama's llama_decode for the whole process, libllama-common's calls included (they go through
// the PLT and the executable's definition comes first), then forwards to the real one.
extern "C" int32_t llama_decode(llama_context * ctx, llama_batch batch) {
    using decode_fn = int32_t (*)(llama_context *, llama_batch);
    static const decode_fn real = (decode_fn) dlsym(RTLD_NEXT, "llama_decode");
    if (!real) fail("cannot find libllama's llama_decode");
    const int32_t status = real(ctx, batch);
    // A batch without a logits array outputs its last row only.
    for (int32_t i = 0; status == 0 && recorder.active && ctx == recorder.ctx && i < batch.n_tokens; ++i) {
        if (batch.logits ? batch.logits[i] != 0 : i + 1 == batch.n_tokens) recorder.rows.push_back(read_row(ctx, i));
    }
    return status;
}

int main(int argc, char ** argv) {
    const Options options = parse_options(argc, argv);
    llama_log_set(only_errors_log, nullptr);
    common_log_set_verbosity_thold(LOG_LEVEL_ERROR);

    // What speculative-simple gets from: -c 2048 -b 2048 -ub 512 -t T -fa off -ctk f32 -ctv f32 --swa-full
    // --temp 0 --spec-type draft-mtp --draft-max N --draft-min 0 --draft-p-min 0 -ctkd f32 -ctvd f32 -ngl 0.
    common_params params;
    params.model.path = options.model_path;
    params.prompt = read_file(options.prompt_path);
    params.n_predict = options.n_predict;
    params.n_ctx = kContextSize;
    params.n_batch = kContextSize;
    params.n_ubatch = kPhysicalBatch;
    params.cpuparams.n_threads = options.n_threads;
    params.cpuparams_batch.n_threads = options.n_threads;
    params.n_gpu_layers = 0;
    params.fit_params = false;  // CPU only and every size is given: there is nothing to fit
    params.flash_attn_type = LLAMA_FLASH_ATTN_TYPE_DISABLED;
    params.cache_type_k = params.cache_type_v = GGML_TYPE_F32;
    params.swa_full = true;
    params.sampling.temp = 0.0f;
    params.sampling.user_sampling_config |= COMMON_PARAMS_SAMPLING_CONFIG_TEMP;
    // The type is what loads the NextN/MTP tensors (common_model_params_to_llama derives load_mtp from it) and
    // asks for n_rs_seq = n_max on the target (need_n_rs_seq), the snapshots that roll rejected drafts back
    // where the memory cannot just drop positions: libllama keeps it for deepseek4, clamps it to 0 for glm4moe.
    params.speculative.types = {options.spec_type == "draft-dspark" ? COMMON_SPECULATIVE_TYPE_DRAFT_DSPARK
                                                                     : COMMON_SPECULATIVE_TYPE_DRAFT_MTP};
    params.speculative.draft.n_max = options.n_max;
    params.speculative.draft.n_min = 0;
    params.speculative.draft.p_min = 0.0f;
    params.speculative.draft.n_gpu_layers = 0;
    params.speculative.draft.cache_type_k = params.speculative.draft.cache_type_v = GGML_TYPE_F32;
    if (!options.draft_path.empty()) params.speculative.draft.mparams.path = options.draft_path;

    // From here on, speculative-simple.cpp line by line, except where marked.
    const auto output_limits = common_speculative_get_output_limits(
            params.n_batch, params.n_parallel, common_speculative_n_max(&params.speculative));
    params.n_outputs_max = output_limits.total;
    params.n_outputs_max_per_seq = output_limits.per_seq;

    llama_backend_init();
    auto init_tgt = common_init_from_params(params);
    llama_model * model_tgt = init_tgt->model();
    llama_context * ctx_tgt = init_tgt->context();
    if (!model_tgt || !ctx_tgt) fail("cannot load the target '" + options.model_path + "'");
    const llama_vocab * vocab = llama_model_get_vocab(model_tgt);

    common_params params_dft = common_base_params_to_speculative(params);
    common_speculative_init_result_ptr spec_init = common_speculative_init_from_params(params_dft, model_tgt, ctx_tgt);
    params.speculative.draft.ctx_tgt = ctx_tgt;
    params.speculative.draft.ctx_dft = spec_init->context();
    llama_context * ctx_dft = params.speculative.draft.ctx_dft;
    if (!ctx_dft) fail("cannot create the drafter's context (does the target have an MTP/NextN block?)");

    const bool use_ckpt_tgt = common_context_can_seq_rm(ctx_tgt) == COMMON_CONTEXT_SEQ_RM_TYPE_FULL;
    const bool use_ckpt_dft = common_context_can_seq_rm(ctx_dft) == COMMON_CONTEXT_SEQ_RM_TYPE_FULL;
    // Not in the example: a restored partial draft would be a step the fixture format has no place for. With
    // draft-mtp the target either drops positions (KV cache) or has n_rs_seq > 0, so this does not happen.
    if (use_ckpt_tgt) fail("the target context cannot remove partial sequences (checkpoint path not supported)");

    const std::vector<llama_token> inp = common_tokenize(ctx_tgt, params.prompt, true, true);
    if (inp.empty()) fail("the prompt has no tokens");
    if ((int) inp.size() + options.n_predict + options.n_max + 2 > kContextSize) fail("prompt + n_predict exceed the context");

    common_sampler_ptr smpl(common_sampler_init(model_tgt, params.sampling));
    common_speculative * spec = common_speculative_init(params.speculative, 1);
    if (!spec) fail("cannot initialize speculative decoding");
    recorder.ctx = ctx_dft;

    const llama_seq_id seq_id = 0;
    {
        llama_batch batch_prompt = llama_batch_init((int32_t) inp.size(), 0, 1);
        for (size_t i = 0; i + 1 < inp.size(); ++i) common_batch_add(batch_prompt, inp[i], (llama_pos) i, {seq_id}, false);
        if (llama_decode(ctx_tgt, batch_prompt) != 0) fail("the target failed to decode the prompt");  // example ignores it
        if (!common_speculative_process(spec, batch_prompt)) fail("failed to process the prompt for the drafter");
        llama_batch_free(batch_prompt);
    }
    llama_token id_last = inp.back();
    llama_tokens prompt_tgt(inp.begin(), inp.end() - 1);
    int n_past = (int) inp.size() - 1;
    common_speculative_begin(spec, seq_id, prompt_tgt);

    llama_batch batch_tgt = llama_batch_init(llama_n_batch(ctx_tgt), 0, 1);
    llama_tokens draft;
    common_prompt_checkpoint ckpt;
    int n_predict = 0, n_drafted = 0, n_accept = 0, n_steps_with_draft = 0, n_mismatch = 0;
    std::vector<llama_token> generated_ids;
    std::vector<std::string> steps;

    while (true) {
        const int step_pos = n_past;
        ckpt.update_pos((int64_t) prompt_tgt.size(),
                        llama_memory_seq_pos_min(llama_get_memory(ctx_tgt), seq_id),
                        llama_memory_seq_pos_max(llama_get_memory(ctx_tgt), seq_id));
        if (use_ckpt_dft) ckpt.update_dft(ctx_dft, seq_id, LLAMA_STATE_SEQ_FLAGS_PARTIAL_ONLY);

        int n_draft_max = (int) llama_n_ctx(ctx_tgt) - n_past - 2;
        if (params.n_predict >= 0) n_draft_max = std::min(n_draft_max, params.n_predict - n_predict - 1);
        n_draft_max = std::max(n_draft_max, 0);  // 0 means "no limit" to common_speculative_draft

        common_speculative_get_draft_params(spec, seq_id) = {true, n_draft_max, n_past, id_last, &prompt_tgt, &draft};
        recorder.rows.clear();
        recorder.active = true;
        common_speculative_draft(spec);
        recorder.active = false;

        if (use_ckpt_dft) ckpt.load_dft(ctx_dft, seq_id, LLAMA_STATE_SEQ_FLAGS_PARTIAL_ONLY);
        llama_memory_seq_rm(llama_get_memory(ctx_dft), seq_id, ckpt.pos_max + 1, -1);

        // The drafter decodes n_max rows even when the draft is then cut to n_draft_max; row i is slot i.
        if (recorder.rows.size() < draft.size()) fail("fewer drafter rows than proposed tokens");
        std::vector<std::string> draft_top;
        for (size_t i = 0; i < draft.size(); ++i) {
            draft_top.push_back(recorder.rows[i].top_json);
            if (recorder.rows[i].argmax != draft[i]) ++n_mismatch;
        }

        common_batch_clear(batch_tgt);
        common_batch_add(batch_tgt, id_last, n_past++, {seq_id}, true);
        for (size_t i = 0; i < draft.size(); ++i) common_batch_add(batch_tgt, draft[i], n_past + (llama_pos) i, {seq_id}, true);
        if (llama_decode(ctx_tgt, batch_tgt) != 0) fail("the target failed to decode at pos " + std::to_string(step_pos));
        if (!common_speculative_process(spec, batch_tgt)) fail("failed to process the target batch for the drafter");

        const size_t n_draft = draft.size();
        const std::vector<llama_token> ids = common_sampler_sample_and_accept_n(smpl.get(), ctx_tgt, draft);
        if (ids.empty()) fail("the target sampler returned no token");
        const int accepted = (int) ids.size() - 1;
        common_speculative_accept(spec, seq_id, (uint16_t) accepted);

        n_past += accepted;
        n_drafted += (int) n_draft;
        n_accept += accepted;
        n_predict += (int) ids.size();
        n_steps_with_draft += n_draft > 0;

        steps.push_back("{\"pos\":" + std::to_string(step_pos) + ",\"n_ctx_tokens\":" + std::to_string(prompt_tgt.size()) +
                        ",\"id_last\":" + std::to_string(id_last) + ",\"draft\":" + ids_json(draft) +
                        ",\"draft_top\":" + json_array(draft_top, [](const std::string & s) { return s; }) +
                        ",\"n_draft_rows\":" + std::to_string(recorder.rows.size()) +
                        ",\"accepted\":" + std::to_string(accepted) + ",\"target_ids\":" + ids_json(ids) + "}");

        bool has_eos = false;
        for (size_t i = 0; i < ids.size() && !has_eos; ++i) {
            prompt_tgt.push_back(id_last);
            generated_ids.push_back(id_last = ids[i]);
            has_eos = llama_vocab_is_eog(vocab, id_last);
        }
        draft.clear();
        llama_memory_seq_rm(llama_get_memory(ctx_tgt), seq_id, n_past, -1);
        llama_memory_seq_rm(llama_get_memory(ctx_dft), seq_id, n_past, -1);
        if ((params.n_predict >= 0 && n_predict > params.n_predict) || has_eos) break;
    }
    llama_batch_free(batch_tgt);
    common_speculative_free(spec);

    const double mean_accepted = n_steps_with_draft ? 1.0 + (double) n_accept / n_steps_with_draft : 1.0;
    const double acceptance_rate = n_drafted ? (double) n_accept / n_drafted : 0.0;
    const std::string draft_model = options.draft_path.empty() ? "null" : json_string(base_name(options.draft_path));
    const std::string json =
        "{\"source\":\"dump_drafts (libllama + libllama-common: common/speculative.h, loop of examples/speculative-simple)\""
        ",\"target_model\":" + json_string(base_name(options.model_path)) + ",\"draft_model\":" + draft_model +
        ",\"spec_type\":" + json_string(options.spec_type) + ",\"n_max\":" + std::to_string(params.speculative.draft.n_max) +
        ",\"n_min\":" + std::to_string(params.speculative.draft.n_min) + ",\"p_min\":" + number(params.speculative.draft.p_min) +
        ",\"n_threads\":" + std::to_string(options.n_threads) + ",\"n_ctx\":" + std::to_string(kContextSize) +
        ",\"n_ubatch\":" + std::to_string(kPhysicalBatch) +
        ",\"flash_attn\":\"disabled\",\"kv_type\":\"f32\",\"draft_kv_type\":\"f32\",\"swa_full\":true" +
        ",\"n_predict\":" + std::to_string(options.n_predict) + ",\"prompt\":" + json_string(params.prompt) +
        ",\"prompt_ids\":" + ids_json(inp) + ",\"generated_ids\":" + ids_json(generated_ids) +
        ",\"n_steps\":" + std::to_string(steps.size()) + ",\"n_steps_with_draft\":" + std::to_string(n_steps_with_draft) +
        ",\"n_drafted\":" + std::to_string(n_drafted) + ",\"n_accepted\":" + std::to_string(n_accept) +
        ",\"mean_accepted_length\":" + number(mean_accepted) + ",\"acceptance_rate\":" + number(acceptance_rate) +
        ",\"n_draft_top_argmax_mismatch\":" + std::to_string(n_mismatch) +
        ",\"steps\":" + json_array(steps, [](const std::string & s) { return s; }) + "}\n";

    FILE * out = std::fopen(options.out_path.c_str(), "wb");
    if (!out || std::fwrite(json.data(), 1, json.size(), out) != json.size() || std::fclose(out) != 0) {
        fail("cannot write '" + options.out_path + "'");
    }
    std::fprintf(stderr, "dump_drafts: %zu steps, %d drafted, %d accepted, mean accepted length %.3f\n",
                 steps.size(), n_drafted, n_accept, mean_accepted);
    llama_backend_free();
    return 0;
}
