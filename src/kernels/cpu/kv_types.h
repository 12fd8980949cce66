// How a KV cache stores one head vector of a position's keys or values
// (-ctk / -ctv): llama.cpp's f32, f16, bf16, q8_0 and q4_0 (ggml's blocks of
// 32 along the head), and kakeya's codec at 4 or 3 bits a value (kv_codec.h),
// which a cache keeps for positions older than its exact window only
// (cache/kv_cache.h, ADR 0013).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace kakeya {

enum class KvType : uint8_t { kF32, kF16, kBF16, kQ8_0, kQ4_0, kKakeya4, kKakeya3 };

std::string_view KvTypeName(KvType t);
std::optional<KvType> ParseKvType(std::string_view name);
// "f32, f16, bf16, q8_0, q4_0, kakeya4, kakeya3", for help texts and errors.
std::string KvTypeNames();
bool IsCodec(KvType t);

// Why heads of `head_dim` values cannot be stored as t, or "" when they can:
// q8_0 and q4_0 need a multiple of 32, the codec a power of two, 32 .. 512.
std::string KvTypeUnfit(KvType t, int head_dim);

// Bytes of one head vector stored as t (the codec's: its share of a block).
int64_t KvHeadBytes(KvType t, int head_dim);
// The codec's bits per value; 0 for the other types.
int CodecBits(KvType t);

// One head vector, F32 [head_dim], into t's bytes, and back: the llama.cpp
// types (the codec codes vectors into blocks of positions: kv_codec.h).
void EncodeKvHead(KvType t, const float* x, int head_dim, uint8_t* out);
void DecodeKvHead(KvType t, const uint8_t* in, int head_dim, float* out);

}  // namespace kakeya
