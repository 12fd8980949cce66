// Runs one packed MatMul per packed weight type and row count (1 and 4: a
// 1-row and a 4-row tile on every target) on one thread, so that an
// instruction counter can attribute the tiles' executed instructions to the
// weight bytes they read: scripts/tile-instructions.py --dynamic runs it
// under valgrind (x86) or qemu's execution log (ARM). Random weight bytes:
// the instruction stream of a tile does not depend on the values.
//
//   tile-probe    (KAKEYA_CPU_TARGET picks the target; prints the bytes per run)
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <random>
#include <vector>

#include "base/thread_pool.h"
#include "kernels/cpu/matmul.h"
#include "tensor/dtype.h"

namespace {
// 64-byte aligned bytes, as PackWeights and MatMul's scratch want them.
std::unique_ptr<uint8_t, decltype(&std::free)> Aligned(size_t bytes) {
  return {static_cast<uint8_t*>(std::aligned_alloc(64, (bytes + 63) / 64 * 64)), &std::free};
}
}  // namespace

int main() {
  using namespace kakeya;
  constexpr int64_t kOut = 16;     // one group of a packed layout
  constexpr int64_t kIn = 256 * 8;  // 8 super-blocks, 64 blocks
  const DType types[] = {DType::kQ8_0, DType::kQ4_0, DType::kQ4_1, DType::kQ5_0,
                         DType::kQ5_1, DType::kQ4_K, DType::kQ5_K, DType::kQ6_K};
  ThreadPool pool(1);
  std::mt19937 rng(1);
  std::vector<float> x(4 * kIn);
  for (float& v : x) v = std::uniform_real_distribution<float>(-1, 1)(rng);
  std::vector<float> y(4 * kOut);
  std::printf("target %s\n", ActiveCpuTarget());
  for (DType type : types) {
    const int64_t row_bytes = RowBytes(type, kIn);
    std::vector<uint8_t> raw(kOut * row_bytes);
    for (uint8_t& b : raw) b = static_cast<uint8_t>(rng() & 0x3F);  // small F16 scales: no NaN or infinity
    const WeightMatrix rows{type, kIn, kOut, raw.data(), row_bytes, WeightLayout::kRows};
    const auto packed = Aligned(PackedBytes(rows));
    const WeightMatrix w = PackWeights(rows, packed.get());
    const auto scratch = Aligned(MatMulScratchBytes(type, kIn, 4));
    for (int n_rows : {1, 4}) MatMul(w, x.data(), n_rows, y.data(), scratch.get(), pool);
    std::printf("%s packed bytes %zu\n", std::string(NameOf(type)).c_str(), PackedBytes(rows));
  }
  return 0;
}
