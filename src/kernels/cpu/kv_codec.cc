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

void CodecEncode(const float* x, int head_dim, int bits, uint8_t* out) {
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
  if (bits == 4) {
    for (int i = 0; i < head_dim; i += 2) out[i / 2] = static_cast<uint8_t>(codes[i] | codes[i + 1] << 4);
  } else {
    for (int i = 0; i < head_dim; i += 8) {  // 8 codes in 3 bytes, code k at bits 3k .. 3k + 2
      uint32_t packed = 0;
      for (int k = 0; k < 8; ++k) packed |= uint32_t(codes[i + k]) << (3 * k);
      uint8_t* p = out + i / 8 * 3;
      p[0] = static_cast<uint8_t>(packed);
      p[1] = static_cast<uint8_t>(packed >> 8);
      p[2] = static_cast<uint8_t>(packed >> 16);
    }
  }
  std::memcpy(out + head_dim * bits / 8, &scale, sizeof scale);
}

void CodecDecodeRotated(const uint8_t* in, int head_dim, int bits, float* x_rotated) {
  uint16_t scale_bits;
  std::memcpy(&scale_bits, in + head_dim * bits / 8, sizeof scale_bits);
  const float scale = F16ToF32(scale_bits);
  const float* levels = CodecLevels(bits);
  if (bits == 4) {
    for (int i = 0; i < head_dim; i += 2) {
      x_rotated[i] = scale * levels[in[i / 2] & 0xF];
      x_rotated[i + 1] = scale * levels[in[i / 2] >> 4];
    }
  } else {
    for (int i = 0; i < head_dim; i += 8) {
      const uint8_t* p = in + i / 8 * 3;
      const uint32_t packed = p[0] | uint32_t(p[1]) << 8 | uint32_t(p[2]) << 16;
      for (int k = 0; k < 8; ++k) x_rotated[i + k] = scale * levels[(packed >> (3 * k)) & 7];
    }
  }
}

}  // namespace kakeya
