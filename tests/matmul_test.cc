// MatMul on every compiled+supported SIMD target: batch and thread invariance
// (memcmp), accuracy against a float64 reference, and the same bits on the
// portable target and each SIMD target (memcmp, ADR 0014).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "base/thread_pool.h"
#include "kernels/cpu/dequant.h"
#include "kernels/cpu/matmul.h"

namespace kakeya {
namespace {

const DType kTypes[] = {DType::kF32,  DType::kF16,  DType::kBF16, DType::kQ8_0,
                        DType::kQ4_0, DType::kQ4_1, DType::kQ5_0, DType::kQ5_1,
                        DType::kQ4_K, DType::kQ5_K, DType::kQ6_K};

constexpr int kMaxRows = 17;

struct Problem {
  DType type;
  int64_t n_in, n_out;
  std::vector<uint8_t> w_bytes;  // [n_out, RowBytes]
  std::vector<float> w;          // F32 [n_out, n_in]: the dequantized weights
  std::vector<float> x;          // F32 [kMaxRows, n_in]
  std::shared_ptr<uint8_t> packed;  // PackWeights' copy, when the test packs
  WeightMatrix matrix() const {
    const WeightMatrix rows{type, n_in, n_out, w_bytes.data(), RowBytes(type, n_in)};
    return packed ? PackWeights(rows, packed.get()) : rows;
  }
  void Pack() {
    const WeightMatrix rows{type, n_in, n_out, w_bytes.data(), RowBytes(type, n_in)};
    packed.reset(static_cast<uint8_t*>(std::aligned_alloc(64, (PackedBytes(rows) + 63) / 64 * 64)),
                 std::free);
  }
};

Problem MakeProblem(DType type, int64_t n_in, int64_t n_out, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.f, 1.f);
  Problem p{type, n_in, n_out, {}, {}, {}, {}};
  const int64_t row_bytes = RowBytes(type, n_in);
  p.w_bytes.resize(static_cast<size_t>(n_out * row_bytes));
  std::vector<float> src(n_in);
  for (int64_t o = 0; o < n_out; ++o) {
    for (auto& v : src) v = normal(rng) * 0.1f;
    QuantizeRow(type, src.data(), &p.w_bytes[o * row_bytes], n_in);
    if ((type == DType::kQ4_K || type == DType::kQ5_K || type == DType::kQ6_K) && o % 2 == 1) {
      // Arbitrary quants and sub-block scales (Q6_K: -128 included); d stays.
      for (int64_t b = 0; b < n_in / 256; ++b) {
        uint8_t* blk = &p.w_bytes[o * row_bytes + b * TraitsOf(type).block_bytes];
        const int begin = type == DType::kQ6_K ? 0 : 4;                  // after d, dmin
        const int end = type == DType::kQ6_K ? 208 : TraitsOf(type).block_bytes;  // Q6_K: before d
        for (int k = begin; k < end; ++k) blk[k] = static_cast<uint8_t>(o % 4 == 3 ? 0xFF : rng());
      }
    }
    // Every fourth column has every quant at its largest magnitude instead
    // (Q8_0 -128, the others all bits set): with row 7's activations (all
    // 127) the largest integer sums, where a kernel's int16 partial sums
    // would overflow first.
    if (TraitsOf(type).block_elems == 32 && o % 2 == 1) {
      // Arbitrary quants and fifth bits, after d (and m); Q8_0: -128 included,
      // which the quantizer never produces.
      const int64_t block_bytes = TraitsOf(type).block_bytes;
      const int begin = type == DType::kQ4_1 || type == DType::kQ5_1 ? 4 : 2;
      for (int64_t b = 0; b < n_in / 32; ++b) {
        uint8_t* blk = &p.w_bytes[o * row_bytes + b * block_bytes];
        for (int k = begin; k < block_bytes; ++k) {
          blk[k] = static_cast<uint8_t>(o % 4 != 3 ? rng() : type == DType::kQ8_0 ? 0x80 : 0xFF);
        }
      }
    }
  }
  p.w.resize(static_cast<size_t>(n_out * n_in));
  for (int64_t o = 0; o < n_out; ++o) {
    DequantizeRow(type, &p.w_bytes[o * row_bytes], &p.w[o * n_in], n_in);
  }
  p.x.resize(static_cast<size_t>(kMaxRows * n_in));
  for (int r = 0; r < kMaxRows; ++r) {
    for (int64_t i = 0; i < n_in; ++i) {
      float v = normal(rng);
      if (r == 3) v = 0;                        // an all-zero row
      if (r == 5 && i % 7 == 0) v *= 100.f;     // outliers
      if (r == 6) v *= 1e-3f;                   // small values
      if (r == 7) v = 0.5f;                     // every quantized value 127: the largest integer sums
      p.x[r * n_in + i] = v;
    }
  }
  return p;
}

// y for rows [row0, row0 + n_rows) of p.x.
std::vector<float> RunMatMul(const Problem& p, int row0, int n_rows, ThreadPool& pool) {
  const WeightMatrix w = p.matrix();
  std::vector<float> y(static_cast<size_t>(n_rows * p.n_out), NAN);
  const size_t bytes = MatMulScratchBytes(p.type, p.n_in, n_rows);
  auto* scratch = static_cast<uint8_t*>(std::aligned_alloc(64, (bytes + 64) / 64 * 64));
  MatMul(w, p.x.data() + row0 * p.n_in, n_rows, y.data(), scratch, pool);
  std::free(scratch);
  return y;
}

bool QuantizesActivations(DType t) { return t != DType::kF32 && t != DType::kF16 && t != DType::kBF16; }

// |y - ref| bound for row r, column o. Activation quantization moves each x_i
// by at most half a step (block amax / 254, Q8 and Q8_K alike); then float
// rounding of the accumulation, relative to sum |w x|.
double Tolerance(const Problem& p, int r, int64_t o) {
  const int64_t blk = p.type == DType::kQ4_K || p.type == DType::kQ5_K || p.type == DType::kQ6_K ? 256 : 32;
  double abs_sum = 0, quant = 0;
  for (int64_t i0 = 0; i0 < p.n_in; i0 += blk) {
    double amax = 0, wsum = 0;
    for (int64_t i = i0; i < std::min(p.n_in, i0 + blk); ++i) {
      const double w = p.w[o * p.n_in + i], x = p.x[r * p.n_in + i];
      abs_sum += std::fabs(w * x);
      amax = std::max(amax, std::fabs(x));
      wsum += std::fabs(w);
    }
    quant += wsum * amax / 254;
  }
  return (QuantizesActivations(p.type) ? quant * 1.001 : 0) + 4e-6 * abs_sum + 1e-30;
}

class MatMulTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    for (int t = 1; t <= 3; ++t) pools_.push_back(std::make_unique<ThreadPool>(t));
  }
  static void TearDownTestSuite() { pools_.clear(); }
  static std::vector<std::unique_ptr<ThreadPool>> pools_;
};
std::vector<std::unique_ptr<ThreadPool>> MatMulTest::pools_;

