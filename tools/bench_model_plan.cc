// See bench_model_plan.h.
#include "bench_model_plan.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>
#include <random>
#include <thread>
#include <unistd.h>

#include "base/error.h"
#include "bench_model_types.h"
#include "kernels/cpu/dequant.h"

namespace kakeya {
namespace {

// Fills n_rows rows of n_in N(mean, stddev) values converted to `type` into
// `out`, row by row on all cores (a 1.25B model is ~5 G random numbers).
void RandomRows(DType type, int64_t n_in, int64_t n_rows, float mean, float stddev, uint64_t seed,
                uint8_t* out) {
  const int64_t row_bytes = RowBytes(type, n_in);
  const int n_threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  std::vector<std::thread> threads;
  for (int t = 0; t < n_threads; ++t) {
    threads.emplace_back([&, t] {
      std::vector<float> row(n_in);
      for (int64_t r = t; r < n_rows; r += n_threads) {
        std::mt19937_64 rng(seed * 1000003 + r);
        std::normal_distribution<float> normal(mean, stddev);
        for (float& v : row) v = normal(rng);
        QuantizeRow(type, row.data(), out + r * row_bytes, n_in);
      }
    });
  }
  for (auto& th : threads) th.join();
}

}  // namespace

void Plan::Random(const std::string& name, DType type, std::vector<int64_t> ne, float mean, float sd,
                  double active) {
  const uint64_t seed = seed_++;
  int64_t rows = 1;
  for (size_t d = 1; d < ne.size(); ++d) rows *= ne[d];
  const int64_t n_in = ne[0];
  const bool matrix = ne.size() >= 2;
  Add(name, type, std::move(ne), active, [=, this](uint8_t* out) {
    if (matrix) Progress(name);
    RandomRows(type, n_in, rows, mean, sd, seed, out);
  });
}

void Plan::Vector(const std::string& name, int64_t n, float value, float sd) {
  if (sd != 0.0f) return Random(name, DType::kF32, {n}, value, sd);
  Values(name, std::vector<float>(n, value));
}

void Plan::Values(const std::string& name, std::vector<float> v) {
  const int64_t n = static_cast<int64_t>(v.size());
  Add(name, DType::kF32, {n}, 1.0, [v = std::move(v)](uint8_t* out) {
    std::memcpy(out, v.data(), v.size() * sizeof(float));
  });
}

void Plan::Ints(const std::string& name, std::vector<int64_t> ne, std::vector<int32_t> v, double active) {
  Add(name, DType::kI32, std::move(ne), active, [v = std::move(v)](uint8_t* out) {
    std::memcpy(out, v.data(), v.size() * sizeof(int32_t));
  });
}

void Plan::Add(const std::string& name, DType type, std::vector<int64_t> ne, double active,
               std::function<void(uint8_t*)> fill) {
  double n = 1;
  for (int64_t d : ne) n *= static_cast<double>(d);
  const double nbytes = n / TraitsOf(type).block_elems * TraitsOf(type).block_bytes;
  w_.AddTensorFilledAtWrite(name, type, std::move(ne), std::move(fill));
  ++n_tensors_;
  params_ += n;
  bytes_ += nbytes;
  active_params_ += active * n;
  active_bytes_ += active * nbytes;
}

void Plan::Progress(const std::string& name) {
  if (isatty(STDERR_FILENO)) std::fprintf(stderr, "\r[%4d/%4d] %-40s", ++written_, n_tensors_, name.c_str());
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

float InvSqrt(int64_t n) { return 1.0f / std::sqrt(static_cast<float>(n)); }

void AddFileType(GgufWriter& w, const std::string& type) {
  w.SetU32("general.file_type", FileType(type));
  if (type != "F32" && type != "F16" && type != "BF16") w.SetU32("general.quantization_version", 2);
}

void AddMoeCommon(GgufWriter& w, const std::string& type, int n_vocab) {
  AddFileType(w, type);
  AddVocab(w, n_vocab);
  w.SetString("tokenizer.ggml.pre", "default");
  w.SetBool("tokenizer.ggml.add_eos_token", false);
}

int CopyVocab(GgufWriter& w, const std::string& path) {
  const std::unique_ptr<GgufFile> file = GgufFile::Open(path);
  for (const GgufKv& kv : file->metadata()) {
    if (kv.key.starts_with("tokenizer.")) w.SetValue(kv.key, kv.value);
  }
  const GgufValue* tokens = file->Find("tokenizer.ggml.tokens");
  if (tokens == nullptr || tokens->type != GgufType::kArray) Fail(path, ": no tokenizer.ggml.tokens to copy");
  return static_cast<int>(tokens->count);
}

}  // namespace kakeya
