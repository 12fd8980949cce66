// Conversions and dequantizers against naive implementations of the
// docs/formats/quantization.md formulas written here (independent of the library),
// reference quantizer error bounds, and the fixture models' weights.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <fstream>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "kernels/cpu/dequant.h"
#include "tensor/dtype.h"

namespace kakeya {
namespace {

// ---- Naive references -------------------------------------------------------

double RefF16(uint16_t h) {
  const int sign = h >> 15, exp = (h >> 10) & 31, man = h & 1023;
  double v;
  if (exp == 31) v = man ? NAN : INFINITY;
  else if (exp == 0) v = std::ldexp(man, -24);
  else v = std::ldexp(1024 + man, exp - 25);
  return sign ? -v : v;
}

// Nearest F16 by search over the ordered positive patterns; ties to even.
uint16_t RefToF16(float f) {
  if (std::isnan(f)) return 0x7E00;
  const uint16_t sign = std::signbit(f) ? 0x8000 : 0;
  const double a = std::fabs(static_cast<double>(f));
  if (a >= 65520.0) return sign | 0x7C00;  // max 65504 + half an ulp (16) rounds up
  uint16_t lo = 0, hi = 0x7BFF;
  while (lo < hi) {  // largest pattern with value <= a
    const uint16_t mid = static_cast<uint16_t>((lo + hi + 1) / 2);
    if (RefF16(mid) <= a) lo = mid;
    else hi = static_cast<uint16_t>(mid - 1);
  }
  uint16_t best = lo;
  if (lo < 0x7BFF || RefF16(lo) < a) {
    const double dl = a - RefF16(lo), dh = RefF16(static_cast<uint16_t>(lo + 1)) - a;
    if (dh < dl || (dh == dl && (lo & 1))) best = static_cast<uint16_t>(lo + 1);
  }
  return sign | best;
}

// Nearest BF16 (ties to even, overflow to inf); NaN -> quiet NaN.
uint16_t RefToBF16(float f) {
  const uint32_t u = std::bit_cast<uint32_t>(f);
  if (std::isnan(f)) return static_cast<uint16_t>((u >> 16) | 0x40);
  const uint32_t lo = u >> 16;
  const double a = std::fabs(static_cast<double>(f));
  const double vlo = std::fabs(static_cast<double>(std::bit_cast<float>(lo << 16)));
  // The next pattern up; past the largest finite value it is "2^128" (inf).
  const uint32_t up = (lo & 0x7FFF) + 1;
  const double vhi = up == 0x7F80 ? std::ldexp(1.0, 128)
                                  : std::fabs(static_cast<double>(std::bit_cast<float>(up << 16)));
  if (std::isinf(f)) return static_cast<uint16_t>(lo);
  const double dl = a - vlo, dh = vhi - a;
  return static_cast<uint16_t>((dh < dl || (dh == dl && (lo & 1))) ? lo + 1 : lo);
}

float H(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return static_cast<float>(RefF16(h));
}

// Dequantizes one block of `type` at p into y, straight from docs/formats/quantization.md 2.2/2.3.
void RefDequantBlock(DType type, const uint8_t* p, float* y) {
  switch (type) {
    case DType::kQ8_0:
      for (int k = 0; k < 32; ++k) y[k] = static_cast<int8_t>(p[2 + k]) * H(p);
      break;
    case DType::kQ4_0:
      for (int j = 0; j < 16; ++j) {
        y[j] = ((p[2 + j] & 0xF) - 8) * H(p);
        y[j + 16] = ((p[2 + j] >> 4) - 8) * H(p);
      }
      break;
    case DType::kQ4_1:
      for (int j = 0; j < 16; ++j) {
        y[j] = (p[4 + j] & 0xF) * H(p) + H(p + 2);
        y[j + 16] = (p[4 + j] >> 4) * H(p) + H(p + 2);
      }
      break;
    case DType::kQ5_0:
    case DType::kQ5_1: {
      const bool q51 = type == DType::kQ5_1;
      const uint8_t* qh = p + (q51 ? 4 : 2);
      const uint8_t* qs = p + (q51 ? 8 : 6);
      const uint32_t hb = qh[0] | qh[1] << 8 | qh[2] << 16 | static_cast<uint32_t>(qh[3]) << 24;
      for (int j = 0; j < 16; ++j) {
        const int a = (qs[j] & 0xF) | ((hb >> j) & 1) << 4;
        const int b = (qs[j] >> 4) | ((hb >> (j + 16)) & 1) << 4;
        if (q51) {
          y[j] = a * H(p) + H(p + 2);
          y[j + 16] = b * H(p) + H(p + 2);
        } else {
          y[j] = (a - 16) * H(p);
          y[j + 16] = (b - 16) * H(p);
        }
      }
      break;
    }
    case DType::kQ4_K:
    case DType::kQ5_K: {
      const bool q5 = type == DType::kQ5_K;
      const float d = H(p), dmin = H(p + 2);
      const uint8_t* sc = p + 4;
      const uint8_t* qh = p + 16;
      const uint8_t* qs = p + (q5 ? 48 : 16);
      for (int e = 0; e < 256; ++e) {
        const int s = e / 32, g = e / 64, l = e % 32;
        int scale, min;
        if (s < 4) {
          scale = sc[s] & 63;
          min = sc[s + 4] & 63;
        } else {
          scale = (sc[s + 4] & 0xF) | ((sc[s - 4] >> 6) << 4);
          min = (sc[s + 4] >> 4) | ((sc[s] >> 6) << 4);
        }
        const uint8_t byte = qs[32 * g + l];
        int q = (s % 2 == 0) ? (byte & 0xF) : (byte >> 4);
        if (q5) q += 16 * ((qh[l] >> s) & 1);
        y[e] = d * scale * q - dmin * min;
      }
      break;
    }
    case DType::kQ6_K: {
      const uint8_t *ql = p, *qh = p + 128;
      const auto* scales = reinterpret_cast<const int8_t*>(p + 192);
      const float d = H(p + 208);
      for (int e = 0; e < 256; ++e) {
        const int h = e / 128, k = (e % 128) / 32, l = e % 32;
        int low4;
        switch (k) {
          case 0: low4 = ql[64 * h + l] & 0xF; break;
          case 1: low4 = ql[64 * h + 32 + l] & 0xF; break;
          case 2: low4 = ql[64 * h + l] >> 4; break;
          default: low4 = ql[64 * h + 32 + l] >> 4; break;
        }
        const int hi2 = (qh[32 * h + l] >> (2 * k)) & 3;
        y[e] = d * scales[e / 16] * ((low4 | hi2 << 4) - 32);
      }
      break;
    }
    default: FAIL() << "no reference for " << NameOf(type);
  }
}

bool SameFloat(float a, float b) {
  return (std::isnan(a) && std::isnan(b)) || std::bit_cast<uint32_t>(a) == std::bit_cast<uint32_t>(b);
}

const DType kQuantTypes[] = {DType::kQ8_0, DType::kQ4_0, DType::kQ4_1, DType::kQ5_0,
                             DType::kQ5_1, DType::kQ4_K, DType::kQ5_K, DType::kQ6_K};

// ---- Float conversions ------------------------------------------------------

TEST(Dequant, F16ToF32AllPatterns) {
  for (uint32_t h = 0; h < 65536; ++h) {
    const float got = F16ToF32(static_cast<uint16_t>(h));
    const double want = RefF16(static_cast<uint16_t>(h));
    if (std::isnan(want)) {
      ASSERT_TRUE(std::isnan(got)) << h;
      ASSERT_EQ(std::signbit(got), (h & 0x8000) != 0) << h;
    } else {
      ASSERT_TRUE(SameFloat(got, static_cast<float>(want))) << std::hex << h;
    }
  }
}

TEST(Dequant, F32ToF16RoundsToNearestEven) {
  std::mt19937 rng(1);
  std::vector<float> vals = {0.f, -0.f, 65504.f, 65519.99f, 65520.f, -65520.f, 1e9f, INFINITY,
                             -INFINITY, 0x1p-24f, 0x1p-25f, 0x1.8p-25f, 0x1p-26f, 0x1p-14f,
                             0x1.ffcp-15f, 1.f + 0x1p-11f, 1.f + 0x3p-11f, 1e-30f};
  for (uint32_t h = 0; h < 0x7C00; ++h) {  // every F16 value and the midpoints around it
    const float v = static_cast<float>(RefF16(static_cast<uint16_t>(h)));
    const float next = static_cast<float>(RefF16(static_cast<uint16_t>(h + 1)));
    vals.push_back(v);
    vals.push_back(-(v + next) / 2);  // exact midpoint in F32 (or the nearest)
    vals.push_back(std::nextafter((v + next) / 2, 0.f));
  }
  for (int i = 0; i < 200000; ++i) vals.push_back(std::bit_cast<float>(static_cast<uint32_t>(rng())));
  for (float f : vals) {
    const uint16_t got = F32ToF16(f);
    if (std::isnan(f)) {
      EXPECT_TRUE(std::isnan(RefF16(got)));
      continue;
    }
    ASSERT_EQ(got, RefToF16(f)) << std::hexfloat << f;
  }
}

TEST(Dequant, BF16) {
  std::mt19937 rng(2);
  std::vector<float> vals = {0.f, -0.f, INFINITY, -INFINITY, NAN, -NAN, 3.3895314e38f, 3.4e38f,
                             -3.4028235e38f, 1e-40f, 1.f + 0x1p-8f, 1.f + 0x3p-8f};
  for (int i = 0; i < 300000; ++i) vals.push_back(std::bit_cast<float>(static_cast<uint32_t>(rng())));
  for (float f : vals) {
    ASSERT_EQ(F32ToBF16(f), RefToBF16(f)) << std::hexfloat << f;
    if (std::isnan(f)) {
      EXPECT_TRUE(std::isnan(BF16ToF32(F32ToBF16(f))));
    }
  }
  for (uint32_t h = 0; h < 65536; ++h) {
    ASSERT_EQ(std::bit_cast<uint32_t>(BF16ToF32(static_cast<uint16_t>(h))), h << 16);
  }
}

// ---- Block dequantization ---------------------------------------------------

// Random blocks: random bytes, with the fp16 scales replaced by interesting
// values (max fp16, subnormals, zero, negative) in part of the blocks.
std::vector<uint8_t> RandomBlocks(DType type, int n_blocks, std::mt19937& rng) {
  const DTypeTraits tr = TraitsOf(type);
  std::vector<uint8_t> bytes(static_cast<size_t>(n_blocks * tr.block_bytes));
  for (auto& b : bytes) b = static_cast<uint8_t>(rng());
  const uint16_t specials[] = {0x7BFF, 0xFBFF, 0x0001, 0x8001, 0x03FF, 0x0000, 0x3C00, 0xBC00};
  // Offsets of the fp16 scale fields per block.
  std::vector<int> fields;
  switch (type) {
    case DType::kQ4_1: case DType::kQ5_1: case DType::kQ4_K: case DType::kQ5_K:
      fields = {0, 2}; break;
    case DType::kQ6_K: fields = {208}; break;
    default: fields = {0}; break;
  }
  for (int b = 0; b < n_blocks; ++b) {
    for (int f : fields) {
      uint16_t v = static_cast<uint16_t>(rng());
      if (b % 3 != 0) v = specials[rng() % std::size(specials)];
      else v &= 0x7BFF;  // random finite magnitude...
      if (rng() & 1) v ^= 0x8000;  // ... and sign
      std::memcpy(&bytes[b * tr.block_bytes + f], &v, 2);
    }
  }
  return bytes;
}

TEST(Dequant, EveryTypeMatchesFormula) {
  std::mt19937 rng(3);
  for (DType type : kQuantTypes) {
    const DTypeTraits tr = TraitsOf(type);
    const int n_blocks = 64;
    const std::vector<uint8_t> bytes = RandomBlocks(type, n_blocks, rng);
    std::vector<float> got(n_blocks * tr.block_elems), want(got.size());
    DequantizeRow(type, bytes.data(), got.data(), static_cast<int64_t>(got.size()));
    for (int b = 0; b < n_blocks; ++b) {
      RefDequantBlock(type, &bytes[b * tr.block_bytes], &want[b * tr.block_elems]);
    }
    for (size_t i = 0; i < got.size(); ++i) {
      ASSERT_TRUE(SameFloat(got[i], want[i]))
          << NameOf(type) << " element " << i << ": " << got[i] << " vs " << want[i];
    }
  }
  // F16 / BF16 rows.
  std::vector<uint16_t> h(4096);
  for (size_t i = 0; i < h.size(); ++i) h[i] = static_cast<uint16_t>(rng());
  std::vector<float> got(h.size());
  DequantizeRow(DType::kF16, h.data(), got.data(), static_cast<int64_t>(h.size()));
  for (size_t i = 0; i < h.size(); ++i) ASSERT_TRUE(SameFloat(got[i], static_cast<float>(RefF16(h[i]))));
  DequantizeRow(DType::kBF16, h.data(), got.data(), static_cast<int64_t>(h.size()));
  for (size_t i = 0; i < h.size(); ++i) {
    ASSERT_EQ(std::bit_cast<uint32_t>(got[i]), static_cast<uint32_t>(h[i]) << 16);
  }
}

// ---- Quantize -> dequantize error bounds ------------------------------------

TEST(Dequant, QuantizeRoundTripErrorBounds) {
  std::mt19937 rng(4);
  std::normal_distribution<float> normal(0.f, 1.f);
  const int64_t n = 4096;
  std::vector<float> x(n);
  for (auto& v : x) v = normal(rng) * (rng() % 16 == 0 ? 8.f : 1.f);  // some outliers
  x[5] = 0;
  for (int k = 32; k < 64; ++k) x[k] = 0;  // an all-zero block
  // Relative RMS error bounds, measured with some margin (the K-quants use our
  // simpler search; llama.cpp's is a little better).
  const std::map<DType, double> rms_bound = {
      {DType::kF16, 3e-4},  {DType::kBF16, 3e-3}, {DType::kQ8_0, 0.013}, {DType::kQ4_0, 0.18},
      {DType::kQ4_1, 0.14}, {DType::kQ5_0, 0.09}, {DType::kQ5_1, 0.07}, {DType::kQ4_K, 0.14},
      {DType::kQ5_K, 0.07}, {DType::kQ6_K, 0.035}};
  for (const auto& [type, bound] : rms_bound) {
    std::vector<uint8_t> q(RowBytes(type, n));
    std::vector<float> y(n);
    QuantizeRow(type, x.data(), q.data(), n);
    DequantizeRow(type, q.data(), y.data(), n);
    double err2 = 0, ref2 = 0;
    for (int64_t i = 0; i < n; ++i) {
      err2 += (y[i] - x[i]) * static_cast<double>(y[i] - x[i]);
      ref2 += x[i] * static_cast<double>(x[i]);
    }
    EXPECT_LE(std::sqrt(err2 / ref2), bound) << NameOf(type);
    for (int k = 32; k < 64; ++k) EXPECT_EQ(y[k], 0.f) << NameOf(type);
    // Per-element bounds for the 32-element types: within one quantization step.
    const int64_t blk = TraitsOf(type).block_elems;
    if (blk != 32) continue;
    for (int64_t b = 0; b < n / 32; ++b) {
      float lo = x[b * 32], hi = x[b * 32], amax = 0;
      for (int k = 0; k < 32; ++k) {
        lo = std::min(lo, x[b * 32 + k]);
        hi = std::max(hi, x[b * 32 + k]);
        amax = std::max(amax, std::fabs(x[b * 32 + k]));
      }
      const int levels = type == DType::kQ8_0 ? 254 : type == DType::kQ4_0 ? 16
                         : type == DType::kQ5_0 ? 32 : type == DType::kQ4_1 ? 15 : 31;
      const bool has_min = type == DType::kQ4_1 || type == DType::kQ5_1;
      const float step = has_min ? (hi - lo) / levels : 2 * amax / levels;
      for (int k = 0; k < 32; ++k) {
        const int64_t i = b * 32 + k;
        // Half a step from rounding, a full step at the clamped end of Q4_0/Q5_0,
        // plus the fp16 rounding of the scale (and min).
        EXPECT_LE(std::fabs(y[i] - x[i]), step * 1.01f + amax * 2e-3f) << NameOf(type) << " " << i;
      }
    }
  }
}

// ---- Fixture models -----------------------------------------------------------

// A minimal GGUF reader for the tests (tensor table only), so this test does
// not depend on the library's reader.
struct TinyGguf {
  struct Tensor {
    std::vector<int64_t> ne;
    DType type;
    uint64_t offset;
  };
  std::vector<uint8_t> bytes;
  std::map<std::string, Tensor> tensors;
  size_t data_start = 0;

