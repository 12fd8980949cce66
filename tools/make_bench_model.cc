// Writes a random-weight llama GGUF for benchmarks, with our own GGUF writer
// and reference quantizers: the ~1.25B "bench" shape of the performance issues
// (n_embd 2048, 16 layers, 32/8 heads, n_ff 5632, vocab 128256) or a tiny one.
//
//   make-bench-model OUT.gguf [--type F16|BF16|Q8_0|Q4_0|Q4_1|Q5_0|Q5_1|Q4_K_M|Q5_K_M|F32] [--shape 1b|tiny]
//
// Q4_K_M and Q5_K_M follow llama.cpp's recipes in spirit: Q4_K (Q5_K)
// matrices, Q6_K for ffn_down and attn_v, Q6_K output; token_embd Q4_K (Q5_K).
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "base/error.h"
#include "gguf/gguf.h"
#include "kernels/cpu/dequant.h"

namespace kakeya {
namespace {

struct Shape {
  int n_embd, n_layer, n_head, n_head_kv, n_ff, n_vocab;
};

// The types --type names directly (by their GGUF names); Q4_K_M and Q5_K_M
// mix types by role.
constexpr DType kSingleTypes[] = {DType::kF32,  DType::kF16,  DType::kBF16, DType::kQ8_0,
                                  DType::kQ4_0, DType::kQ4_1, DType::kQ5_0, DType::kQ5_1};

DType ParseType(const std::string& s, const std::string& role) {
  for (DType t : kSingleTypes) {
    if (NameOf(t) == s) return t;
  }
  if (s == "Q4_K_M" || s == "Q5_K_M") {
    if (role == "ffn_down" || role == "attn_v" || role == "output") return DType::kQ6_K;
    return s == "Q4_K_M" ? DType::kQ4_K : DType::kQ5_K;
  }
  Fail("unknown --type ", s, " (F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K_M, Q5_K_M)");
}

// Fills n_out rows of n_in N(0, stddev) values and converts them to `type`,
// row by row on all cores (a 1.25B model is ~5 G random numbers).
std::vector<uint8_t> RandomMatrix(DType type, int64_t n_in, int64_t n_out, float stddev, uint64_t seed) {
  const int64_t row_bytes = RowBytes(type, n_in);
  std::vector<uint8_t> out(row_bytes * n_out);
  const int n_threads = std::max(1u, std::thread::hardware_concurrency());
  std::vector<std::thread> threads;
  for (int t = 0; t < n_threads; ++t) {
    threads.emplace_back([&, t] {
      std::vector<float> row(n_in);
      for (int64_t r = t; r < n_out; r += n_threads) {
        std::mt19937_64 rng(seed * 1000003 + r);
        std::normal_distribution<float> normal(0.0f, stddev);
        for (float& v : row) v = normal(rng);
        QuantizeRow(type, row.data(), out.data() + r * row_bytes, n_in);
      }
    });
  }
  for (auto& th : threads) th.join();
  return out;
}

void AddVocab(GgufWriter& w, int n_vocab) {
  // A SentencePiece vocabulary: <unk>, <s>, </s>, 256 byte tokens, then filler
  // pieces, enough for the tokenizer to load and for prompts to encode.
  std::vector<std::string> tokens;
  std::vector<float> scores;
  std::vector<int32_t> types;
  tokens = {"<unk>", "<s>", "</s>"};
  types = {2, 3, 3};
  for (int b = 0; b < 256; ++b) {
    char buf[8];
    std::snprintf(buf, sizeof buf, "<0x%02X>", b);
    tokens.push_back(buf);
    types.push_back(6);
  }
  for (int i = static_cast<int>(tokens.size()); i < n_vocab; ++i) {
    tokens.push_back("\xE2\x96\x81piece" + std::to_string(i));
    types.push_back(1);
  }
  scores.assign(tokens.size(), 0.0f);
  for (size_t i = 0; i < scores.size(); ++i) scores[i] = -static_cast<float>(i);
  w.SetString("tokenizer.ggml.model", "llama");
  w.SetStringArray("tokenizer.ggml.tokens", tokens);
  w.SetF32Array("tokenizer.ggml.scores", scores);
  w.SetI32Array("tokenizer.ggml.token_type", types);
  w.SetU32("tokenizer.ggml.bos_token_id", 1);
  w.SetU32("tokenizer.ggml.eos_token_id", 2);
  w.SetU32("tokenizer.ggml.unknown_token_id", 0);
  w.SetBool("tokenizer.ggml.add_bos_token", true);
}

int Main(int argc, char** argv) {
  if (argc < 2 || std::string(argv[1]) == "--help") {
    std::fprintf(stderr, "usage: make-bench-model OUT.gguf [--type F16|BF16|Q8_0|Q4_0|Q4_1|Q5_0|Q5_1|Q4_K_M|Q5_K_M|F32] [--shape 1b|tiny]\n");
    return 2;
  }
  std::string out = argv[1], type = "F16", shape_name = "1b";
  for (int i = 2; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "--type") type = argv[i + 1];
    else if (flag == "--shape") shape_name = argv[i + 1];
    else Fail("unknown flag ", flag);
  }
  Shape s;
  if (shape_name == "1b") s = {2048, 16, 32, 8, 5632, 128256};
  else if (shape_name == "tiny") s = {256, 2, 4, 2, 512, 1024};
  else Fail("unknown --shape ", shape_name, " (1b, tiny)");
  const int head_dim = s.n_embd / s.n_head;

