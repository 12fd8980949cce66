// The tensors of a random-weight bench model (make_bench_model.cc and one
// file per architecture beside it), generated one at a time while the file is
// written (GgufWriter::AddTensorFilledAtWrite), so memory holds one tensor,
// not a model of several GB; and what they add up to.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "gguf/gguf.h"
#include "tensor/dtype.h"

namespace kakeya {

class Plan {
 public:
  explicit Plan(GgufWriter& w) : w_(w) {}

  // A matrix (2-D, or 3-D with ne[2] experts) of N(mean, sd) values, of
  // which `active` is read per decoded token (experts: used / n_expert).
  void Random(const std::string& name, DType type, std::vector<int64_t> ne, float mean, float sd,
              double active = 1.0);
  // An F32 vector: exactly `value` everywhere if sd == 0, else N(value, sd).
  void Vector(const std::string& name, int64_t n, float value, float sd = 0.0f);
  void Values(const std::string& name, std::vector<float> v);
  // An I32 tensor of shape ne (ggml order) holding `v`, read `active` per token.
  void Ints(const std::string& name, std::vector<int64_t> ne, std::vector<int32_t> v, double active);

  int n_tensors() const { return n_tensors_; }
  double params() const { return params_; }
  double bytes() const { return bytes_; }
  double active_params() const { return active_params_; }
  double active_bytes() const { return active_bytes_; }

 private:
  void Add(const std::string& name, DType type, std::vector<int64_t> ne, double active,
           std::function<void(uint8_t*)> fill);
  // "[  12/ 147] blk.0.ffn_up.weight" on a terminal, overwritten in place.
  void Progress(const std::string& name);

  GgufWriter& w_;
  uint64_t seed_ = 1;
  int n_tensors_ = 0, written_ = 0;
  double params_ = 0, bytes_ = 0, active_params_ = 0, active_bytes_ = 0;
};

// A SentencePiece filler vocabulary of n_vocab tokens (<unk>, <s>, </s>, the
// 256 byte tokens, then "▁pieceN"): enough for the tokenizer to load and for
// prompts to encode.
void AddVocab(GgufWriter& w, int n_vocab);
// general.file_type (and the quantization version) of a --type.
void AddFileType(GgufWriter& w, const std::string& type);
// general.file_type and the vocabulary, as the mixtures' files carry them.
void AddMoeCommon(GgufWriter& w, const std::string& type, int n_vocab);
// The tokenizer.* keys of the GGUF at `path` (--vocab-from); returns its vocabulary size.
int CopyVocab(GgufWriter& w, const std::string& path);
float InvSqrt(int64_t n);

}  // namespace kakeya