struct Shape {
  int64_t n_out, n_blocks;
};

TEST_F(MatMulTest, BatchInvariantAccurateOnEveryTarget) {
  const std::vector<std::string> targets = SupportedCpuTargets();
  ASSERT_FALSE(targets.empty());
  const std::string initial = ActiveCpuTarget();
  // {129, 1}: 17 rows of 129 blocks span two cache blocks of rows (RowBlock) for float
  // and K-quant weights.
  const Shape shapes[] = {{1, 1}, {3, 3}, {67, 2}, {129, 1}};
  for (DType type : kTypes) {
   for (bool pack : {false, true}) {
    if (pack && PackedLayoutOf(type) == WeightLayout::kRows) continue;
    const int64_t blk = TraitsOf(type).block_elems == 1 ? 37 : TraitsOf(type).block_elems;
    for (const Shape& s : shapes) {
      Problem p = MakeProblem(type, s.n_blocks * blk, s.n_out,
                              static_cast<uint32_t>(s.n_out * 1000 + static_cast<int>(type)));
      if (pack) p.Pack();
      std::vector<float> portable;  // the last target ("scalar") is the reference
      std::vector<std::vector<float>> per_target;
      for (const std::string& target : targets) {
        ForceCpuTarget(target);
        SCOPED_TRACE(testing::Message() << NameOf(type) << (pack ? " packed " : " ") << target << " n_in " << p.n_in
                                        << " n_out " << p.n_out);
        // One row at a time, one thread: the reference bits for every row.
        std::vector<float> single(kMaxRows * p.n_out);
        for (int r = 0; r < kMaxRows; ++r) {
          const std::vector<float> y = RunMatMul(p, r, 1, *pools_[0]);
          std::copy(y.begin(), y.end(), single.begin() + r * p.n_out);
        }
        // (a) Every batch size and thread count, rows at every position.
        for (const auto& pool : pools_) {
          for (int n = 2; n <= kMaxRows; ++n) {
            const int row0 = (n * 5) % (kMaxRows - n + 1);
            const std::vector<float> y = RunMatMul(p, row0, n, *pool);
            ASSERT_EQ(0, std::memcmp(y.data(), &single[row0 * p.n_out], y.size() * sizeof(float)))
                << "n_rows " << n << " (from row " << row0 << ") threads " << pool->size();
          }
          const std::vector<float> y = RunMatMul(p, 0, 1, *pool);
          ASSERT_EQ(0, std::memcmp(y.data(), single.data(), y.size() * sizeof(float)))
              << "threads " << pool->size();
        }
        // (b) Accuracy against float64 on the dequantized weights.
        for (int r = 0; r < kMaxRows; ++r) {
          for (int64_t o = 0; o < p.n_out; ++o) {
            double ref = 0;
            for (int64_t i = 0; i < p.n_in; ++i) {
              ref += static_cast<double>(p.w[o * p.n_in + i]) * p.x[r * p.n_in + i];
            }
            ASSERT_NEAR(single[r * p.n_out + o], ref, Tolerance(p, r, o)) << "row " << r << " col " << o;
          }
        }
        per_target.push_back(single);
      }
      // (c) Every target gives the portable target's bits (ADR 0014): one
      // order of float sums, fused the same way, whatever the vector width.
      // Quantized matrices in rows (not packed) are the exception: a model
      // packs every quantized matrix at load, so no forward runs them, and
      // their SIMD forms only keep to the float rounding of the portable one.
      const std::vector<float>& ref = per_target.back();
      const bool same_bits = pack || TraitsOf(type).block_elems == 1;
      for (size_t t = 0; t + 1 < targets.size(); ++t) {
        for (int64_t k = 0; k < static_cast<int64_t>(ref.size()); ++k) {
          const int64_t r = k / p.n_out, o = k % p.n_out;
          if (same_bits) {
            ASSERT_EQ(0, std::memcmp(&per_target[t][k], &ref[k], sizeof(float)))
                << NameOf(type) << (pack ? " packed " : " ") << targets[t] << " vs " << targets.back() << " row " << r
                << " col " << o << ": " << per_target[t][k] << " vs " << ref[k];
            continue;
          }
          double abs_sum = 0;
          for (int64_t i = 0; i < p.n_in; ++i) abs_sum += std::fabs(static_cast<double>(p.w[o * p.n_in + i]) * p.x[r * p.n_in + i]);
          ASSERT_NEAR(per_target[t][k], ref[k], 4e-6 * abs_sum + 1e-30)
              << NameOf(type) << " " << targets[t] << " vs " << targets.back() << " row " << r << " col " << o;
        }
      }
    }
   }
  }
  ForceCpuTarget(initial);
}

