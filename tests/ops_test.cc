// AttendKvHead against a float64 softmax-attention written out naively here:
// grouped heads, ring caches read across their wrap, sliding windows, key
// counts that are and are not multiples of the 16-lane vectors, value widths
// with a scalar tail, gemma2's soft-cap, and scores far enough apart that most
// exponentials underflow; several rows per call give each row the bits it
// gets alone. GeluMul bit for bit against ggml's definition, written out per
// element here, over a sample of every float bit pattern; RmsNorm and SiluMul
// against float64; DotEach and WeightedSum in their documented order, bit for
// bit. Each test runs on every CPU target this machine supports
// (the operations follow the MatMul target), and every operation must give
// every target the same bits (ADR 0014).
#include "kernels/cpu/attention.h"
#include "kernels/cpu/ops.h"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "kernels/cpu/dequant.h"
#include "kernels/cpu/matmul.h"

namespace kakeya {
namespace {

// Calls fn() once per supported CPU target, forced, then restores the first.
template <typename Fn>
void OnEveryCpuTarget(Fn fn) {
  const std::string initial = ActiveCpuTarget();
  for (const std::string& target : SupportedCpuTargets()) {
    SCOPED_TRACE("CPU target " + target);
    ForceCpuTarget(target);
    fn();
  }
  ForceCpuTarget(initial);
}

// fn(out) writes outputs; every target must write the same bytes.
template <typename Fn>
void ExpectSameBitsOnEveryTarget(Fn fn) {
  std::vector<float> first;
  OnEveryCpuTarget([&] {
    std::vector<float> out;
    fn(out);
    if (first.empty()) {
      first = out;
    } else {
      ASSERT_EQ(first.size(), out.size());
      EXPECT_EQ(0, std::memcmp(first.data(), out.data(), out.size() * sizeof(float)));
    }
  });
}

struct Case {
  int n_head, n_head_kv, head_dim, value_dim;
  int capacity, first_pos, n_keys;
  float softcap;
  float q_scale;  // large: scores spread over hundreds of nats
};

// out[h * value_dim + d] for every head of one row (queries q), which sees the
// keys of positions [first, first + n_keys), in float64.
std::vector<double> Reference(const Case& c, const AttentionShape& s, const float* q, const std::vector<float>& k,
                              const std::vector<float>& v, int first, int n_keys) {
  const int k_stride = c.n_head_kv * c.head_dim, v_stride = c.n_head_kv * c.value_dim;
  std::vector<double> out(size_t(c.n_head) * c.value_dim, 0.0);
  for (int h = 0; h < c.n_head; ++h) {
    const int g = h / (c.n_head / c.n_head_kv);
    std::vector<double> score(n_keys);
    double max_score = -INFINITY;
    for (int j = 0; j < n_keys; ++j) {
      const int slot = (first + j) % c.capacity;
      double dot = 0;
      for (int d = 0; d < c.head_dim; ++d) {
        dot += double(q[h * c.head_dim + d]) * k[size_t(slot) * k_stride + g * c.head_dim + d];
      }
      dot *= s.scale;
      if (c.softcap > 0) dot = c.softcap * std::tanh(dot / c.softcap);
      score[j] = dot;
      max_score = std::max(max_score, dot);
    }
    double sum = 0;
    for (double& x : score) sum += (x = std::exp(x - max_score));
    for (int j = 0; j < n_keys; ++j) {
      const int slot = (first + j) % c.capacity;
      for (int d = 0; d < c.value_dim; ++d) {
        out[h * c.value_dim + d] += score[j] / sum * v[size_t(slot) * v_stride + g * c.value_dim + d];
      }
    }
  }
  return out;
}

// Runs rows [r0, r0 + n_rows) of the case's rows in one call per KV head.
void Attend(const Case& c, const AttentionShape& s, int window, int first_row_pos, int r0, int n_rows,
            const std::vector<float>& q, const std::vector<float>& k, const std::vector<float>& v,
            std::vector<float>& out) {
  const int q_width = c.n_head * c.head_dim, o_width = c.n_head * c.value_dim;
  const int last = first_row_pos + r0 + n_rows - 1;
  const int max_keys = window > 0 ? std::min(window, last + 1) : last + 1;
  std::vector<float> scratch(AttendScratchFloats(s, n_rows, max_keys));
  const KvView kv = F32KvView(k.data(), c.n_head_kv * c.head_dim, c.head_dim, v.data(), c.n_head_kv * c.value_dim, c.value_dim, c.capacity);
  for (int g = 0; g < c.n_head_kv; ++g) {
    const AttentionRows rows{
        n_rows, first_row_pos + r0, window, q.data() + size_t(r0) * q_width, q_width, out.data() + size_t(r0) * o_width,
        o_width};
    AttendKvHead(s, g, rows, kv, scratch.data());
  }
}

TEST(AttendKvHeadTest, MatchesFloat64SoftmaxAndRowsAreIndependent) {
  // The last row sees n_keys keys from first_pos (a window of n_keys when
  // first_pos > 0); the rows before it sit at the positions before.
  const Case cases[] = {
      {6, 2, 64, 64, 512, 0, 1, 0, 1},        // one key: the output is its value
      {6, 2, 64, 64, 512, 0, 300, 0, 1},      // 300 keys = 18 vectors + 12
      {4, 1, 64, 64, 128, 1000, 128, 0, 1},   // a full ring, read from slot 1000 % 128
      {4, 1, 64, 64, 128, 77, 17, 0, 1},      // wraps after 51 keys; 16 + 1
      {2, 2, 80, 80, 64, 40, 33, 0, 1},       // value_dim 80: 64 in chains, then 16
      {2, 1, 40, 24, 64, 0, 5, 0, 1},         // widths with scalar tails (40, 24)
      {8, 4, 256, 256, 256, 10, 200, 50, 1},  // gemma shapes: 256-wide heads, soft-cap
      {4, 2, 64, 64, 256, 3, 250, 0, 30},     // scores hundreds of nats apart
  };
  constexpr int kRows = 5;
  OnEveryCpuTarget([&] {
    std::mt19937 rng(7);
    std::normal_distribution<float> normal(0.f, 1.f);
    for (const Case& c : cases) {
      SCOPED_TRACE(testing::Message() << "heads " << c.n_head << "/" << c.n_head_kv << " dims " << c.head_dim << "/"
                                      << c.value_dim << " capacity " << c.capacity << " first " << c.first_pos
                                      << " keys " << c.n_keys << " softcap " << c.softcap << " q x" << c.q_scale);
      const AttentionShape s{c.n_head, c.n_head_kv, c.head_dim, c.value_dim, 1.0f / std::sqrt(float(c.head_dim)),
                             c.softcap};
      const int window = c.first_pos > 0 ? c.n_keys : 0;
      const int last_pos = c.first_pos + c.n_keys - 1;
      const int n_rows = std::min(kRows, last_pos + 1);
      const int first_row_pos = last_pos - n_rows + 1;
      std::vector<float> q(size_t(n_rows) * c.n_head * c.head_dim), k(size_t(c.capacity) * c.n_head_kv * c.head_dim),
          v(size_t(c.capacity) * c.n_head_kv * c.value_dim);
      for (float& x : q) x = normal(rng) * c.q_scale;
      for (float& x : k) x = normal(rng);
      for (float& x : v) x = normal(rng);
      const size_t o_width = size_t(c.n_head) * c.value_dim;
      std::vector<float> together(n_rows * o_width, NAN), alone(n_rows * o_width, NAN);
      Attend(c, s, window, first_row_pos, 0, n_rows, q, k, v, together);
      for (int r = 0; r < n_rows; ++r) Attend(c, s, window, first_row_pos, r, 1, q, k, v, alone);
      ASSERT_EQ(0, std::memcmp(together.data(), alone.data(), together.size() * sizeof(float)));
      for (int r = 0; r < n_rows; ++r) {
        const int pos = first_row_pos + r;
        const int first = window > 0 && pos >= window ? pos - window + 1 : 0;
        const std::vector<double> ref =
            Reference(c, s, q.data() + size_t(r) * c.n_head * c.head_dim, k, v, first, pos - first + 1);
        for (size_t i = 0; i < o_width; ++i) {
          // Each output is a convex combination of values of magnitude ~1.
          ASSERT_NEAR(together[r * o_width + i], ref[i], 2e-5) << "row " << r << " output " << i;
        }
      }
    }
  });
}

// A block drafter's non-causal block (block_end): every row sees the keys up
// to the block's end, not its own position; rows together give the bits of
// each row alone as the last row of the block, and the float64 reference.
TEST(AttendKvHeadTest, RowsThatSeeTheWholeBlockMatchEachRowAloneAndFloat64) {
  const Case c{6, 2, 64, 64, 256, 0, 0, 0, 1};
  const AttentionShape s{c.n_head, c.n_head_kv, c.head_dim, c.value_dim, 1.0f / std::sqrt(float(c.head_dim)), 0};
  OnEveryCpuTarget([&] {
    std::mt19937 rng(11);
    std::normal_distribution<float> normal(0.f, 1.f);
    for (const int context : {0, 1, 37, 200}) {
      for (const int n_rows : {1, 5, 16}) {
        SCOPED_TRACE(testing::Message() << "context " << context << " rows " << n_rows);
        const int block_end = context + n_rows - 1;
        const int q_width = c.n_head * c.head_dim, o_width = c.n_head * c.value_dim;
        std::vector<float> q(size_t(n_rows) * q_width), k(size_t(c.capacity) * c.n_head_kv * c.head_dim),
            v(size_t(c.capacity) * c.n_head_kv * c.value_dim);
        for (float& x : q) x = normal(rng);
        for (float& x : k) x = normal(rng);
        for (float& x : v) x = normal(rng);
        const KvView kv = F32KvView(k.data(), c.n_head_kv * c.head_dim, c.head_dim, v.data(), c.n_head_kv * c.value_dim, c.value_dim, c.capacity);
        std::vector<float> together(size_t(n_rows) * o_width, NAN), alone(together.size(), NAN);
        std::vector<float> scratch(AttendScratchFloats(s, n_rows, block_end + 1));
        for (int g = 0; g < c.n_head_kv; ++g) {
          AttendKvHead(s, g,
                       AttentionRows{n_rows, context, 0, q.data(), q_width, together.data(), o_width, block_end}, kv,
                       scratch.data());
          for (int r = 0; r < n_rows; ++r) {  // alone: the row at the block's last position
            AttendKvHead(s, g,
                         AttentionRows{1, block_end, 0, q.data() + size_t(r) * q_width, q_width,
                                       alone.data() + size_t(r) * o_width, o_width},
                         kv, scratch.data());
          }
        }
        ASSERT_EQ(0, std::memcmp(together.data(), alone.data(), together.size() * sizeof(float)));
        for (int r = 0; r < n_rows; ++r) {
          const std::vector<double> ref = Reference(c, s, q.data() + size_t(r) * q_width, k, v, 0, block_end + 1);
          for (int i = 0; i < o_width; ++i) ASSERT_NEAR(together[size_t(r) * o_width + i], ref[i], 2e-5) << r;
        }
      }
    }
  });
}

// ggml's CPU GELU of one element: tanh form on the input rounded to F16,
// the result rounded to F16; 0 below -10, identity above 10.
float GeluDefinition(float x) {
  if (x <= -10.0f) return 0.0f;
  if (x >= 10.0f) return x;
  const float h = F16ToF32(F32ToF16(x));
  return F16ToF32(F32ToF16(0.5f * h * (1.0f + std::tanh(0.79788456080286535588f * h * (1.0f + 0.044715f * h * h)))));
}

TEST(GeluMulTest, MatchesDefinitionBitForBit) {
  // Every 509th bit pattern (NaNs, infinities, subnormals, both signs) plus
  // the values around the F16 subnormal, normal and +-10 boundaries; 1000
  // elements, so the 16-lane loop and its scalar tail both run.
  std::vector<float> xs;
  for (uint64_t bits = 0; bits < (uint64_t{1} << 32); bits += 509) xs.push_back(std::bit_cast<float>(uint32_t(bits)));
  for (float edge : {6.1035156e-05f, 5.9604645e-08f, 2.9802322e-08f, 10.0f, 65504.0f}) {
    for (float sign : {1.0f, -1.0f}) {
      float x = sign * edge;
      for (int i = 0; i < 64; ++i) x = std::nextafter(x, 0.0f);
      for (int i = 0; i < 128; ++i, x = std::nextafter(x, sign * INFINITY)) xs.push_back(x);
    }
  }
  OnEveryCpuTarget([&] {
    std::mt19937 rng(3);
    std::uniform_real_distribution<float> uniform(-2.f, 2.f);
    std::vector<float> up(1000), out(1000);
    for (size_t first = 0; first < xs.size(); first += 1000) {
      const int n = int(std::min<size_t>(1000, xs.size() - first));
      for (float& u : up) u = uniform(rng);
      GeluMul(xs.data() + first, up.data(), n, out.data());
      for (int i = 0; i < n; ++i) {
        const float x = xs[first + i], want = GeluDefinition(x) * up[i];
        if (std::isnan(want)) {
          ASSERT_TRUE(std::isnan(out[i])) << "x bits " << std::bit_cast<uint32_t>(x);
        } else {
          ASSERT_EQ(std::bit_cast<uint32_t>(out[i]), std::bit_cast<uint32_t>(want))
              << "x = " << x << " (bits " << std::bit_cast<uint32_t>(x) << ")";
        }
      }
    }
  });
}

TEST(SiluMulTest, MatchesFloat64AndIsElementwise) {
  // Both signs over the whole range the exponential sees (beyond +-87 it
  // saturates), zeros, and lengths with and without a tail after the 16-lane
  // loop; an element's result must not depend on where it sits.
  std::mt19937 rng(9);
  std::uniform_real_distribution<float> wide(-100.f, 100.f), narrow(-6.f, 6.f), unit(-2.f, 2.f);
  std::vector<float> gate(1000), up(1000);
  for (size_t i = 0; i < gate.size(); ++i) gate[i] = i % 3 == 0 ? wide(rng) : narrow(rng);
  gate[0] = 0.0f, gate[1] = -0.0f, gate[2] = 1e-30f, gate[3] = -87.5f, gate[4] = 88.5f;
  for (float& u : up) u = unit(rng);
  OnEveryCpuTarget([&] {
    for (int n : {1000, 999, 15, 1}) {
      std::vector<float> out(n);
      SiluMul(gate.data(), up.data(), n, out.data());
      for (int i = 0; i < n; ++i) {
        const double g = gate[i], want = g / (1.0 + std::exp(-g)) * up[i];
        ASSERT_NEAR(out[i], want, 4e-7 * std::abs(want) + 1e-30) << "gate " << g << ", n " << n;
      }
      if (n > 1) {  // the same elements one place later
        std::vector<float> shifted(n - 1);
        SiluMul(gate.data() + 1, up.data() + 1, n - 1, shifted.data());
        ASSERT_EQ(0, std::memcmp(shifted.data(), out.data() + 1, (n - 1) * sizeof(float))) << n;
      }
    }
  });
}

// DotEach and WeightedSum (deepseek4's attention: keys are the values) in the
// order their comment gives, written out per element here: a dot is 16 lane
// sums over the vectors in order, added in SumLanes' tree (lane l + 8, then +
// 4, + 2, + 1), then the tail in order; a weighted sum adds the rows in
// order. Row counts and widths with and without the kernels' groups of 4 and
// their tails; float64 bounds the rounding.
TEST(DotEachTest, MatchesTheDocumentedOrderBitForBitAndFloat64) {
  std::mt19937 rng(21);
  std::normal_distribution<float> normal(0.f, 1.f);
  std::vector<float> q(512 + 13), w(11), keys(11 * q.size());
  for (float& v : q) v = normal(rng);
  for (float& v : w) v = normal(rng);
  for (float& v : keys) v = normal(rng);
  OnEveryCpuTarget([&] {
    for (int dim : {13, 64, 512, 512 + 13}) {
      for (int n : {1, 3, 4, 7, 11}) {
        SCOPED_TRACE("dim " + std::to_string(dim) + ", rows " + std::to_string(n));
        std::vector<const float*> rows(n);
        for (int j = 0; j < n; ++j) rows[j] = keys.data() + size_t(j) * q.size();
        std::vector<float> dots(n), sums(dim);
        DotEach(q.data(), rows.data(), n, dim, dots.data());
        WeightedSum(w.data(), rows.data(), n, dim, sums.data());
        for (int j = 0; j < n; ++j) {
          float lane[16] = {};
          const int vectors = dim / 16;
          for (int c = 0; c < vectors; ++c) {
            for (int l = 0; l < 16; ++l) lane[l] += q[16 * c + l] * rows[j][16 * c + l];
          }
          for (int half = 8; half >= 1; half /= 2) {
            for (int l = 0; l < half; ++l) lane[l] += lane[l + half];
          }
          float want = lane[0];
          double exact = 0;
          for (int i = 16 * vectors; i < dim; ++i) want += q[i] * rows[j][i];
          for (int i = 0; i < dim; ++i) exact += double(q[i]) * rows[j][i];
          EXPECT_EQ(std::bit_cast<uint32_t>(want), std::bit_cast<uint32_t>(dots[j])) << "dot " << j;
          EXPECT_NEAR(dots[j], exact, 1e-5 * dim);
        }
        for (int i = 0; i < dim; ++i) {
          float want = 0.0f;
          double exact = 0;
          for (int j = 0; j < n; ++j) want += w[j] * rows[j][i];
          for (int j = 0; j < n; ++j) exact += double(w[j]) * rows[j][i];
          ASSERT_EQ(std::bit_cast<uint32_t>(want), std::bit_cast<uint32_t>(sums[i])) << "element " << i;
          ASSERT_NEAR(sums[i], exact, 1e-5 * n);
        }
      }
    }
  });
}

TEST(RmsNormTest, MatchesFloat64) {
  OnEveryCpuTarget([] {
    std::mt19937 rng(5);
    std::normal_distribution<float> normal(0.f, 3.f);
    for (int n : {1, 7, 8, 64, 100, 384, 2048}) {
      std::vector<float> x(n), w(n), out(n);
      for (float& v : x) v = normal(rng);
      for (float& v : w) v = normal(rng);
      double sum = 0;
      for (float v : x) sum += double(v) * v;
      const double scale = 1.0 / std::sqrt(sum / n + 1e-6);
      RmsNorm(x.data(), w.data(), n, 1e-6f, out.data());
      for (int i = 0; i < n; ++i)
        ASSERT_NEAR(out[i], x[i] * scale * w[i], 1e-5 * std::abs(x[i] * scale * w[i]) + 1e-6) << n;
      RmsNorm(x.data(), nullptr, n, 1e-6f, x.data());  // in place, no weight
      for (int i = 0; i < n; ++i) ASSERT_NEAR(out[i], x[i] * w[i], 1e-5 * std::abs(out[i]) + 1e-6) << n;
    }
  });
}

// The gated delta rule over several rows, against a float64 transcription
// of its definition (S *= e^g; d = (v - S^T k) * beta; S += k d^T; o = S^T q
// / sqrt(dk)), at widths that take the four-vector, one-vector and scalar
// paths; and column blocks run separately equal the whole width run at once.
TEST(DeltaRuleStepTest, MatchesFloat64AndColumnsAreIndependent) {
  constexpr int kDk = 24, kDv = 64 + 16 + 3, kRows = 6;
  std::mt19937 rng(13);
  std::normal_distribution<float> normal(0.f, 1.f);
  std::uniform_real_distribution<float> unit(0.2f, 0.99f);
  std::vector<float> k(kRows * kDk), q(kRows * kDk), v(kRows * kDv), decay(kRows), beta(kRows);
  for (float& e : k) e = normal(rng) / std::sqrt(float(kDk));
  for (float& e : q) e = normal(rng) / std::sqrt(float(kDk));
  for (float& e : v) e = normal(rng);
  for (int r = 0; r < kRows; ++r) decay[r] = unit(rng), beta[r] = unit(rng);
  std::vector<float> S0(kDk * kDv);
  for (float& e : S0) e = normal(rng);
  const float scale = 1.0f / std::sqrt(float(kDk));
  OnEveryCpuTarget([&] {
    std::vector<double> ref(S0.begin(), S0.end());
    std::vector<float> S = S0, split = S0, u(kDv), o(kDv), o_split(kDv);
    for (int r = 0; r < kRows; ++r) {
      const float* kr = k.data() + r * kDk;
      const float* qr = q.data() + r * kDk;
      const float* vr = v.data() + r * kDv;
      DeltaRuleStep(kr, vr, decay[r], beta[r], kDk, kDv, kDv, S.data(), u.data(), qr, o.data(), scale);
      for (int c0 : {0, 64, 80}) {  // the same columns in three calls
        const int width = c0 == 0 ? 64 : c0 == 64 ? 16 : 3;
        DeltaRuleStep(kr, vr + c0, decay[r], beta[r], kDk, width, kDv, split.data() + c0, u.data(), qr,
                      o_split.data() + c0, scale);
      }
      ASSERT_EQ(0, std::memcmp(S.data(), split.data(), S.size() * sizeof(float))) << "row " << r;
      ASSERT_EQ(0, std::memcmp(o.data(), o_split.data(), o.size() * sizeof(float))) << "row " << r;
      for (int c = 0; c < kDv; ++c) {
        double sk = 0;
        for (int i = 0; i < kDk; ++i) sk += (ref[i * kDv + c] *= decay[r]) * kr[i];
        const double d = (vr[c] - sk) * beta[r];
        double out = 0;
        for (int i = 0; i < kDk; ++i) out += (ref[i * kDv + c] += kr[i] * d) * qr[i];
        ASSERT_NEAR(o[c], out * scale, 1e-5) << "row " << r << " column " << c;
      }
      for (int i = 0; i < kDk * kDv; ++i) ASSERT_NEAR(S[i], ref[i], 1e-5) << "row " << r;
    }
  });
}

// ADR 0014: every row operation and attention give every target the same
// bits (no implicit FMA, 16-lane order everywhere).
TEST(OpsTest, EveryOperationGivesEveryCpuTargetTheSameBits) {
  std::mt19937 rng(11);
  std::normal_distribution<float> normal(0.f, 2.f);
  std::vector<float> x(2048 + 13), y(x.size());
  for (float& v : x) v = normal(rng);
  for (float& v : y) v = normal(rng);
  for (int n : {13, 384, 2048 + 13}) {
    SCOPED_TRACE(n);
    ExpectSameBitsOnEveryTarget([&](std::vector<float>& out) {
      out.resize(n);
      RmsNorm(x.data(), y.data(), n, 1e-6f, out.data());
    });
    ExpectSameBitsOnEveryTarget([&](std::vector<float>& out) {
      out.resize(n);
      GeluMul(x.data(), y.data(), n, out.data());
    });
    ExpectSameBitsOnEveryTarget([&](std::vector<float>& out) {
      out.resize(n);
      SiluMul(x.data(), y.data(), n, out.data());
    });
  }
  // The delta rule: a [32, 83] state (every path of its columns), two rows.
  std::vector<float> state(32 * 83);
  for (float& v : state) v = normal(rng);
  ExpectSameBitsOnEveryTarget([&](std::vector<float>& out) {
    constexpr int kDk = 32, kDv = 83;
    out = state;
    std::vector<float> u(kDv), o(2 * kDv);
    for (int r = 0; r < 2; ++r) {
      DeltaRuleStep(y.data() + r * kDk, y.data() + 100 + r * kDv, 0.9f, 0.7f, kDk, kDv, kDv, out.data(), u.data(),
                    y.data() + 300 + r * kDk, o.data() + r * kDv, 0.125f);
    }
    out.insert(out.end(), o.begin(), o.end());
  });
  // Attention: plain, a wrapped sliding window with tails, soft-capped.
  const Case cases[] = {{6, 2, 64, 64, 512, 0, 300, 0, 1}, {2, 1, 40, 24, 64, 77, 33, 0, 1},
                        {8, 4, 256, 256, 256, 10, 200, 50, 1}};
  for (const Case& c : cases) {
    const AttentionShape s{c.n_head, c.n_head_kv, c.head_dim, c.value_dim, 1.0f / std::sqrt(float(c.head_dim)), c.softcap};
    const int window = c.first_pos > 0 ? c.n_keys : 0;
    const int n_rows = 5, first_row_pos = c.first_pos + c.n_keys - n_rows;
    std::vector<float> q(size_t(n_rows) * c.n_head * c.head_dim), k(size_t(c.capacity) * c.n_head_kv * c.head_dim),
        v(size_t(c.capacity) * c.n_head_kv * c.value_dim);
    for (float& e : q) e = normal(rng);
    for (float& e : k) e = normal(rng);
    for (float& e : v) e = normal(rng);
    ExpectSameBitsOnEveryTarget([&](std::vector<float>& out) {
      out.assign(size_t(n_rows) * c.n_head * c.value_dim, NAN);
      Attend(c, s, window, first_row_pos, 0, n_rows, q, k, v, out);
    });
  }
}

}  // namespace
}  // namespace kakeya