  explicit TinyGguf(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), {});
    size_t pos = 4;
    auto u32 = [&] { uint32_t v; std::memcpy(&v, &bytes.at(pos), 4); pos += 4; return v; };
    auto u64 = [&] { uint64_t v; std::memcpy(&v, &bytes.at(pos), 8); pos += 8; return v; };
    auto str = [&] { const uint64_t n = u64(); std::string s(reinterpret_cast<char*>(&bytes.at(pos)), n); pos += n; return s; };
    const size_t scalar_size[] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};
    uint32_t alignment = 32;
    u32();  // version
    const uint64_t n_tensors = u64(), n_kv = u64();
    for (uint64_t i = 0; i < n_kv; ++i) {
      const std::string key = str();
      const uint32_t type = u32();
      if (type == 8) {
        str();
      } else if (type == 9) {
        const uint32_t et = u32();
        const uint64_t n = u64();
        for (uint64_t k = 0; k < n; ++k) {
          if (et == 8) str();
          else pos += scalar_size[et];
        }
      } else {
        if (key == "general.alignment") {
          alignment = u32();
          pos -= 4;
        }
        pos += scalar_size[type];
      }
    }
    for (uint64_t i = 0; i < n_tensors; ++i) {
      const std::string name = str();
      Tensor t;
      t.ne.resize(u32());
      for (auto& v : t.ne) v = static_cast<int64_t>(u64());
      t.type = static_cast<DType>(u32());
      t.offset = u64();
      tensors[name] = t;
    }
    data_start = (pos + alignment - 1) / alignment * alignment;
  }

  std::vector<float> Dequantize(const std::string& name) const {
    const Tensor& t = tensors.at(name);
    int64_t rows = 1;
    for (size_t d = 1; d < t.ne.size(); ++d) rows *= t.ne[d];
    std::vector<float> out(static_cast<size_t>(rows * t.ne[0]));
    const uint8_t* p = bytes.data() + data_start + t.offset;
    for (int64_t r = 0; r < rows; ++r) {
      DequantizeRow(t.type, p + r * RowBytes(t.type, t.ne[0]), &out[r * t.ne[0]], t.ne[0]);
    }
    return out;
  }
};

