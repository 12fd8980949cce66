// Container constants and encodings shared by the GGUF reader and writer
// (docs/formats/gguf.md). Internal to src/gguf.
#pragma once

#include <cstdint>

#include "gguf/gguf.h"

namespace kakeya::gguf_format {

constexpr uint64_t kMaxStringBytes = uint64_t{1} << 30;  // llama.cpp's limit
constexpr uint64_t kMaxTensorNameBytes = 63;             // GGML_MAX_NAME (64) incl. NUL
constexpr uint32_t kMaxDims = 4;                         // GGML_MAX_DIMS
constexpr uint32_t kDefaultAlignment = 32;
constexpr std::string_view kAlignmentKey = "general.alignment";

// Bytes of one packed element of a numeric or BOOL type; 0 for strings, arrays
// and unknown ids.
inline uint64_t PackedBytes(GgufType t) {
  switch (t) {
    case GgufType::kUint8:
    case GgufType::kInt8:
    case GgufType::kBool: return 1;
    case GgufType::kUint16:
    case GgufType::kInt16: return 2;
    case GgufType::kUint32:
    case GgufType::kInt32:
    case GgufType::kFloat32: return 4;
    case GgufType::kUint64:
    case GgufType::kInt64:
    case GgufType::kFloat64: return 8;
    case GgufType::kString:
    case GgufType::kArray: return 0;
  }
  return 0;
}

// x rounded up to a multiple of `alignment`; x is at most a file size, so this
// cannot overflow.
inline uint64_t AlignUp(uint64_t x, uint64_t alignment) {
  return (x + alignment - 1) / alignment * alignment;
}

}  // namespace kakeya::gguf_format
