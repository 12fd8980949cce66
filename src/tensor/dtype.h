// Element types of GGUF tensors, numbered as ggml_type (docs/formats/gguf.md 1.7).
#pragma once

#include <cstdint>
#include <string_view>

namespace kakeya {

enum class DType : uint32_t {
  kF32 = 0,
  kF16 = 1,
  kQ4_0 = 2,
  kQ4_1 = 3,
  kQ5_0 = 6,
  kQ5_1 = 7,
  kQ8_0 = 8,
  kQ8_1 = 9,
  kQ2_K = 10,
  kQ3_K = 11,
  kQ4_K = 12,
  kQ5_K = 13,
  kQ6_K = 14,
  kQ8_K = 15,
  kI8 = 24,
  kI16 = 25,
  kI32 = 26,
  kI64 = 27,
  kF64 = 28,
  kBF16 = 30,
};

struct DTypeTraits {
  std::string_view name;  // "F32", "Q4_K", ...; empty if the id is unknown
  int64_t block_elems;    // elements per block (1 for plain types)
  int64_t block_bytes;    // bytes per block
};

// Traits for a raw ggml type id; block_elems == 0 if the id is unknown or removed.
// Knows every id in docs/formats/gguf.md 1.7 (so the GGUF reader can size any
// tensor), not only the ones kakeya computes with.
DTypeTraits TraitsOf(uint32_t ggml_type);
inline DTypeTraits TraitsOf(DType t) { return TraitsOf(static_cast<uint32_t>(t)); }
inline std::string_view NameOf(DType t) { return TraitsOf(t).name; }

// Types the CPU kernels can multiply with (weights of a linear layer or embedding).
bool IsSupportedWeightType(DType t);

// Bytes of one row of n elements; n must be a multiple of block_elems.
inline int64_t RowBytes(DType t, int64_t n) {
  const DTypeTraits tr = TraitsOf(t);
  return n / tr.block_elems * tr.block_bytes;
}

}  // namespace kakeya
