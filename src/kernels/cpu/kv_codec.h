// kakeya's KV codec (ADR 0013), one head vector at a time: a fixed
// randomized Walsh-Hadamard rotation, then each coordinate quantized to the
// nearest level of the Lloyd-Max quantizer of a unit Gaussian (16 levels for
// kakeya4, 8 for kakeya3) times one F16 scale per vector, fitted by least
// squares. The rotation spreads an outlier channel over every coordinate
// and leaves coordinates close to Gaussian, for which those levels are the
// optimal scalar quantizer. Attention works in the rotated space: a rotated
// query dotted with rotated keys is the plain dot product, and values summed
// rotated are rotated back once per row (kernels/cpu/attention.cc).
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
// then their codes, laid out for attention's decoders (kv_read-inl.h), which
// get a vector of lanes from a byte load, a widening and a shift:
// - keys, coordinate-major: a vector holds one coordinate of the block's 16
//   positions, lane j position j, so that a query's scores for the block are
//   its coordinates times those vectors, summed, without a horizontal sum.
//   4 bits: 16 bytes per pair of coordinates (d, d + 1), byte j = code of
//   (d, j) | code of (d + 1, j) << 4. 3 bits: 6 bytes per coordinate, a
//   32-bit word with position j's low two bits at bits 2j, 2j + 1, then a
//   16-bit one with its third bit at bit j (little-endian).
// - values, position-major (each position's codes together, as attention
//   adds whole weighted vectors), in groups of 32 coordinates: 4 bits, 16
//   bytes, byte b = code b | code b + 16 << 4; 3 bits, 12 bytes, byte b
//   (b < 8) holding the low two bits of codes b, b + 8, b + 16 and b + 24
//   from bit 0 up, and a little-endian word of their third bits, code i's at
//   bit i.
inline constexpr int kCodedBlock = 16;
inline constexpr int kCodeGroup = 32;
enum class CodecSide : uint8_t { kKeys, kValues };

// Codes x (F32 [head_dim], not rotated) as position j of a block.
void CodecEncode(const float* x, int head_dim, int bits, CodecSide side, uint8_t* block, int j);
// Position j of a block, rotated: scale * level[code] per coordinate.
void CodecDecodeRotated(const uint8_t* block, int j, int head_dim, int bits, CodecSide side, float* x_rotated);
// Where a block's codes start, and a value position's codes.
inline const uint8_t* CodecBlockCodes(const uint8_t* block) { return block + 2 * kCodedBlock; }
inline const uint8_t* CodecValueCodes(const uint8_t* block, int j, int head_dim, int bits) {
  return CodecBlockCodes(block) + j * head_dim * bits / 8;
}

// The Lloyd-Max levels of a unit Gaussian, ascending: 16 for 4 bits, 8 for
// 3, from Lloyd's iteration in float64 (kv_types_test checks that they are
// its fixed point). In the header: attention keeps them in registers.
inline constexpr float kCodecLevels4[16] = {-2.732589571f, -2.069017227f, -1.618046386f, -1.256231197f,
                                            -0.942340456f, -0.656759119f, -0.388048299f, -0.128395030f,
                                            0.128395030f,  0.388048299f,  0.656759119f,  0.942340456f,
                                            1.256231197f,  1.618046386f,  2.069017227f,  2.732589571f};
inline constexpr float kCodecLevels3[8] = {-2.151945705f, -1.343909279f, -0.756005281f, -0.245094179f,
                                           0.245094179f,  0.756005281f,  1.343909279f,  2.151945705f};
inline const float* CodecLevels(int bits) { return bits == 4 ? kCodecLevels4 : kCodecLevels3; }

}  // namespace kakeya
