// Which type each tensor of a bench model gets for a --type of
// make-bench-model (make_bench_model.cc): one type for every matrix, or the
// Q4_K_M / Q5_K_M mixes, which for the llama bench model keep this tool's
// own recipe and for the mixtures follow llama-quantize
// (src/llama-quant.cpp: use_more_bits, tensor_type_fallback and the rules for
// 8 experts), so that both engines run the same file types.
#pragma once

#include <cstdint>
#include <string>

#include "tensor/dtype.h"

namespace kakeya {

// Exits through Error unless `type` is F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0,
// Q5_1, Q4_K_M or Q5_K_M.
void CheckType(const std::string& type);
// The llama bench model's type for a matrix of `role` ("attn_v", "output", ...).
DType ParseType(const std::string& type, const std::string& role);
// general.file_type (llama.cpp's llama_ftype) of a --type.
uint32_t FileType(const std::string& type);

// A matrix's role in the mixtures' type choice.
enum class Role { kTokenEmbd, kOutput, kAttnQ, kAttnK, kAttnV, kAttnOut, kFfnGateUp, kFfnDown, kRouter };

// llama-quantize's choice for the mixtures, tensor by tensor in file order
// (attn_v tensors are counted as they are picked).
struct MoeTypePicker {
  std::string type;
  int n_layer = 0, n_expert = 0, n_attn_v = 0;  // n_attn_v: attn_v tensors in the file
  bool tied = false;
  int i_attn_v = 0;  // attn_v tensors typed so far (llama-quantize's i_attention_wv)

  DType Pick(Role role, int il, int64_t n_in);
};

}  // namespace kakeya
