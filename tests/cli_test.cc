// Bad input end to end: broken models are refused by Model::Load with a
// message naming the problem, and the `kakeya` command turns every such
// problem into `kakeya: error: ...` and exit status 2, never a crash.
#include <sys/wait.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>

#include "base/error.h"
#include "gguf/gguf.h"
#include "gguf_copy.h"
#include "test_files.h"
#include "kernels/cpu/dequant.h"
#include "model/model.h"

namespace kakeya {
namespace {

namespace fs = std::filesystem;

const std::string kTinyLlama = std::string(KAKEYA_FIXTURES) + "/models/tiny-llama-f32.gguf";
const std::string kFoxText = std::string(KAKEYA_FIXTURES) + "/models/prompts/fox.txt";

struct CommandResult {
  int exit_code;
  std::string output;  // stdout and stderr together
};

// A shell command's exit code and stdout.
CommandResult RunShell(const std::string& cmd) {
  FILE* pipe = popen(cmd.c_str(), "r");
  EXPECT_NE(pipe, nullptr);
  std::string out;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, pipe)) > 0) out.append(buf, n);
  const int status = pclose(pipe);
  // A crash (signal) must never happen: report it as exit code 128 + signal.
  const int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return {code, out};
}

// env: "NAME=value ..." assignments for the command, or empty.
CommandResult RunKakeya(const std::string& args, const std::string& env = "") {
  return RunShell(env + " " + std::string(KAKEYA_BIN) + " " + args + " 2>&1");
}

// The command's stdout alone (stderr dropped), fed `input` on stdin.
std::string RunKakeyaStdout(const std::string& args, const std::string& input, const std::string& dir) {
  const std::string in = dir + "/stdin.txt";
  std::ofstream(in, std::ios::binary) << input;
  const std::string cmd = std::string(KAKEYA_BIN) + " " + args + " < " + in + " 2>/dev/null";
  const CommandResult r = RunShell(cmd);
  EXPECT_EQ(r.exit_code, 0) << cmd;
  return r.output;
}

// A tiny llama written from scratch, with hooks to break it in one place.
struct TinyModelSpec {
  std::string arch = "llama";
  std::string skip_tensor = {};        // leave this tensor out
  std::string misshape_tensor = {};    // give this tensor a wrong row count
  DType matrix_type = DType::kF32;     // type of every matrix
  bool drop_eps = false;               // leave out the RMSNorm epsilon key
};

void WriteTinyModel(const TinyModelSpec& spec, const std::string& path) {
  constexpr int n_embd = 32, n_ff = 64, n_head = 2, n_vocab = 300;
  GgufWriter w;
  w.SetString("general.architecture", spec.arch);
  const std::string a = spec.arch + ".";
  w.SetU32(a + "context_length", 128);
  w.SetU32(a + "embedding_length", n_embd);
  w.SetU32(a + "block_count", 1);
  w.SetU32(a + "feed_forward_length", n_ff);
  w.SetU32(a + "attention.head_count", n_head);
  w.SetU32(a + "attention.head_count_kv", n_head);
  if (!spec.drop_eps) w.SetF32(a + "attention.layer_norm_rms_epsilon", 1e-5f);
  AddFillerVocabulary(w, n_vocab);

  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.0f, 0.2f);
  auto add = [&](const std::string& name, DType type, int64_t n_in, int64_t n_out) {
    if (name == spec.skip_tensor) return;
    if (name == spec.misshape_tensor) n_out += 1;
    std::vector<float> values(n_in * n_out);
    for (float& v : values) v = type == DType::kF32 && n_out == 1 ? 1.0f : normal(rng);
    std::vector<uint8_t> bytes(RowBytes(type, n_in) * n_out);
    for (int64_t r = 0; r < n_out; ++r) {
      QuantizeRow(type, values.data() + r * n_in, bytes.data() + r * RowBytes(type, n_in), n_in);
    }
    std::vector<int64_t> ne = {n_in};
    if (n_out > 1) ne.push_back(n_out);
    w.AddTensor(name, type, ne, bytes.data(), bytes.size());
  };
  const DType m = spec.matrix_type;
  add("token_embd.weight", DType::kF32, n_embd, n_vocab);
  add("output_norm.weight", DType::kF32, n_embd, 1);
  add("output.weight", m, n_embd, n_vocab);
  add("blk.0.attn_norm.weight", DType::kF32, n_embd, 1);
  add("blk.0.attn_q.weight", m, n_embd, n_embd);
  add("blk.0.attn_k.weight", m, n_embd, n_embd);
  add("blk.0.attn_v.weight", m, n_embd, n_embd);
  add("blk.0.attn_output.weight", m, n_embd, n_embd);
  add("blk.0.ffn_norm.weight", DType::kF32, n_embd, 1);
  add("blk.0.ffn_gate.weight", m, n_embd, n_ff);
  add("blk.0.ffn_up.weight", m, n_embd, n_ff);
  add("blk.0.ffn_down.weight", m, n_ff, n_embd);
  w.Write(path);
}

