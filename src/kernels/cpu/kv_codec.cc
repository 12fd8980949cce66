#include "kernels/cpu/kv_codec.h"

#include <cmath>
#include <cstring>

#include "kernels/cpu/dequant.h"

namespace kakeya {
namespace {

constexpr int kMaxHeadDim = 512;

// D's sign of coordinate i: a bit of SplitMix64's finalizer of i, so that the
// flips have no structure the Hadamard transform could line up with.
bool Flipped(int i) {
  uint64_t z = static_cast<uint64_t>(i) + 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return ((z ^ (z >> 31)) & 1) != 0;
}

void FlipSigns(float* x, int d) {
  for (int i = 0; i < d; ++i) {
    if (Flipped(i)) x[i] = -x[i];
  }
}

// The Walsh-Hadamard transform, in place, times 1/sqrt(d): butterflies of
// growing span, each pair (a, b) -> (a + b, a - b).
void Hadamard(float* x, int d) {
  for (int span = 1; span < d; span *= 2) {
    for (int i = 0; i < d; i += 2 * span) {
      for (int j = i; j < i + span; ++j) {
        const float a = x[j], b = x[j + span];
        x[j] = a + b;
        x[j + span] = a - b;
      }
    }
  }
  const float norm = 1.0f / std::sqrt(static_cast<float>(d));
  for (int i = 0; i < d; ++i) x[i] *= norm;
}

int NearestLevel(float v, const float* levels, int n) {
  int best = 0;
  for (int k = 1; k < n; ++k) {  // levels ascend: the midpoints are the boundaries
    if (v > 0.5f * (levels[k - 1] + levels[k])) best = k;
  }
  return best;
}

// A value position's group of 32 codes (kv_codec.h).
void PackValueGroup(const uint8_t* codes, int bits, uint8_t* out) {
  if (bits == 4) {
    for (int b = 0; b < 16; ++b) out[b] = static_cast<uint8_t>(codes[b] | codes[b + 16] << 4);
    return;
  }
  uint32_t high = 0;
  for (int b = 0; b < 8; ++b) {
    out[b] = 0;
    for (int s = 0; s < 4; ++s) out[b] |= static_cast<uint8_t>((codes[8 * s + b] & 3) << 2 * s);
  }
  for (int i = 0; i < 32; ++i) high |= uint32_t(codes[i] >> 2) << i;
  std::memcpy(out + 8, &high, sizeof high);
}

int ValueCodeAt(const uint8_t* codes, int bits, int i) {
  const uint8_t* group = codes + i / kCodeGroup * kCodeGroup * bits / 8;
  const int c = i % kCodeGroup;
  if (bits == 4) return c < 16 ? group[c] & 15 : group[c - 16] >> 4;
  uint32_t high;
  std::memcpy(&high, group + 8, sizeof high);
  return (group[c % 8] >> 2 * (c / 8) & 3) | (high >> c & 1) << 2;
}

// Position j's code of coordinate d in a block of keys (kv_codec.h); Set
// replaces it, touching no other position's bits.
int KeyCodeAt(const uint8_t* codes, int bits, int d, int j) {
  if (bits == 4) return codes[d / 2 * 16 + j] >> 4 * (d % 2) & 15;
  uint32_t low;
  uint16_t high;
  std::memcpy(&low, codes + 6 * d, sizeof low);
  std::memcpy(&high, codes + 6 * d + 4, sizeof high);
  return (low >> 2 * j & 3) | (high >> j & 1) << 2;
}
void SetKeyCode(uint8_t* codes, int bits, int d, int j, int code) {
  if (bits == 4) {
    uint8_t& byte = codes[d / 2 * 16 + j];
    byte = static_cast<uint8_t>(d % 2 == 0 ? (byte & 0xF0) | code : (byte & 0x0F) | code << 4);
    return;
  }
  uint32_t low;
  uint16_t high;
  std::memcpy(&low, codes + 6 * d, sizeof low);
  std::memcpy(&high, codes + 6 * d + 4, sizeof high);
  low = (low & ~(3u << 2 * j)) | uint32_t(code & 3) << 2 * j;
  high = static_cast<uint16_t>((high & ~(1u << j)) | uint32_t(code >> 2) << j);
  std::memcpy(codes + 6 * d, &low, sizeof low);
  std::memcpy(codes + 6 * d + 4, &high, sizeof high);
}

}  // namespace

bool CodecFitsHead(int head_dim) {
  return head_dim >= 32 && head_dim <= kMaxHeadDim && (head_dim & (head_dim - 1)) == 0;
}

int CodecBytes(int head_dim, int bits) { return head_dim * bits / 8 + 2; }

void CodecRotate(float* x, int head_dim) {
  FlipSigns(x, head_dim);
  Hadamard(x, head_dim);
}

void CodecUnrotate(float* x, int head_dim) {
  Hadamard(x, head_dim);
  FlipSigns(x, head_dim);
}

void CodecEncode(const float* x, int head_dim, int bits, CodecSide side, uint8_t* block, int j) {
  float r[kMaxHeadDim];
  std::memcpy(r, x, sizeof(float) * head_dim);
  CodecRotate(r, head_dim);
  double sum_sq = 0;
  for (int i = 0; i < head_dim; ++i) sum_sq += double(r[i]) * r[i];
  const float rms = static_cast<float>(std::sqrt(sum_sq / head_dim));
  const float* levels = CodecLevels(bits);
  const int n_levels = 1 << bits;
  uint8_t codes[kMaxHeadDim];
  double dot = 0, norm = 0;  // the least-squares scale for these codes
  for (int i = 0; i < head_dim; ++i) {
    codes[i] = static_cast<uint8_t>(rms > 0 ? NearestLevel(r[i] / rms, levels, n_levels) : n_levels / 2);
    dot += double(r[i]) * levels[codes[i]];
    norm += double(levels[codes[i]]) * levels[codes[i]];
  }
  const uint16_t scale = F32ToF16(rms > 0 ? static_cast<float>(dot / norm) : 0.0f);
  std::memcpy(block + 2 * j, &scale, sizeof scale);
  uint8_t* out = block + 2 * kCodedBlock;
  if (side == CodecSide::kKeys) {
    for (int d = 0; d < head_dim; ++d) SetKeyCode(out, bits, d, j, codes[d]);
  } else {
    out += j * head_dim * bits / 8;
    for (int g = 0; g < head_dim; g += kCodeGroup) PackValueGroup(codes + g, bits, out + g * bits / 8);
  }
}

void CodecDecodeRotated(const uint8_t* block, int j, int head_dim, int bits, CodecSide side, float* x_rotated) {
  uint16_t scale_bits;
  std::memcpy(&scale_bits, block + 2 * j, sizeof scale_bits);
  const float scale = F16ToF32(scale_bits);
  const float* levels = CodecLevels(bits);
  const uint8_t* codes = CodecBlockCodes(block);
  for (int d = 0; d < head_dim; ++d) {
    const int code = side == CodecSide::kKeys ? KeyCodeAt(codes, bits, d, j)
                                              : ValueCodeAt(CodecValueCodes(block, j, head_dim, bits), bits, d);
    x_rotated[d] = scale * levels[code];
  }
}

}  // namespace kakeya