TEST_F(MatMulTest, TargetSelection) {
  const std::vector<std::string> targets = SupportedCpuTargets();
  EXPECT_EQ(targets.back(), "scalar");
  for (const std::string& t : targets) {
    ForceCpuTarget(t);
    EXPECT_EQ(t, ActiveCpuTarget());
  }
  ForceCpuTarget(targets.front());
  try {
    ForceCpuTarget("avx9000");
    FAIL() << "expected an error";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("scalar"), std::string::npos) << e.what();
  }
}

// Q/K/V and gate/up run as one MatMulSharedInput: each output must be the bits
// MatMul gives that matrix alone, for types that share the activation
// quantization (one quantization, one pool run) and for mixed ones (fallback).
TEST_F(MatMulTest, SharedInputEqualsSeparateMatMuls) {
  const int64_t n_in = 512;
  const std::vector<std::vector<std::pair<DType, bool>>> groups = {
      {{DType::kQ8_0, true}, {DType::kQ4_0, true}, {DType::kQ8_0, false}, {DType::kQ4_0, false}},  // packed and not
      {{DType::kQ4_1, true}, {DType::kQ5_0, true}, {DType::kQ5_1, true}, {DType::kQ5_1, false}},
      {{DType::kQ4_K, false}, {DType::kQ6_K, true}, {DType::kQ5_K, false}},  // Q8K, three kernels
      {{DType::kQ8_0, true}, {DType::kQ4_K, false}},                         // mixed: fallback
      {{DType::kF16, false}, {DType::kF32, false}, {DType::kBF16, false}, {DType::kF16, false}},
  };
  for (const std::string& target : SupportedCpuTargets()) {
    ForceCpuTarget(target);
    for (const auto& group : groups) {
      std::vector<Problem> problems;
      size_t scratch_bytes = 0;
      for (size_t m = 0; m < group.size(); ++m) {
        const auto [type, pack] = group[m];
        problems.push_back(MakeProblem(type, n_in, 19 + 16 * static_cast<int64_t>(m), 77 + static_cast<uint32_t>(m)));
        if (pack && PackedLayoutOf(type) != WeightLayout::kRows && CanPack(problems.back().matrix())) problems.back().Pack();
        scratch_bytes = std::max(scratch_bytes, MatMulScratchBytes(type, n_in, kMaxRows));
      }
      auto* scratch = static_cast<uint8_t*>(std::aligned_alloc(64, (scratch_bytes + 64) / 64 * 64));
      const std::vector<float>& x = problems[0].x;  // the rows every matrix reads
      for (Problem& p : problems) p.x = x;
      for (const auto& pool : pools_) {
        for (int n : {1, 5, kMaxRows}) {
          std::vector<WeightMatrix> ws;
          std::vector<std::vector<float>> ys;
          for (const Problem& p : problems) {
            ws.push_back(p.matrix());
            ys.emplace_back(static_cast<size_t>(n * p.n_out), NAN);
          }
          std::vector<MatMulOutput> outs;
          for (size_t m = 0; m < ws.size(); ++m) outs.push_back({&ws[m], ys[m].data()});
          MatMulSharedInput(outs, x.data(), n, scratch, *pool);
          for (size_t m = 0; m < problems.size(); ++m) {
            const std::vector<float> alone = RunMatMul(problems[m], 0, n, *pool);
            ASSERT_EQ(0, std::memcmp(ys[m].data(), alone.data(), alone.size() * sizeof(float)))
                << target << " " << NameOf(problems[m].type) << " output " << m << " rows " << n << " threads "
                << pool->size();
          }
        }
      }
      std::free(scratch);
    }
  }
  ForceCpuTarget(SupportedCpuTargets().front());
}