TEST(ModelLoad, TheUnbrokenTinyModelLoadsAndRuns) {
  TempDir dir("cli_test");
  const std::string path = dir.File("ok.gguf");
  WriteTinyModel({}, path);
  const auto model = Model::Load(path);
  EXPECT_EQ(model->hparams().n_layer, 1);
  const CommandResult r = RunKakeya("run -m " + path + " -p hello -n 4 --temp 0 --json");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("\"tokens\""), std::string::npos) << r.output;
}

TEST(ModelLoad, MissingTensorIsNamed) {
  TempDir dir("cli_test");
  const std::string path = dir.File("missing.gguf");
  WriteTinyModel({.skip_tensor = "blk.0.ffn_up.weight"}, path);
  ExpectLoadError(path, "missing tensor 'blk.0.ffn_up.weight'");
}

TEST(ModelLoad, WrongShapeIsNamed) {
  TempDir dir("cli_test");
  const std::string path = dir.File("shape.gguf");
  WriteTinyModel({.misshape_tensor = "blk.0.attn_k.weight"}, path);
  ExpectLoadError(path, "'blk.0.attn_k.weight' has shape [32, 33");
}

TEST(ModelLoad, UnknownArchitectureListsSupportedOnes) {
  TempDir dir("cli_test");
  const std::string path = dir.File("arch.gguf");
  WriteTinyModel({.arch = "mamba"}, path);
  ExpectLoadError(path, "architecture 'mamba' is not supported (supported: llama");
}

TEST(ModelLoad, MissingHyperParameterIsNamed) {
  TempDir dir("cli_test");
  const std::string path = dir.File("eps.gguf");
  WriteTinyModel({.drop_eps = true}, path);
  ExpectLoadError(path, "llama.attention.layer_norm_rms_epsilon");
}

