// kakeya's KV codec (ADR 0013), one head vector at a time: a fixed
// randomized Walsh-Hadamard rotation, then each coordinate quantized to the
// nearest of 16 (kakeya4) or 8 (kakeya3) integer levels, the Lloyd-Max
// quantizer of a unit Gaussian scaled so that its outer level is 127, times
// one F16 scale per vector, fitted by least squares. The rotation spreads an
// outlier channel over every coordinate and leaves coordinates close to
// Gaussian, for which those levels are the optimal scalar quantizer. Integer
// levels let attention take dot products on 8-bit integers (VNNI's
// vpdpbusd, AVX2's vpmaddubsw): queries and softmax weights are rounded to
// 8 bits and every target adds the same integers (kernels/cpu/kv_dots.h).
// Attention works in the rotated space: a rotated query dotted with rotated
// keys is the plain dot product, and values summed rotated are rotated back
// once per row (kernels/cpu/attention.cc).
#pragma once

#include <cstdint>

namespace kakeya {

// Whether a head of `head_dim` can be coded: a power of two from 32 to 512
// (the Hadamard transform's sizes).
bool CodecFitsHead(int head_dim);

// Bytes one coded head vector of `bits` (4 or 3) per value takes: its codes
// and its F16 scale.
int CodecBytes(int head_dim, int bits);

// x <- H D x, in place: D flips the signs of a fixed pseudo-random half of
// the coordinates, H is the Walsh-Hadamard transform scaled by 1/sqrt(d), so
// that the rotation is orthonormal. CodecUnrotate is its inverse, D H.
void CodecRotate(float* x, int head_dim);
void CodecUnrotate(float* x, int head_dim);

// A cache stores coded vectors in blocks of kCodedBlock positions of one
// head (kCodedBlock * CodecBytes bytes): the positions' F16 scales first,
// then their codes in chunks of 64, each chunk laid out so that one load and
// a shift give its 64 codes as bytes, in the order of the 32-bit lanes of a
// 4-way integer dot product (4 bytes per lane):
// - keys: chunk t holds coordinates 4t .. 4t + 3 of the block's 16
//   positions, code k = 4 j + c for position j, coordinate 4t + c, so that a
//   lane is a position's dot product with 4 query coordinates;
// - values: chunk 4u + g holds coordinates 16u .. 16u + 15 of positions
//   4g .. 4g + 3, code k = 4 i + p for coordinate 16u + i, position 4g + p,
//   so that a lane is a coordinate's sum over 4 weighted positions.
// A chunk of 4 bits is 32 bytes, byte i = code i | code i + 32 << 4. One of
// 3 bits is 24 bytes: 16 of low bits, byte i holding the low two bits of
// codes i, i + 16, i + 32 and i + 48 from bit 0 up, then a little-endian
// 64-bit word of third bits, code k's at bit k.
inline constexpr int kCodedBlock = 16;
inline constexpr int kChunkCodes = 64;
inline int ChunkBytes(int bits) { return kChunkCodes * bits / 8; }
enum class CodecSide : uint8_t { kKeys, kValues };

// Codes x (F32 [head_dim], not rotated) as position j of a block.
void CodecEncode(const float* x, int head_dim, int bits, CodecSide side, uint8_t* block, int j);
// Position j of a block, rotated: scale * level[code] / 128 per coordinate.
void CodecDecodeRotated(const uint8_t* block, int j, int head_dim, int bits, CodecSide side, float* x_rotated);
// Where a block's codes start.
inline const uint8_t* CodecBlockCodes(const uint8_t* block) { return block + 2 * kCodedBlock; }
// The 64 codes of a chunk, in code order.
void UnpackChunk(const uint8_t* chunk, int bits, uint8_t (&codes)[kChunkCodes]);

// The levels, ascending: round(127 * l / l_max) for the Lloyd-Max levels l
// of a unit Gaussian (kv_types_test derives them by Lloyd's iteration). The
// stored scale is 128 times the least-squares one (kCodecScaleUnit), which
// keeps F16 scales of small vectors out of its subnormal range.
inline constexpr int8_t kCodecLevels4[16] = {-127, -96, -75, -58, -44, -31, -18, -6, 6, 18, 31, 44, 58, 75, 96, 127};
inline constexpr int8_t kCodecLevels3[8] = {-127, -79, -45, -14, 14, 45, 79, 127};
inline const int8_t* CodecLevels(int bits) { return bits == 4 ? kCodecLevels4 : kCodecLevels3; }
inline constexpr float kCodecScaleUnit = 1.0f / 128;

}  // namespace kakeya