// A mixture's experts run as one MatMulGroups: each matrix on its own range
// of the rows (some ranges empty, some overlapping, as gate and up of one
// expert share theirs); each output must be the bits MatMul gives that
// matrix on those rows alone, on every target and thread count.
TEST_F(MatMulTest, GroupsEqualSeparateMatMulsOnTheirRows) {
  const int64_t n_in = 512;
  const std::vector<std::pair<DType, bool>> types = {
      {DType::kQ8_0, true}, {DType::kQ4_0, true}, {DType::kQ4_K, true}, {DType::kQ6_K, true},
      {DType::kQ5_K, false}, {DType::kF32, false}, {DType::kF16, false}};
  // (first row, rows) of each group within the kMaxRows rows of x.
  const std::vector<std::pair<int, int>> ranges = {{0, 3}, {0, 3}, {3, 0}, {3, 1}, {4, kMaxRows - 4}, {2, 5}};
  for (const std::string& target : SupportedCpuTargets()) {
    ForceCpuTarget(target);
    for (const auto& [type, pack] : types) {
      std::vector<Problem> problems;
      for (size_t g = 0; g < ranges.size(); ++g) {
        problems.push_back(MakeProblem(type, n_in, 16 + 7 * static_cast<int64_t>(g), 300 + static_cast<uint32_t>(g)));
        if (pack && CanPack(problems.back().matrix())) problems.back().Pack();
      }
      const std::vector<float> x = problems[0].x;
      for (Problem& p : problems) p.x = x;
      const size_t scratch_bytes = MatMulScratchBytes(type, n_in, kMaxRows);
      auto* scratch = static_cast<uint8_t*>(std::aligned_alloc(64, (scratch_bytes + 64) / 64 * 64));
      for (const auto& pool : pools_) {
        std::vector<WeightMatrix> ws;
        std::vector<std::vector<float>> ys;
        for (size_t g = 0; g < ranges.size(); ++g) {
          ws.push_back(problems[g].matrix());
          ys.emplace_back(static_cast<size_t>(std::max(1, ranges[g].second) * problems[g].n_out), NAN);
        }
        std::vector<MatMulGroup> groups;
        for (size_t g = 0; g < ranges.size(); ++g) {
          groups.push_back({&ws[g], ranges[g].first, ranges[g].second, ys[g].data()});
        }
        MatMulGroups(groups, x.data(), kMaxRows, scratch, *pool);
        for (size_t g = 0; g < ranges.size(); ++g) {
          if (ranges[g].second == 0) {
            EXPECT_TRUE(std::isnan(ys[g][0])) << "an empty group wrote its output";
            continue;
          }
          const std::vector<float> alone = RunMatMul(problems[g], ranges[g].first, ranges[g].second, *pool);
          ASSERT_EQ(0, std::memcmp(ys[g].data(), alone.data(), alone.size() * sizeof(float)))
              << target << " " << NameOf(type) << (pack ? " packed" : "") << " group " << g << " threads "
              << pool->size();
        }
      }
      std::free(scratch);
    }
  }
  ForceCpuTarget(SupportedCpuTargets().front());
}

