#include "kernels/cpu/kv_types.h"

#include <cstring>

#include "base/error.h"
#include "kernels/cpu/dequant.h"
#include "kernels/cpu/kv_codec.h"
#include "tensor/dtype.h"

namespace kakeya {
namespace {

struct KvTypeInfo {
  KvType type;
  std::string_view name;
  DType dtype;  // the stored elements' ggml type; F32 for the codec (not a ggml type)
  int codec_bits;
};

constexpr KvTypeInfo kInfo[] = {
    {KvType::kF32, "f32", DType::kF32, 0},         {KvType::kF16, "f16", DType::kF16, 0},
    {KvType::kBF16, "bf16", DType::kBF16, 0},      {KvType::kQ8_0, "q8_0", DType::kQ8_0, 0},
    {KvType::kQ4_0, "q4_0", DType::kQ4_0, 0},      {KvType::kKakeya4, "kakeya4", DType::kF32, 4},
    {KvType::kKakeya3, "kakeya3", DType::kF32, 3},
};

const KvTypeInfo& Info(KvType t) { return kInfo[static_cast<int>(t)]; }

}  // namespace

std::string_view KvTypeName(KvType t) { return Info(t).name; }

std::optional<KvType> ParseKvType(std::string_view name) {
  for (const KvTypeInfo& i : kInfo) {
    if (i.name == name) return i.type;
  }
  return std::nullopt;
}

std::string KvTypeNames() {
  std::string out;
  for (const KvTypeInfo& i : kInfo) out += std::string(out.empty() ? "" : ", ") + std::string(i.name);
  return out;
}

bool IsCodec(KvType t) { return Info(t).codec_bits > 0; }

std::string KvTypeUnfit(KvType t, int head_dim) {
  if (IsCodec(t) && !CodecFitsHead(head_dim)) {
    return "heads of " + std::to_string(head_dim) + " values: the codec's rotation needs a power of two, 32 .. 512";
  }
  if (!IsCodec(t) && head_dim % TraitsOf(Info(t).dtype).block_elems != 0) {
    return "heads of " + std::to_string(head_dim) + " values: " + std::string(Info(t).name) + " needs a multiple of " +
           std::to_string(TraitsOf(Info(t).dtype).block_elems);
  }
  return "";
}

int64_t KvHeadBytes(KvType t, int head_dim) {
  return IsCodec(t) ? CodecBytes(head_dim, Info(t).codec_bits) : RowBytes(Info(t).dtype, head_dim);
}

int CodecBits(KvType t) { return Info(t).codec_bits; }

void EncodeKvHead(KvType t, const float* x, int head_dim, uint8_t* out) {
  QuantizeRow(Info(t).dtype, x, out, head_dim);
}

void DecodeKvHead(KvType t, const uint8_t* in, int head_dim, float* out) {
  if (t == KvType::kF32) {
    std::memcpy(out, in, sizeof(float) * head_dim);
    return;
  }
  DequantizeRow(Info(t).dtype, in, out, head_dim);
}

}  // namespace kakeya
