#include "bench_model_types.h"

#include "base/error.h"

namespace kakeya {
namespace {

// The types --type names directly (by their GGUF names); Q4_K_M and Q5_K_M
// mix types by role.
constexpr DType kSingleTypes[] = {DType::kF32,  DType::kF16,  DType::kBF16, DType::kQ8_0,
                                  DType::kQ4_0, DType::kQ4_1, DType::kQ5_0, DType::kQ5_1};

bool IsKMix(const std::string& s) { return s == "Q4_K_M" || s == "Q5_K_M"; }

}  // namespace

void CheckType(const std::string& s) {
  for (DType t : kSingleTypes) {
    if (NameOf(t) == s) return;
  }
  if (IsKMix(s)) return;
  Fail("unknown --type ", s, " (F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K_M, Q5_K_M)");
}

// llama: the recipe this tool has always used (kept so that bench files and
// results stay comparable): Q6_K for ffn_down, attn_v and output.
DType ParseType(const std::string& s, const std::string& role) {
  for (DType t : kSingleTypes) {
    if (NameOf(t) == s) return t;
  }
  if (IsKMix(s)) {
    if (role == "ffn_down" || role == "attn_v" || role == "output") return DType::kQ6_K;
    return s == "Q4_K_M" ? DType::kQ4_K : DType::kQ5_K;
  }
  Fail("unknown --type ", s, " (F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K_M, Q5_K_M)");
}

// llama.cpp's LLAMA_FTYPE_* for general.file_type.
uint32_t FileType(const std::string& s) {
  if (s == "F32") return 0;
  if (s == "F16") return 1;
  if (s == "Q4_0") return 2;
  if (s == "Q4_1") return 3;
  if (s == "Q8_0") return 7;
  if (s == "Q5_0") return 8;
  if (s == "Q5_1") return 9;
  if (s == "Q4_K_M") return 15;
  if (s == "Q5_K_M") return 17;
  return 32;  // BF16
}

namespace {

// llama-quantize's use_more_bits: the first and last eighth of the layers and
// every third one in between get more bits.
bool UseMoreBits(int i_layer, int n_layers) {
  return i_layer < n_layers / 8 || i_layer >= 7 * n_layers / 8 || (i_layer - n_layers / 8) % 3 == 2;
}

// llama-quantize's tensor_type_fallback: a matrix whose n_in is not a multiple
// of its type's block gets a 32-block type instead, or F16.
DType Fallback(DType t, int64_t n_in) {
  if (n_in % TraitsOf(t).block_elems == 0) return t;
  DType r = t;
  switch (t) {
    case DType::kQ4_K: r = DType::kQ5_0; break;
    case DType::kQ5_K: r = DType::kQ5_1; break;
    case DType::kQ6_K: r = DType::kQ8_0; break;
    default: break;
  }
  if (n_in % TraitsOf(r).block_elems != 0) r = DType::kF16;
  return r;
}

}  // namespace

DType MoeTypePicker::Pick(Role role, int il, int64_t n_in) {
  if (role == Role::kRouter) return DType::kF32;
  DType t = DType::kF32;
  if (!IsKMix(type)) {
    t = ParseType(type, "");
  } else {
    const bool q4 = type == "Q4_K_M";
    t = q4 ? DType::kQ4_K : DType::kQ5_K;
    switch (role) {
      case Role::kOutput: t = DType::kQ6_K; break;
      case Role::kTokenEmbd:
        if (tied) t = DType::kQ6_K;
        break;
      case Role::kAttnV:
        if (UseMoreBits(i_attn_v, n_attn_v)) t = DType::kQ6_K;
        if (n_expert == 8) t = DType::kQ8_0;
        ++i_attn_v;
        break;
      case Role::kAttnK:
        if (n_expert == 8) t = DType::kQ8_0;
        break;
      case Role::kAttnOut:
        if (n_expert == 8 && q4) t = DType::kQ5_K;
        break;
      case Role::kFfnDown:
        if (UseMoreBits(il, n_layer)) t = DType::kQ6_K;
        break;
      default: break;
    }
    // Output (and a tied token_embd) of a shape a 256-block does not fit: Q8_0.
    if ((role == Role::kOutput || (role == Role::kTokenEmbd && tied)) && n_in % 256 != 0) {
      t = DType::kQ8_0;
    }
  }
  return Fallback(t, n_in);
}

}  // namespace kakeya
