// The KV cache's row types (kernels/cpu/kv_types.h) from first principles:
// the codec's levels are the fixed point of Lloyd's iteration for a unit
// Gaussian (float64 integration written out here), its rotation is the
// orthonormal H D (the matrix built here in float64), its codes and scale
// are those of a float64 encoder written out here, and its error on Gaussian
// and outlier-heavy vectors is the quantizer's; llama.cpp's types are the
// weight quantizers' bytes (dequant_test checks those against the format).
#include "kernels/cpu/kv_types.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>

#include "kernels/cpu/dequant.h"
#include "kernels/cpu/kv_codec.h"
#include "tensor/dtype.h"

namespace kakeya {
namespace {

double Pdf(double x) { return std::exp(-x * x / 2) / std::sqrt(2 * M_PI); }
double Cdf(double x) { return 0.5 * (1 + std::erf(x / std::sqrt(2.0))); }

// The Lloyd-Max quantizer of a unit Gaussian with n levels, by Lloyd's
// iteration from evenly spaced levels: each level moves to the centroid of
// the Gaussian between the midpoints around it.
std::vector<double> LloydMax(int n) {
  std::vector<double> levels(n);
  for (int i = 0; i < n; ++i) levels[i] = -2.0 + 4.0 * (i + 0.5) / n;
  for (int iteration = 0; iteration < 20000; ++iteration) {
    std::vector<double> next(n);
    for (int i = 0; i < n; ++i) {
      const double a = i == 0 ? -INFINITY : 0.5 * (levels[i - 1] + levels[i]);
      const double b = i == n - 1 ? INFINITY : 0.5 * (levels[i] + levels[i + 1]);
      next[i] = ((std::isinf(a) ? 0 : Pdf(a)) - (std::isinf(b) ? 0 : Pdf(b))) / (Cdf(b) - Cdf(a));
    }
    levels = next;
  }
  return levels;
}

TEST(KvCodec, LevelsAreLloydMaxForAUnitGaussianIn8Bits) {
  for (int bits : {3, 4}) {
    const int n = 1 << bits;
    const std::vector<double> lloyd = LloydMax(n);
    EXPECT_NEAR(lloyd[n - 1], bits == 4 ? 2.7326 : 2.1519, 1e-4);  // the published outer levels
    for (int i = 0; i < n; ++i) {
      EXPECT_EQ(CodecLevels(bits)[i], std::lround(127 * lloyd[i] / lloyd[n - 1])) << bits << " bits, level " << i;
    }
  }
}

// H D x in float64: H the Sylvester Hadamard matrix over sqrt(d), D the signs
// CodecRotate uses, read off its action on the unit vectors' first entries.
std::vector<double> RotateReference(const std::vector<float>& x) {
  const int d = static_cast<int>(x.size());
  std::vector<double> signs(d);
  for (int i = 0; i < d; ++i) {
    std::vector<float> e(d, 0.0f);
    e[i] = 1.0f;
    CodecRotate(e.data(), d);
    signs[i] = e[0] > 0 ? 1 : -1;  // row 0 of H is all +1/sqrt(d)
  }
  std::vector<double> out(d, 0.0);
  for (int r = 0; r < d; ++r) {
    for (int c = 0; c < d; ++c) {
      const double h = (__builtin_popcount(r & c) % 2 ? -1.0 : 1.0) / std::sqrt(double(d));
      out[r] += h * signs[c] * x[c];
    }
  }
  return out;
}

TEST(KvCodec, RotationIsTheOrthonormalHadamardWithSignFlips) {
  std::mt19937 rng(3);
  std::normal_distribution<float> normal;
  for (int d : {32, 64, 128, 256}) {
    std::vector<float> x(d);
    for (float& v : x) v = normal(rng);
    const std::vector<double> ref = RotateReference(x);
    std::vector<float> y = x;
    CodecRotate(y.data(), d);
    int flips = 0;
    for (int i = 0; i < d; ++i) EXPECT_NEAR(y[i], ref[i], 1e-5) << d << " " << i;
    CodecUnrotate(y.data(), d);
    for (int i = 0; i < d; ++i) EXPECT_NEAR(y[i], x[i], 1e-5);
    // The sign flips are not all one way (a plain Hadamard would keep a
    // constant vector's energy in one coordinate).
    for (int i = 0; i < d; ++i) {
      std::vector<float> e(d, 0.0f);
      e[i] = 1.0f;
      CodecRotate(e.data(), d);
      flips += e[0] < 0;
    }
    EXPECT_GT(flips, d / 4);
    EXPECT_LT(flips, 3 * d / 4);
  }
}

// The codec's encoder written out in float64: codes of the rotated vector
// over its RMS against the integer levels over 127 / (outer Lloyd-Max
// level), least-squares scale rounded to F16 in units of 1/128.
struct Coded {
  std::vector<int> codes;
  float scale;
};
Coded EncodeReference(const std::vector<float>& x, int bits) {
  const int d = static_cast<int>(x.size());
  const std::vector<double> r = RotateReference(x);
  double ss = 0;
  for (double v : r) ss += v * v;
  const double rms = std::sqrt(ss / d);
  const int8_t* levels = CodecLevels(bits);
  static const double outer[2] = {LloydMax(8).back(), LloydMax(16).back()};
  const double per_unit = 127 / outer[bits - 3];
  Coded c{std::vector<int>(d), 0};
  double dot = 0, norm = 0;
  for (int i = 0; i < d; ++i) {
    int best = 0;
    for (int k = 1; k < (1 << bits); ++k) {
      if (std::abs(r[i] / rms * per_unit - levels[k]) < std::abs(r[i] / rms * per_unit - levels[best])) best = k;
    }
    c.codes[i] = best;
    dot += r[i] * levels[best];
    norm += double(levels[best]) * levels[best];
  }
  c.scale = F16ToF32(F32ToF16(static_cast<float>(dot / norm * 128))) * (1.0f / 128);
  return c;
}

// x coded as position j of a block whose other positions hold other
// vectors (so that a position's bits touching its neighbours' would show),
// decoded back (rotated).
std::vector<float> CodedRoundTrip(KvType type, CodecSide side, int j, const std::vector<float>& x) {
  const int d = static_cast<int>(x.size());
  const int bits = type == KvType::kKakeya4 ? 4 : 3;
  std::vector<uint8_t> block(kCodedBlock * KvHeadBytes(type, d), 0xA5);
  std::mt19937 rng(j);
  std::normal_distribution<float> normal;
  std::vector<std::vector<float>> others(kCodedBlock, std::vector<float>(d));
  for (int i = 0; i < kCodedBlock; ++i) {
    for (float& v : others[i]) v = normal(rng);
    CodecEncode(others[i].data(), d, bits, side, block.data(), i);
  }
  CodecEncode(x.data(), d, bits, side, block.data(), j);
  std::vector<float> decoded(d), again(d), want(d);
  // Recoding a neighbour leaves position j as it was.
  CodecEncode(others[(j + 1) % kCodedBlock].data(), d, bits, side, block.data(), (j + 1) % kCodedBlock);
  CodecDecodeRotated(block.data(), j, d, bits, side, decoded.data());
  for (int i = 0; i < kCodedBlock; ++i) {
    if (i == j) continue;
    CodecDecodeRotated(block.data(), i, d, bits, side, again.data());
    std::vector<uint8_t> alone(kCodedBlock * KvHeadBytes(type, d), 0);
    CodecEncode(others[i].data(), d, bits, side, alone.data(), i);
    CodecDecodeRotated(alone.data(), i, d, bits, side, want.data());
    EXPECT_EQ(again, want) << "position " << i << " beside " << j;
  }
  return decoded;
}

TEST(KvCodec, CodesAndScaleAreThoseOfAFloat64Encoder) {
  std::mt19937 rng(5);
  std::normal_distribution<float> normal;
  for (KvType type : {KvType::kKakeya4, KvType::kKakeya3}) {
    const int bits = type == KvType::kKakeya4 ? 4 : 3;
    for (int d : {32, 64, 128}) {
      int mismatched = 0, total = 0;
      for (int trial = 0; trial < 50; ++trial) {
        std::vector<float> x(d);
        for (float& v : x) v = 3.0f * normal(rng);
        const CodecSide side = trial % 2 ? CodecSide::kKeys : CodecSide::kValues;
        const int j = trial % kCodedBlock;
        std::vector<float> decoded = CodedRoundTrip(type, side, j, x);
        const Coded ref = EncodeReference(x, bits);
        for (int i = 0; i < d; ++i) {
          // A coordinate within float rounding of a boundary may take the
          // other level; every other one takes the reference's.
          const float want = ref.scale * CodecLevels(bits)[ref.codes[i]];
          ++total;
          if (decoded[i] != want) ++mismatched;
        }
        EXPECT_EQ(KvHeadBytes(type, d), d * bits / 8 + 2);
      }
      EXPECT_LE(mismatched, total / 200) << KvTypeName(type) << " d " << d;
    }
  }
}

// Mean squared error over the vector's mean square, rotated back.
double RelativeError(KvType type, const std::vector<float>& x) {
  const int d = static_cast<int>(x.size());
  std::vector<float> y(d);
  if (IsCodec(type)) {
    y = CodedRoundTrip(type, CodecSide::kKeys, 5, x);
    CodecUnrotate(y.data(), d);
  } else {
    std::vector<uint8_t> bytes(KvHeadBytes(type, d));
    EncodeKvHead(type, x.data(), d, bytes.data());
    DecodeKvHead(type, bytes.data(), d, y.data());
  }
  double err = 0, energy = 0;
  for (int i = 0; i < d; ++i) {
    err += (double(y[i]) - x[i]) * (double(y[i]) - x[i]);
    energy += double(x[i]) * x[i];
  }
  return err / energy;
}

// Lloyd-Max distortion of a unit Gaussian: 0.0095 at 16 levels, 0.0345 at 8.
// The codec stays near it on Gaussian vectors and, thanks to the rotation,
// on vectors whose energy sits in a few outlier channels (keys often do),
// where q4_0's per-block scales are stretched by the outliers.
TEST(KvCodec, ErrorIsTheQuantizersOnGaussianAndOutlierVectors) {
  std::mt19937 rng(9);
  std::normal_distribution<float> normal;
  const int d = 128;
  for (bool outliers : {false, true}) {
    double e4 = 0, e3 = 0, q4 = 0;
    const int trials = 400;
    for (int t = 0; t < trials; ++t) {
      std::vector<float> x(d);
      for (float& v : x) v = normal(rng);
      if (outliers) x[7] *= 30, x[70] *= 20;
      e4 += RelativeError(KvType::kKakeya4, x) / trials;
      e3 += RelativeError(KvType::kKakeya3, x) / trials;
      q4 += RelativeError(KvType::kQ4_0, x) / trials;
    }
    SCOPED_TRACE(outliers ? "outlier channels" : "gaussian");
    std::printf("[codec error] %s: kakeya4 %.4f, kakeya3 %.4f, q4_0 %.4f\n", outliers ? "outliers" : "gaussian", e4, e3, q4);
    EXPECT_LT(e4, 0.0125);
    EXPECT_LT(e3, 0.042);
    if (outliers) {
      EXPECT_LT(e4, q4);
    }
  }
}

TEST(KvTypes, LlamaCppTypesAreTheWeightQuantizersBytes) {
  std::mt19937 rng(1);
  std::normal_distribution<float> normal;
  const int d = 64;
  std::vector<float> x(d);
  for (float& v : x) v = normal(rng);
  for (auto [type, dtype] : {std::pair{KvType::kF32, DType::kF32}, std::pair{KvType::kF16, DType::kF16},
                             std::pair{KvType::kBF16, DType::kBF16}, std::pair{KvType::kQ8_0, DType::kQ8_0},
                             std::pair{KvType::kQ4_0, DType::kQ4_0}}) {
    SCOPED_TRACE(std::string(KvTypeName(type)));
    ASSERT_EQ(KvHeadBytes(type, d), RowBytes(dtype, d));
    std::vector<uint8_t> ours(KvHeadBytes(type, d)), theirs(RowBytes(dtype, d));
    EncodeKvHead(type, x.data(), d, ours.data());
    QuantizeRow(dtype, x.data(), theirs.data(), d);
    EXPECT_EQ(ours, theirs);
    std::vector<float> a(d), b(d);
    DecodeKvHead(type, ours.data(), d, a.data());
    DequantizeRow(dtype, theirs.data(), b.data(), d);
    EXPECT_EQ(0, std::memcmp(a.data(), b.data(), sizeof(float) * d));
  }
}

TEST(KvTypes, NamesAndFit) {
  for (const char* name : {"f32", "f16", "bf16", "q8_0", "q4_0", "kakeya4", "kakeya3"}) {
    ASSERT_TRUE(ParseKvType(name).has_value()) << name;
    EXPECT_EQ(KvTypeName(*ParseKvType(name)), name);
  }
  EXPECT_FALSE(ParseKvType("q4_1").has_value());
  EXPECT_EQ(KvTypeUnfit(KvType::kQ8_0, 64), "");
  EXPECT_NE(KvTypeUnfit(KvType::kQ8_0, 80).find("multiple of 32"), std::string::npos);
  EXPECT_EQ(KvTypeUnfit(KvType::kKakeya4, 128), "");
  EXPECT_NE(KvTypeUnfit(KvType::kKakeya3, 96).find("power of two"), std::string::npos);
  EXPECT_EQ(KvTypeUnfit(KvType::kF16, 80), "");
}

}  // namespace
}  // namespace kakeya