  GgufWriter w;
  w.SetString("general.architecture", "llama");
  w.SetString("general.name", "kakeya-bench-" + shape_name + "-" + type);
  w.SetU32("llama.context_length", 4096);
  w.SetU32("llama.embedding_length", s.n_embd);
  w.SetU32("llama.block_count", s.n_layer);
  w.SetU32("llama.feed_forward_length", s.n_ff);
  w.SetU32("llama.attention.head_count", s.n_head);
  w.SetU32("llama.attention.head_count_kv", s.n_head_kv);
  w.SetU32("llama.rope.dimension_count", head_dim);
  w.SetF32("llama.attention.layer_norm_rms_epsilon", 1e-5f);
  w.SetF32("llama.rope.freq_base", 500000.0f);
  AddVocab(w, s.n_vocab);

  uint64_t seed = 1;
  auto matrix = [&](const std::string& name, const std::string& role, int64_t n_in, int64_t n_out, float sd) {
    const DType t = ParseType(type, role);
    const std::vector<uint8_t> bytes = RandomMatrix(t, n_in, n_out, sd, seed++);
    w.AddTensor(name, t, {n_in, n_out}, bytes.data(), bytes.size());
    std::fprintf(stderr, "\r%-40s", name.c_str());
  };
  auto ones = [&](const std::string& name, int64_t n) {
    const std::vector<float> v(n, 1.0f);
    w.AddTensor(name, DType::kF32, {n}, v.data(), v.size() * sizeof(float));
  };
  const float in_sd = 1.0f / std::sqrt(static_cast<float>(s.n_embd));
  matrix("token_embd.weight", "token_embd", s.n_embd, s.n_vocab, 0.05f);
  ones("output_norm.weight", s.n_embd);
  matrix("output.weight", "output", s.n_embd, s.n_vocab, in_sd);
  for (int il = 0; il < s.n_layer; ++il) {
    const std::string b = "blk." + std::to_string(il) + ".";
    ones(b + "attn_norm.weight", s.n_embd);
    matrix(b + "attn_q.weight", "attn_q", s.n_embd, s.n_head * head_dim, in_sd);
    matrix(b + "attn_k.weight", "attn_k", s.n_embd, s.n_head_kv * head_dim, in_sd);
    matrix(b + "attn_v.weight", "attn_v", s.n_embd, s.n_head_kv * head_dim, in_sd);
    matrix(b + "attn_output.weight", "attn_output", s.n_head * head_dim, s.n_embd, in_sd);
    ones(b + "ffn_norm.weight", s.n_embd);
    matrix(b + "ffn_gate.weight", "ffn_gate", s.n_embd, s.n_ff, in_sd);
    matrix(b + "ffn_up.weight", "ffn_up", s.n_embd, s.n_ff, in_sd);
    matrix(b + "ffn_down.weight", "ffn_down", s.n_ff, s.n_embd, 1.0f / std::sqrt(static_cast<float>(s.n_ff)));
  }
  std::fprintf(stderr, "\rwriting %s\n", out.c_str());
  w.Write(out);
  return 0;
}

}  // namespace
}  // namespace kakeya

int main(int argc, char** argv) {
  try {
    return kakeya::Main(argc, argv);
  } catch (const kakeya::Error& e) {
    std::fprintf(stderr, "make-bench-model: error: %s\n", e.what());
    return 2;
  }
}