TEST_F(MatMulTest, GroupsRejectRowsOutsideTheInput) {
  Problem a = MakeProblem(DType::kF32, 64, 4, 1);
  const WeightMatrix w = a.matrix();
  std::vector<float> y(4 * 4);
  const MatMulGroup group{&w, 2, 3, y.data()};
  EXPECT_THROW(MatMulGroups({&group, 1}, a.x.data(), 4, nullptr, *pools_[0]), std::exception);
}

TEST_F(MatMulTest, SharedInputRejectsDifferentInputWidths) {
  Problem a = MakeProblem(DType::kF32, 64, 4, 1), b = MakeProblem(DType::kF32, 96, 4, 2);
  const WeightMatrix wa = a.matrix(), wb = b.matrix();
  std::vector<float> ya(4), yb(4);
  const MatMulOutput outs[] = {{&wa, ya.data()}, {&wb, yb.data()}};
  EXPECT_THROW(MatMulSharedInput(outs, a.x.data(), 1, nullptr, *pools_[0]), std::exception);
}

TEST_F(MatMulTest, ScratchSizes) {
  EXPECT_EQ(MatMulScratchBytes(DType::kF16, 4096, 16), 0u);
  EXPECT_GE(MatMulScratchBytes(DType::kQ8_0, 4096, 16), 16u * 4096);
  EXPECT_GE(MatMulScratchBytes(DType::kQ4_K, 4096, 16), 16u * 4096);
}

}  // namespace
}  // namespace kakeya
