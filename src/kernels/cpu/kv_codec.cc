#include "kernels/cpu/kv_codec.h"

#include <cmath>
#include <cstring>

#include "kernels/cpu/dequant.h"

namespace kakeya {
namespace {

constexpr int kMaxHeadDim = 512;
// The outer Lloyd-Max level of a unit Gaussian, which the integer levels
// put at 127: rotated coordinates over their RMS are scaled by 127 over it.
constexpr float kLloydMaxOuter4 = 2.732589571f;
constexpr float kLloydMaxOuter3 = 2.151945705f;

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

// The index of the level nearest v among n ascending ones: the midpoints
// are the boundaries.
int NearestLevel(float v, const int8_t* levels, int n) {
  int best = 0;
  for (int k = 1; k < n; ++k) {
    if (v > 0.5f * (levels[k - 1] + levels[k])) best = k;
  }
  return best;
}

// Where coordinate d of position j lies (kv_codec.h): its chunk, and its
// index k in the chunk.
struct CodePlace {
  int chunk, k;
};
CodePlace PlaceOf(CodecSide side, int d, int j) {
  if (side == CodecSide::kKeys) return {d / 4, 4 * j + d % 4};
  return {d / 16 * 4 + j / 4, 4 * (d % 16) + j % 4};
}

int ChunkCode(const uint8_t* chunk, int bits, int k) {
  if (bits == 4) return chunk[k % 32] >> 4 * (k / 32) & 15;
  uint64_t high;
  std::memcpy(&high, chunk + 16, sizeof high);
  return (chunk[k % 16] >> 2 * (k / 16) & 3) | int(high >> k & 1) << 2;
}

// Replaces code k of a chunk, touching no other code's bits.
void SetChunkCode(uint8_t* chunk, int bits, int k, int code) {
  if (bits == 4) {
    const int shift = 4 * (k / 32);
    chunk[k % 32] = static_cast<uint8_t>((chunk[k % 32] & ~(15 << shift)) | code << shift);
    return;
  }
  const int shift = 2 * (k / 16);
  chunk[k % 16] = static_cast<uint8_t>((chunk[k % 16] & ~(3 << shift)) | (code & 3) << shift);
  uint64_t high;
  std::memcpy(&high, chunk + 16, sizeof high);
  high = (high & ~(uint64_t(1) << k)) | uint64_t(code >> 2) << k;
  std::memcpy(chunk + 16, &high, sizeof high);
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
  const int8_t* levels = CodecLevels(bits);
  const int n_levels = 1 << bits;
  const float per_rms = levels[n_levels - 1] / (bits == 4 ? kLloydMaxOuter4 : kLloydMaxOuter3);
  uint8_t* codes = block + 2 * kCodedBlock;
  double dot = 0, norm = 0;  // the least-squares scale for these codes
  for (int d = 0; d < head_dim; ++d) {
    const int code = rms > 0 ? NearestLevel(r[d] / rms * per_rms, levels, n_levels) : n_levels / 2;
    const CodePlace at = PlaceOf(side, d, j);
    SetChunkCode(codes + at.chunk * ChunkBytes(bits), bits, at.k, code);
    dot += double(r[d]) * levels[code];
    norm += double(levels[code]) * levels[code];
  }
  const uint16_t scale = F32ToF16(rms > 0 ? static_cast<float>(dot / norm / kCodecScaleUnit) : 0.0f);
  std::memcpy(block + 2 * j, &scale, sizeof scale);
}

void CodecDecodeRotated(const uint8_t* block, int j, int head_dim, int bits, CodecSide side, float* x_rotated) {
  uint16_t scale_bits;
  std::memcpy(&scale_bits, block + 2 * j, sizeof scale_bits);
  const float scale = F16ToF32(scale_bits) * kCodecScaleUnit;
  const uint8_t* codes = CodecBlockCodes(block);
  for (int d = 0; d < head_dim; ++d) {
    const CodePlace at = PlaceOf(side, d, j);
    x_rotated[d] = scale * CodecLevels(bits)[ChunkCode(codes + at.chunk * ChunkBytes(bits), bits, at.k)];
  }
}

void UnpackChunk(const uint8_t* chunk, int bits, uint8_t (&codes)[kChunkCodes]) {
  for (int k = 0; k < kChunkCodes; ++k) codes[k] = static_cast<uint8_t>(ChunkCode(chunk, bits, k));
}

}  // namespace kakeya