TEST(Cli, BadInputExitsWithStatus2AndAMessage) {
  TempDir dir("cli_test");
  const std::string truncated = dir.File("truncated.gguf");
  {
    std::ifstream in(kTinyLlama, std::ios::binary);
    std::vector<char> bytes(100000);
    in.read(bytes.data(), bytes.size());
    std::ofstream(truncated, std::ios::binary).write(bytes.data(), in.gcount());
  }
  const std::string garbage = dir.File("garbage.gguf");
  std::ofstream(garbage) << "this is not a gguf file";
  const std::string missing = dir.File("missing.gguf");
  WriteTinyModel({.skip_tensor = "output_norm.weight"}, missing);
  const std::string small_vocab = dir.File("small_vocab.gguf");  // a valid model with 300 tokens
  WriteTinyModel({}, small_vocab);
  const std::string no_experts_used = dir.File("no_experts_used.gguf");  // a mixture that routes to none
  WriteEditedCopy(std::string(KAKEYA_FIXTURES) + "/models2/q3moe-q8_0.gguf", no_experts_used,
                  [](GgufWriter& w, const GgufKv& kv) {
                    if (kv.key != "qwen3moe.expert_used_count") return false;
                    w.SetU32(kv.key, 0);
                    return true;
                  },
                  nullptr);

  struct Case {
    std::string args;
    std::string message;
  };
  const std::vector<Case> cases = {
      {"run -m " + truncated + " -p hi", "truncated.gguf"},
      {"run -m " + garbage + " -p hi", "magic"},
      {"run -m " + missing + " -p hi", "missing tensor 'output_norm.weight'"},
      {"run -m " + no_experts_used + " -p hi", "qwen3moe.expert_used_count = 0"},
      {"run -m " + kTinyLlama + " -p hi --temp -1", "--temp"},
      {"run -m " + kTinyLlama + " -p hi --top-p 2", "--top-p"},
      {"run -m " + kTinyLlama + " -p hi -c 2", "context"},
      {"run -m " + kTinyLlama, "prompt"},
      {"run -m " + dir.File("nope.gguf") + " -p hi", "nope.gguf"},
      {"run -m " + kTinyLlama + " -p hi -t 0", ""},
      {"run -m " + kTinyLlama + " -p hi --no-such-flag", "no-such-flag"},
      {"tokenize -m " + garbage + " -p hi", "magic"},
      {"run -m " + kTinyLlama + " -p hi --draft " + dir.File("nope.gguf"), "nope.gguf"},
      {"run -m " + kTinyLlama + " -p hi --draft " + garbage, "magic"},
      {"run -m " + kTinyLlama + " -p hi --draft " + small_vocab, "300"},
      {"run -m " + kTinyLlama + " -p hi --block 0", "--block"},
      {"run -m " + kTinyLlama + " -p hi --block 1000", "--block"},
      {"run -m " + kTinyLlama + " -p hi --spec bogus", "--spec"},
      {"run -m " + kTinyLlama + " -p hi --spec draft", "--draft"},
      {"run -m " + kTinyLlama + " -p hi --spec ngram --draft " + kTinyLlama, "--draft"},
      {"run -m " + kTinyLlama + " -p hi -ctk q9", "unknown cache type 'q9'"},
      {"run -m " + kTinyLlama + " -p hi -ctk kakeya4", "-ctv"},
      {"perplexity -m " + kTinyLlama + " -f " + kFoxText + " --cache-type-v bogus", "--cache-type-v"},
      {"bench depth -m " + kTinyLlama + " --cache-types f16,bogus", "unknown cache type 'bogus'"},
      {"bench depth -m " + kTinyLlama + " --depth 0", "--depth"},
      {"bench depth -m " + kTinyLlama + " --rows 1", "--rows"},
      {"chat -m " + garbage, "magic"},
      {"chat -m " + kTinyLlama + " -n -1", "-n -1"},
      {"chat -m " + kTinyLlama + " -c -5", "-c -5"},
      {"chat -m " + kTinyLlama + " --spec draft", "--draft"},
      {"perplexity -m " + kTinyLlama, "--file"},
      {"perplexity -m " + kTinyLlama + " -f " + dir.File("nope.txt"), "nope.txt"},
      {"perplexity -m " + kTinyLlama + " -f " + kFoxText + " -w 0", "--window"},
      {"perplexity -m " + garbage + " -f " + kFoxText, "magic"},
  };
  for (const Case& c : cases) {
    const CommandResult r = RunKakeya(c.args);
    if (c.args.find("-t 0") != std::string::npos) {
      EXPECT_EQ(r.exit_code, 0) << c.args << "\n" << r.output;  // -t 0 means the default
      continue;
    }
    EXPECT_EQ(r.exit_code, 2) << c.args << "\n" << r.output;
    EXPECT_NE(r.output.find(c.message), std::string::npos)
        << c.args << "\noutput: " << r.output << "\nexpected to mention: " << c.message;
  }
}

