// Conversion between stored element types and F32, bit-exact to the formulas
// in docs/formats/quantization.md (the reference for every SIMD kernel's tests).
#pragma once

#include <cstdint>

#include "tensor/dtype.h"

namespace kakeya {

float F16ToF32(uint16_t h);
uint16_t F32ToF16(float f);  // round to nearest even
float BF16ToF32(uint16_t h);
uint16_t F32ToBF16(float f);  // ggml's rounding (docs/formats/quantization.md 2.1)

// Dequantizes n elements (a multiple of the type's block size) starting at a
// block boundary. Supports every IsSupportedWeightType type.
void DequantizeRow(DType type, const void* src, float* dst, int64_t n);

// Quantizes n F32 values to `type` (reference quantizers, as llama.cpp's
// quantize_row_*_ref; the K-quants use a simpler scale search, see
// quantize.cc); used by tools (bench-model writer) and tests.
void QuantizeRow(DType type, const float* src, void* dst, int64_t n);

}  // namespace kakeya
