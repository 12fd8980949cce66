// Matrix multiplication of a stored weight matrix by a small batch of
// activation rows: the kernel that decides whether speculation pays on a CPU
// (docs/design.md, "Performance model").
//
// Contract (docs/design.md, invariant 1): the result for activation row r is
// bit-identical whatever n_rows is and whatever ThreadPool size is used.
// Threads split output columns; each (row, column) dot product reduces in a
// fixed order; activation rows that get quantized for integer dot products are
// quantized one row at a time.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "base/thread_pool.h"
#include "tensor/dtype.h"

namespace kakeya {

// How a weight matrix's bytes are arranged.
enum class WeightLayout : uint8_t {
  // As stored in GGUF: n_out rows of n_in elements, RowBytes(type, n_in) each.
  kRows,
  // Q8_0 repacked by PackWeights: per group of 16 output columns and per
  // 32-element block, the 16 F16 scales, then 8 chunks of 64 bytes, chunk j
  // holding quants 4j..4j+3 of each column (column-major within the chunk),
  // each stored as q + 128 (unsigned). One 64-byte load meets 16 columns, so
  // one VNNI instruction does 64 multiply-adds for one activation row, and the
  // loaded chunk serves every row of the batch (see matmul_packed.cc).
  kQ8_0x16,
  // Q4_0 the same way: per group and block, the 16 F16 scales, then 4 chunks
  // of 64 bytes, chunk j holding GGUF's qs[4j .. 4j + 3] of each column (the
  // nibbles of elements 4j.. and 16 + 4j..), as they are.
  kQ4_0x16,
  // Q4_1, Q5_0, Q5_1 likewise, with their mins and fifth bits in each block
  // (layouts in matmul_packed.cc).
  kQ4_1x16,
  kQ5_0x16,
  kQ5_1x16,
  // Q4_K / Q5_K / Q6_K repacked the same way, per 256-element super-block
  // (layouts in matmul_packed_kquant.cc).
  kQ4_Kx16,
  kQ5_Kx16,
  kQ6_Kx16,
};

// A linear layer's weight: n_out output columns (GGUF ne[1]) of n_in inputs
// (GGUF ne[0]); row_bytes = RowBytes(type, n_in) in either layout.
struct WeightMatrix {
  DType type = DType::kF32;
  int64_t n_in = 0;
  int64_t n_out = 0;
  const void* data = nullptr;
  int64_t row_bytes = 0;
  WeightLayout layout = WeightLayout::kRows;
};

// The packed layout for a weight type (kRows: none).
WeightLayout PackedLayoutOf(DType type);
// Whether w is in GGUF's layout and PackWeights has a faster one for it on
// the active CPU target (every quantized type).
bool CanPack(const WeightMatrix& w);
// Bytes of w's packed copy (the last group of 16 columns is zero-padded).
size_t PackedBytes(const WeightMatrix& w);
// Rearranges w (kRows, PackedLayoutOf(w.type) != kRows) into its packed
// layout at dst (PackedBytes(w) bytes, 64-byte aligned) and returns the
// matrix that reads dst. The integer sums are the same as for w, so results
// differ from w's only by float rounding order; for a packed layout every
// target gives the same bits.
WeightMatrix PackWeights(const WeightMatrix& w, void* dst);

// w restricted to its first n outputs (n <= w.n_out): a packed layout keeps
// 16 outputs per group, one group after another, so n must be a multiple of
// 16 unless it is all of them. The outputs are w's, with the same bits.
WeightMatrix FirstOutputs(const WeightMatrix& w, int64_t n);

// Scratch bytes MatMul needs for n_rows activation rows of this weight (e.g.
// the rows quantized to Q8). Callers allocate once per session, not per step.
size_t MatMulScratchBytes(DType type, int64_t n_in, int64_t n_rows);

// y[r * n_out + o] = sum_i W[o, i] * x[r * n_in + i]  for r < n_rows, o < n_out.
// x: F32 [n_rows, n_in], y: F32 [n_rows, n_out]. Does not allocate.
// `scratch` holds at least MatMulScratchBytes(w.type, w.n_in, n_rows) bytes,
// 64-byte aligned.
void MatMul(const WeightMatrix& w, const float* x, int64_t n_rows, float* y, void* scratch,
            ThreadPool& pool);

// Several matrices applied to the same activation rows (Q/K/V, gate/up): the
// rows are quantized once and all matrices' columns share one pool run, so a
// layer waits at fewer barriers. Each y is bit-identical to MatMul's. The
// matrices have the same n_in; scratch as for MatMul, sized for the largest
// of their types.
struct MatMulOutput {
  const WeightMatrix* w;
  float* y;  // F32 [n_rows, w->n_out]
};
void MatMulSharedInput(std::span<const MatMulOutput> outs, const float* x, int64_t n_rows, void* scratch,
                       ThreadPool& pool);

// Several matrices, each applied to its own range of the activation rows x
// (F32 [n_rows, n_in]): a mixture's experts, each on the rows routed to it.
// Each row is quantized once, and all matrices' columns share one pool run,
// so every expert's weights are streamed once for all of its rows. Group g
// writes y (F32 [g.n_rows, g.w->n_out]) bit-identical to MatMul(*g.w,
// x + g.first_row * n_in, g.n_rows, ...). The matrices have the same n_in;
// scratch: MatMulScratchBytes for the largest of their types and n_rows rows.
struct MatMulGroup {
  const WeightMatrix* w;
  int64_t first_row;
  int64_t n_rows;
  float* y;
};
void MatMulGroups(std::span<const MatMulGroup> groups, const float* x, int64_t n_rows, void* scratch,
                  ThreadPool& pool);

// SIMD targets. MatMul runs on the best target this CPU supports, unless the
// environment variable KAKEYA_CPU_TARGET (read once, at the first MatMul) or
// ForceCpuTarget names another. Names, best first:
//   "avx512_vnni"  AVX-512 + VNNI (Highway AVX3_DL: Ice Lake, Zen 4/5)
//   "avx512"       AVX-512 F/BW/DQ/VL (Highway AVX3: Skylake-X)
//   "avx2"         AVX2 + FMA + F16C (Haswell, Zen 1-3)
//   "neon_i8mm"    Arm NEON + dot product + i8mm (smmla: Apple M2+, Graviton 3+)
//   "neon_dotprod" Arm NEON + dot product (sdot: Apple M1+, Graviton 2+)
//   "neon"         Arm NEON (every ARMv8-A core)
//   "scalar"       portable reference (Highway SCALAR/EMU128), always available
// Results are bit-identical across batch sizes and thread counts within one
// target, and may differ slightly between targets (different vector widths).
// An unknown or unsupported name throws Error listing the valid ones.

// The target MatMul dispatches to now, e.g. "avx512_vnni".
const char* ActiveCpuTarget();
// The instruction set the row-wise operations (ops.h) run with under the
// active target: they are compiled once per x86 vector width and follow the
// target, so forcing a target tests its operations as well as its MatMul.
enum class VectorIsa { kAvx512, kAvx2, kBaseline };
VectorIsa ActiveVectorIsa();
// The targets compiled in and supported by this CPU, best first.
std::vector<std::string> SupportedCpuTargets();
// Makes MatMul use `name` from now on (tests run every target this way).
void ForceCpuTarget(const std::string& name);

}  // namespace kakeya