TEST(Cli, PerplexityScoresEveryTokenButTheFirst) {
  const CommandResult tok = RunKakeya("tokenize -m " + kTinyLlama + " -f " + kFoxText + " --json");
  ASSERT_EQ(tok.exit_code, 0) << tok.output;
  const size_t n_ids = std::count(tok.output.begin(), tok.output.begin() + tok.output.find(']'), ',') + 1;
  const CommandResult r = RunKakeya("perplexity -m " + kTinyLlama + " -f " + kFoxText + " -w 4 --json");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  for (const char* field : {"\"nats_per_token\"", "\"perplexity\"", "\"bits_per_byte\"", "\"bytes\""}) {
    EXPECT_NE(r.output.find(field), std::string::npos) << field << " missing in " << r.output;
  }
  // BOS + the text's tokens + EOS: every token after BOS is predicted once.
  EXPECT_NE(r.output.find("\"tokens\":" + std::to_string(n_ids)), std::string::npos)
      << n_ids << " ids in " << tok.output << "\n" << r.output;
}

// Without -m, `run` uses the shipped model in $KAKEYA_MODELS_DIR, and that
// model's draft is its default drafter; a missing default is a clear error.
TEST(Cli, RunWithoutModelUsesTheShippedPair) {
  TempDir dir("cli_test");
  const std::string draft = std::string(KAKEYA_FIXTURES) + "/models/tiny-draft-f32.gguf";
  fs::copy_file(kTinyLlama, dir.File("kakeya-pystdlib.gguf"));
  auto run = [&](const std::string& args) { return RunKakeya(args, "KAKEYA_MODELS_DIR=" + dir.File("")); };
  // Only the target: `auto` falls back to n-gram lookup.
  CommandResult r = run("run -p 'The quick brown fox' -n 8 --temp 0 --json");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("\"method\":\"ngram\""), std::string::npos) << r.output;
  fs::copy_file(draft, dir.File("kakeya-pystdlib-draft.gguf"));
  // With the shipped draft model: auto runs it beside n-gram lookup.
  r = run("run -p 'The quick brown fox' -n 16 --temp 0 --json");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("\"method\":\"auto\""), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("\"name\":\"draft\""), std::string::npos) << r.output;
  r = run("run -p 'The quick brown fox' -n 8 --temp 0 --json --spec draft");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("\"method\":\"draft\""), std::string::npos) << r.output;
  // Another -m does not pick up the shipped draft.
  r = run("run -m " + draft + " -p 'The quick brown fox' -n 8 --temp 0 --json --spec draft");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  fs::remove(dir.File("kakeya-pystdlib.gguf"));
  r = run("run -p hi");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("default model"), std::string::npos) << r.output;
}

// `kakeya chat` renders each turn with the chat template (ChatML for a model
// without one, written out by hand here) and replies what `kakeya run` gives
// for that text; speculation leaves the replies as they are.
TEST(Cli, ChatRepliesAreRunsOfTheRenderedConversation) {
  TempDir dir("cli_chat");
  const std::string common = "-m " + kTinyLlama + " --temp 0 -n 8 -t 1";
  const std::string plain = RunKakeyaStdout("chat " + common + " --spec none", "hello\n\nagain\n", dir.File(""));
  const size_t cut = plain.find('\n');
  ASSERT_NE(cut, std::string::npos) << plain;
  const std::string reply1 = plain.substr(0, cut);
  const std::string reply2 = plain.substr(cut + 1, plain.size() - cut - 2);
  ASSERT_EQ(plain, reply1 + "\n" + reply2 + "\n");
  EXPECT_EQ(RunKakeyaStdout("chat " + common + " --spec ngram", "hello\n\nagain\n", dir.File("")), plain);

  auto run_text = [&](const std::string& prompt) {
    std::ofstream(dir.File("prompt.txt"), std::ios::binary) << prompt;
    const CommandResult r = RunKakeya("run " + common + " --spec none --json -f " + dir.File("prompt.txt"));
    EXPECT_EQ(r.exit_code, 0) << r.output;
    return nlohmann::json::parse(r.output.substr(r.output.find('{')))["text"].get<std::string>();
  };
  const std::string turn1 = "<|im_start|>user\nhello<|im_end|>\n<|im_start|>assistant\n";
  EXPECT_EQ(run_text(turn1), reply1);
  EXPECT_EQ(run_text(turn1 + reply1 + "<|im_end|>\n<|im_start|>user\nagain<|im_end|>\n<|im_start|>assistant\n"),
            reply2);
}

