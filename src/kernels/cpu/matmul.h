// Matrix multiplication of a stored weight matrix by a small batch of
// activation rows: the kernel that decides whether speculation pays on a CPU
// (DESIGN.md "Performance model").
//
// Contract (DESIGN.md invariant 1): the result for activation row r is
// bit-identical whatever n_rows is and whatever ThreadPool size is used.
// Threads split output columns; each (row, column) dot product reduces in a
// fixed order; activation rows that get quantized for integer dot products are
// quantized one row at a time.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "base/thread_pool.h"
#include "tensor/dtype.h"

namespace kakeya {

// A linear layer's weight as stored in GGUF: n_out rows (GGUF ne[1]) of n_in
// elements (GGUF ne[0]), each row RowBytes(type, n_in) bytes, used in place.
struct WeightMatrix {
  DType type = DType::kF32;
  int64_t n_in = 0;
  int64_t n_out = 0;
  const void* data = nullptr;
  int64_t row_bytes = 0;
};

// Scratch bytes MatMul needs for n_rows activation rows of this weight (e.g.
// the rows quantized to Q8). Callers allocate once per session, not per step.
size_t MatMulScratchBytes(DType type, int64_t n_in, int64_t n_rows);

// y[r * n_out + o] = sum_i W[o, i] * x[r * n_in + i]  for r < n_rows, o < n_out.
// x: F32 [n_rows, n_in], y: F32 [n_rows, n_out]. Does not allocate.
// `scratch` holds at least MatMulScratchBytes(w.type, w.n_in, n_rows) bytes,
// 64-byte aligned.
void MatMul(const WeightMatrix& w, const float* x, int64_t n_rows, float* y, void* scratch,
            ThreadPool& pool);

// SIMD targets. MatMul runs on the best target this CPU supports, unless the
// environment variable KAKEYA_CPU_TARGET (read once, at the first MatMul) or
// ForceCpuTarget names another. Names, best first:
//   "avx512_vnni"  AVX-512 + VNNI (Highway AVX3_DL: Ice Lake, Zen 4/5)
//   "avx512"       AVX-512 F/BW/DQ/VL (Highway AVX3: Skylake-X)
//   "avx2"         AVX2 + FMA + F16C (Haswell, Zen 1-3)
//   "neon"         Arm (portable kernels)
//   "scalar"       portable reference (Highway SCALAR/EMU128), always available
// Results are bit-identical across batch sizes and thread counts within one
// target, and may differ slightly between targets (different vector widths).
// An unknown or unsupported name throws Error listing the valid ones.

// The target MatMul dispatches to now, e.g. "avx512_vnni".
const char* ActiveCpuTarget();
// The targets compiled in and supported by this CPU, best first.
std::vector<std::string> SupportedCpuTargets();
// Makes MatMul use `name` from now on (tests run every target this way).
void ForceCpuTarget(const std::string& name);

}  // namespace kakeya