TEST(Dequant, FixtureModelsMatchF32Weights) {
  const std::string dir = std::string(KAKEYA_FIXTURES) + "/models/";
  const TinyGguf f32(dir + "tiny-llama-f32.gguf");
  int checked[64] = {};
  for (const char* file : {"tiny-llama-q8_0", "tiny-llama-q4_0", "tiny-llama-q4_k_m",
                           "tiny-llama-q6_k", "tiny-llama-f16", "tiny-llama-bf16"}) {
    const TinyGguf q(dir + file + ".gguf");
    for (const auto& [name, t] : q.tensors) {
      if (t.type == DType::kF32 || !IsSupportedWeightType(t.type)) continue;
      const std::vector<float> got = q.Dequantize(name);
      const std::vector<float> want = f32.Dequantize(name);
      ASSERT_EQ(got.size(), want.size()) << file << " " << name;
      const int64_t blk = std::max<int64_t>(TraitsOf(t.type).block_elems, 32);
      double err2 = 0, ref2 = 0;
      for (size_t b = 0; b < got.size() / blk; ++b) {
        float amax = 0;
        for (int64_t k = 0; k < blk; ++k) amax = std::max(amax, std::fabs(want[b * blk + k]));
        for (int64_t k = 0; k < blk; ++k) {
          const size_t i = b * blk + k;
          err2 += (got[i] - want[i]) * static_cast<double>(got[i] - want[i]);
          ref2 += want[i] * static_cast<double>(want[i]);
          switch (t.type) {
            case DType::kF16:  // gguf-py rounds to nearest even, as F32ToF16
              ASSERT_EQ(F32ToF16(want[i]), F32ToF16(got[i])) << name;
              ASSERT_EQ(got[i], F16ToF32(F32ToF16(want[i]))) << name;
              break;
            case DType::kBF16:
              ASSERT_EQ(got[i], BF16ToF32(F32ToBF16(want[i]))) << name;
              break;
            case DType::kQ8_0:  // within one quantization step (amax / 127)
              ASSERT_LE(std::fabs(got[i] - want[i]), amax / 127 * 1.01f) << file << " " << name;
              break;
            case DType::kQ4_0:  // step amax / 8, a full one at the clamped end
            case DType::kQ5_0:
              ASSERT_LE(std::fabs(got[i] - want[i]),
                        amax / (t.type == DType::kQ4_0 ? 8 : 16) * 1.01f) << file << " " << name;
              break;
            default: break;
          }
        }
      }
      const double rel = std::sqrt(err2 / ref2);
      const std::map<DType, double> rms_bound = {
          {DType::kF16, 1e-3},  {DType::kBF16, 3e-3}, {DType::kQ8_0, 7e-3}, {DType::kQ4_0, 0.1},
          {DType::kQ5_0, 0.05}, {DType::kQ4_K, 0.085}, {DType::kQ6_K, 0.022}};
      const double bound = rms_bound.at(t.type);
      EXPECT_LE(rel, bound) << file << " " << name << " " << NameOf(t.type);
      ++checked[static_cast<int>(t.type)];
    }
  }
  for (DType t : {DType::kQ8_0, DType::kQ4_0, DType::kQ5_0, DType::kQ4_K, DType::kQ6_K,
                  DType::kF16, DType::kBF16}) {
    EXPECT_GT(checked[static_cast<int>(t)], 0) << NameOf(t);
  }
}

}  // namespace
}  // namespace kakeya