TEST(Cli, RunJsonHasTheDocumentedFields) {
  const CommandResult r = RunKakeya("run -m " + kTinyLlama + " -p 'The quick brown fox' -n 8 --temp 0 --json --top 3");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  for (const char* field : {"\"prompt_tokens\"", "\"tokens\"", "\"text\"", "\"top\"", "\"timings\"",
                            "\"load_ms\"", "\"prefill_ms\"", "\"decode_ms\"", "\"prefill_tok_s\"",
                            "\"decode_tok_s\""}) {
    EXPECT_NE(r.output.find(field), std::string::npos) << field << " missing in " << r.output;
  }
}

// The documented fields of `bench verify --json` (README, issue #8), with the
// roofline the higher of its two readings. Times are a benchmark's business:
// only their presence and sign are checked.
TEST(Cli, BenchVerifyJsonHasTheDocumentedFields) {
  const CommandResult r = RunKakeya("bench verify -m " + kTinyLlama + " --rows 1,3 --reps 1 --context 4 -t 2 --json");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const nlohmann::json j = nlohmann::json::parse(r.output);
  for (const char* field : {"cpu", "features", "roofline_gbps", "roofline_gbps_before", "roofline_gbps_after",
                            "weight_gb", "rows"}) {
    EXPECT_TRUE(j.contains(field)) << field << " missing in " << r.output;
  }
  EXPECT_GT(j["roofline_gbps"].get<double>(), 0.0);
  EXPECT_EQ(j["roofline_gbps"].get<double>(),
            std::max(j["roofline_gbps_before"].get<double>(), j["roofline_gbps_after"].get<double>()));
  ASSERT_EQ(j["rows"].size(), 2u);
  EXPECT_EQ(j["rows"][0]["n"], 1);
  EXPECT_EQ(j["rows"][0]["ratio"].get<double>(), 1.0);
  EXPECT_EQ(j["rows"][1]["n"], 3);
  for (const auto& row : j["rows"]) {
    EXPECT_GT(row["ms"].get<double>(), 0.0);
    EXPECT_GT(row["gbps"].get<double>(), 0.0);
  }
}

TEST(Cli, BenchDepthComparesCacheTypesAtEachDepth) {
  const std::string qwen3 = std::string(KAKEYA_FIXTURES) + "/models/tiny-qwen3-f32.gguf";
  const CommandResult r = RunKakeya("bench depth -m " + qwen3 +
                                    " --depth 40,300 --cache-types f32,f16,kakeya4/kakeya3 --reps 1 --rounds 2 -t 2 --json");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const nlohmann::json j = nlohmann::json::parse(r.output);
  ASSERT_EQ(j["results"].size(), 6u) << r.output;
  std::map<std::string, size_t> per_token;
  for (const auto& row : j["results"]) {
    for (const char* field : {"decode_ms", "decode_tok_s", "verify_ms", "verify_steps"}) {
      EXPECT_GT(row[field].get<double>(), 0.0) << field << " in " << row.dump();
    }
    EXPECT_GT(row["kv_bytes"].get<size_t>(), 0u);
    per_token[row["cache_types"].get<std::string>()] = row["kv_bytes_per_token"].get<size_t>();
  }
  EXPECT_EQ(j["results"][0]["depth"], 40);
  EXPECT_EQ(j["results"][5]["depth"], 300);
  EXPECT_EQ(2 * per_token["f16/f16"], per_token["f32/f32"]);
  EXPECT_LT(per_token["kakeya4/kakeya3"], per_token["f16/f16"] / 3.8) << r.output;
}

