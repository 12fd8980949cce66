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

// Bytes of one coded head vector of `bits` (4 or 3) per value: the packed
// levels, then the F16 scale.
int CodecBytes(int head_dim, int bits);

// x <- H D x, in place: D flips the signs of a fixed pseudo-random half of
// the coordinates, H is the Walsh-Hadamard transform scaled by 1/sqrt(d), so
// that the rotation is orthonormal. CodecUnrotate is its inverse, D H.
void CodecRotate(float* x, int head_dim);
void CodecUnrotate(float* x, int head_dim);

// Codes x (F32 [head_dim], not rotated) into `out` (CodecBytes).
void CodecEncode(const float* x, int head_dim, int bits, uint8_t* out);
// The coded vector, rotated: scale * level[code] per coordinate.
void CodecDecodeRotated(const uint8_t* in, int head_dim, int bits, float* x_rotated);

// The Lloyd-Max levels for a unit Gaussian, ascending: 16 for 4 bits, 8 for 3.
const float* CodecLevels(int bits);

}  // namespace kakeya