// The recall gate's bookkeeping: every placement asked of every type, and a
// type against itself loses nothing. (Random-weight models recall no needle:
// the gate's figures come from a trained model, ADR 0013.)
TEST(Cli, BenchRecallAsksEveryNeedleOfEveryType) {
  const std::string qwen3 = std::string(KAKEYA_FIXTURES) + "/models/tiny-qwen3-f32.gguf";
  const std::string text = std::string(KAKEYA_FIXTURES) + "/models/prompts/long.txt";
  const std::string files = " -f " + text + " -f " + text + " -f " + text;
  const CommandResult r = RunKakeya("bench recall -m " + qwen3 + files +
                                    " --context 200,300 --needles 3 --haystacks 2 --cache-types f32,f32,kakeya4/kakeya3 "
                                    "-t 2 --json");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const nlohmann::json j = nlohmann::json::parse(r.output);
  ASSERT_EQ(j["results"].size(), 6u) << r.output;
  for (const auto& row : j["results"]) EXPECT_EQ(row["needles"], 6) << row.dump();
  EXPECT_EQ(j["results"][0]["recalled"], j["results"][1]["recalled"]);
  EXPECT_EQ(j["results"][3]["recalled"], j["results"][4]["recalled"]);
  EXPECT_EQ(j["results"][5]["context"], 300);
  EXPECT_TRUE(j["lost"].empty() || j["lost"][0]["cache_types"] == "kakeya4/kakeya3") << r.output;

  const CommandResult too_long = RunKakeya("bench recall -m " + qwen3 + " -f " + text + " --context 1900 -t 2");
  EXPECT_EQ(too_long.exit_code, 2);
  EXPECT_NE(too_long.output.find("--context 1900"), std::string::npos) << too_long.output;
  const CommandResult bad_type = RunKakeya("bench recall -m " + qwen3 + " -f " + text + " --cache-types f32,q5_9");
  EXPECT_EQ(bad_type.exit_code, 2);
  EXPECT_NE(bad_type.output.find("--cache-types"), std::string::npos) << bad_type.output;
}

TEST(Cli, SpeculativeRunsReportTheirStatisticsAndKeepTheTokens) {
  const std::string common = "run -m " + kTinyLlama + " -p 'The quick brown fox' -n 40 --temp 0 --json";
  const CommandResult plain = RunKakeya(common + " --spec none");
  ASSERT_EQ(plain.exit_code, 0) << plain.output;
  EXPECT_EQ(plain.output.find("\"spec\""), std::string::npos) << plain.output;
  const std::string tokens = plain.output.substr(plain.output.find("\"tokens\""));
  const std::string draft = std::string(KAKEYA_FIXTURES) + "/models/tiny-draft-f32.gguf";
  for (const std::string& spec : std::vector<std::string>{" --spec ngram", " --spec ngram --block 4", " --draft " + draft,
                                                         " --spec draft --block 3 --draft " + draft}) {
    const CommandResult r = RunKakeya(common + spec);
    ASSERT_EQ(r.exit_code, 0) << spec << "\n" << r.output;
    for (const char* field : {"\"method\"", "\"block\"", "\"steps\"", "\"drafted\"", "\"accepted\"",
                              "\"mean_accept_len\"", "\"accept_by_pos\"", "\"draft_ms\"", "\"verify_ms\""}) {
      EXPECT_NE(r.output.find(field), std::string::npos) << field << " missing with" << spec;
    }
    // The token ids (and everything after them in the sorted JSON) are those of --spec none.
    EXPECT_NE(r.output.find(tokens.substr(0, tokens.find(']') + 1)), std::string::npos) << spec;
  }
}

TEST(Cli, TokenizeJsonMatchesTheReferenceIds) {
  // ids from tests/fixtures/models/tiny-llama-f32/fox.logits.json (llama.cpp)
  const CommandResult r = RunKakeya("tokenize -m " + kTinyLlama + " -p 'The quick brown fox' --json");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("\"tokens\":[1,450,4996,3347,113,1701,123]"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("\"pieces\""), std::string::npos) << r.output;
}


// `bench spec` on the shipped model: greedy `def parse_args(` loops, so the
// degeneration gate fails the run (exit 1, naming the run) unless
// --allow-degenerate; then the JSON has the documented fields, speculation
// is identical to plain decoding, and --csv and --plot write their files.
TEST(Cli, BenchSpecGatesALoopingOutputAndReportsEveryConfiguration) {
  TempDir dir("cli_test");
  {
    std::ofstream(dir.File("loop.txt")) << "def parse_args(\n";
  }
  const std::string common = "bench spec --workload file:" + dir.File("loop.txt") +
                             " --spec ngram,draft --blocks 0,4 -n 96 --reps 1 --temp 0 -t 1";
  CommandResult r = RunKakeya(common);
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("kakeya: bench failed: plain decoding, prompt loop.txt: output degenerates"),
            std::string::npos)
      << r.output;
  r = RunKakeya(common + " --allow-degenerate --json --csv " + dir.File("b.csv") + " --plot " + dir.File("b.svg"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const nlohmann::json j = nlohmann::json::parse(r.output);
  for (const char* field : {"machine", "cpu_target", "model", "dtype", "threads", "sampling", "results"}) {
    EXPECT_TRUE(j.contains(field)) << field << " missing in " << r.output;
  }
  ASSERT_EQ(j["results"].size(), 5u);  // plain, then 2 methods x 2 blocks
  EXPECT_EQ(j["results"][0]["method"], "none");
  for (const auto& row : j["results"]) {
    for (const char* field : {"workload", "method", "block", "prompts", "tokens", "prefill_tok_s", "decode_tok_s",
                              "speedup", "mean_accept_len", "draft_share", "verify_share", "peak_rss_bytes",
                              "kv_bytes", "identical", "degenerate"}) {
      EXPECT_TRUE(row.contains(field)) << field << " missing in " << row.dump();
    }
    EXPECT_EQ(row["tokens"], 96);
    EXPECT_EQ(row["degenerate"], 1);
    EXPECT_EQ(row["identical"], row["method"] == "none" ? "-" : "yes");
    EXPECT_GT(row["decode_tok_s"].get<double>(), 0.0);
  }
  EXPECT_EQ(j["failures"].size(), 0u);
  std::ifstream csv(dir.File("b.csv"));
  std::string header, line;
  std::getline(csv, header);
  EXPECT_EQ(header.rfind("machine,cpu_target,model,dtype,threads,", 0), 0u) << header;
  int lines = 0;
  while (std::getline(csv, line)) ++lines;
  EXPECT_EQ(lines, 5);
  std::stringstream svg;
  svg << std::ifstream(dir.File("b.svg")).rdbuf();
  EXPECT_NE(svg.str().find("</svg>"), std::string::npos);
}


// --synthetic-accept: drafts accepted at random to a mean length, never
// lossless, so the identity gate is skipped and the JSON says what was
// measured against the target mean.
TEST(Cli, BenchSpecSyntheticAcceptanceSkipsTheIdentityGate) {
  TempDir dir("cli_test");
  {
    std::ofstream(dir.File("p.txt")) << "def parse_args(\n";
  }
  const CommandResult r = RunKakeya("bench spec --workload file:" + dir.File("p.txt") +
                                    " --spec draft --blocks 4 -n 48 --reps 1 -t 1 --synthetic-accept 3 --json");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const nlohmann::json j = nlohmann::json::parse(r.output);
  ASSERT_EQ(j["results"].size(), 2u);
  EXPECT_EQ(j["results"][1]["identical"], "skipped");
  ASSERT_EQ(j["synthetic"].size(), 1u);
  EXPECT_EQ(j["synthetic"][0]["block"], 4);
  EXPECT_EQ(j["synthetic"][0]["tau"], 3.0);
  EXPECT_GT(j["synthetic"][0]["mean_accept_len"].get<double>(), 1.0);
  EXPECT_LE(j["synthetic"][0]["mean_accept_len"].get<double>(), 4.0);
  // Adaptive blocks cannot hold a target mean.
  EXPECT_EQ(RunKakeya("bench spec --workload file:" + dir.File("p.txt") + " --blocks 0 --synthetic-accept 3").exit_code, 2);
}

}  // namespace
}  // namespace kakeya
