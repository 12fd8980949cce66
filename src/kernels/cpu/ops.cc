#include "kernels/cpu/ops.h"

// The vector types below are passed only between always_inline functions, so
// the ABI note GCC gives for each one (-Wpsabi) never applies.
#pragma GCC diagnostic ignored "-Wpsabi"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>
#include <limits>

#include "kernels/cpu/dequant.h"
#include "kernels/cpu/matmul.h"

namespace kakeya {

void AddInPlace(float* x, const float* y, int n) {
  for (int i = 0; i < n; ++i) x[i] += y[i];
}

namespace {

// 16 floats as one value: GCC/Clang vector extensions, lowered to whatever
// width the function is compiled for (one zmm, two ymm, four xmm) with the
// same element-wise arithmetic, so the sums below keep one order everywhere.
typedef float Float16x __attribute__((vector_size(64)));
constexpr int kLanes = 16;

inline __attribute__((always_inline)) Float16x Load16(const float* p) {
  Float16x v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

typedef float Float8x __attribute__((vector_size(32)));
typedef float Float4x __attribute__((vector_size(16)));
typedef float Float2x __attribute__((vector_size(8)));
typedef double Double8x __attribute__((vector_size(64)));
typedef double Double4x __attribute__((vector_size(32)));
typedef double Double2x __attribute__((vector_size(16)));
typedef uint32_t UInt16x __attribute__((vector_size(64)));

// Adds the upper half of a vector onto its lower half: lane l += lane l + width/2.
template <typename Half, typename Whole>
inline __attribute__((always_inline)) Half FoldHalves(const Whole& v) {
  Half lo, hi;
  std::memcpy(&lo, &v, sizeof lo);
  std::memcpy(&hi, reinterpret_cast<const char*>(&v) + sizeof lo, sizeof hi);
  return lo + hi;
}

// The lanes of v added in a fixed tree: lane l += lane l + 8, then + 4, + 2, + 1.
inline __attribute__((always_inline)) float SumLanes(const Float16x& v) {
  const Float2x pair = FoldHalves<Float2x>(FoldHalves<Float4x>(FoldHalves<Float8x>(v)));
  return pair[0] + pair[1];
}

// Lane j = SumLanes(v[j]) for 16 vectors at once: each level of SumLanes'
// tree (halves of 8, 4, 2, then 1 lane) done for several vectors per add by
// gathering their lower and upper halves into two vectors. The same pairs are
// added in the same order, so every lane has SumLanes' bits; summing one
// vector at a time went through memory (a 64-byte store read back as scalars,
// which stalls store forwarding) and was half the time of attention.
inline __attribute__((always_inline)) Float16x SumLanes16(const Float16x (&v)[kLanes]) {
  Float16x eights[8], fours[4], twos[2];
  for (int m = 0; m < 8; ++m) {  // keys 2m, 2m+1: 8 lanes each
    eights[m] = __builtin_shufflevector(v[2 * m], v[2 * m + 1], 0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21, 22, 23) +
                __builtin_shufflevector(v[2 * m], v[2 * m + 1], 8, 9, 10, 11, 12, 13, 14, 15, 24, 25, 26, 27, 28, 29, 30, 31);
  }
  for (int m = 0; m < 4; ++m) {  // keys 4m .. 4m+3: 4 lanes each
    fours[m] = __builtin_shufflevector(eights[2 * m], eights[2 * m + 1], 0, 1, 2, 3, 8, 9, 10, 11, 16, 17, 18, 19, 24, 25, 26, 27) +
               __builtin_shufflevector(eights[2 * m], eights[2 * m + 1], 4, 5, 6, 7, 12, 13, 14, 15, 20, 21, 22, 23, 28, 29, 30, 31);
  }
  for (int m = 0; m < 2; ++m) {  // keys 8m .. 8m+7: 2 lanes each
    twos[m] = __builtin_shufflevector(fours[2 * m], fours[2 * m + 1], 0, 1, 4, 5, 8, 9, 12, 13, 16, 17, 20, 21, 24, 25, 28, 29) +
              __builtin_shufflevector(fours[2 * m], fours[2 * m + 1], 2, 3, 6, 7, 10, 11, 14, 15, 18, 19, 22, 23, 26, 27, 30, 31);
  }
  return __builtin_shufflevector(twos[0], twos[1], 0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30) +
         __builtin_shufflevector(twos[0], twos[1], 1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
}

// e^x for x <= 0 (softmax terms) in 16 lanes: Cephes' expf (x = n ln2 + r,
// degree-5 polynomial for e^r, 2^n through the exponent bits), within a few
// ulp of std::exp. Below -87 it returns ~1e-38 instead of denormals or 0,
// which no softmax sum (>= 1: the maximum's term is e^0) can see.
inline __attribute__((always_inline)) Float16x ExpNonPositive(Float16x x) {
  typedef int32_t Int16x __attribute__((vector_size(64)));
  const Float16x zero = {};
  x = x < zero - 87.0f ? zero - 87.0f : x;
  const Float16x magic = zero + 12582912.0f;  // 1.5 * 2^23: adding it rounds to an integer
  const Float16x t = x * 1.44269504088896341f + magic;
  const Float16x n = t - magic;
  Float16x r = x - n * 0.693359375f;
  r = r - n * -2.12194440e-4f;
  Float16x p = r * 1.9875691500e-4f + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.0f;
  Int16x t_bits, magic_bits;
  std::memcpy(&t_bits, &t, sizeof t);
  std::memcpy(&magic_bits, &magic, sizeof magic);
  const Int16x exponent = (t_bits - magic_bits + 127) << 23;  // the bits of 2^n
  Float16x scale;
  std::memcpy(&scale, &exponent, sizeof scale);
  return p * scale;
}

}  // namespace

// The sum of squares in double (as ggml) with 8 partial sums (lane l sums
// elements l, l + 8, ...) added in a fixed tree, then the scaling 16 lanes at a
// time. One chain of dependent double adds made this latency-bound: a norm of
// 384 took ~0.4 us, and a layer runs 4 of them per row plus the q/k norms.
// A float's square is exact in double, so fused or separate multiply-adds give
// the same sum.
static inline __attribute__((always_inline)) void RmsNormBody(const float* x, const float* w, int n, float eps,
                                                      float* out) {
  Double8x part = {};
  int i = 0;
  for (; i + 8 <= n; i += 8) {
    Float8x f;
    std::memcpy(&f, x + i, sizeof f);
    const Double8x d = __builtin_convertvector(f, Double8x);
    part += d * d;
  }
  for (int l = 0; i < n; ++i, ++l) part[l] += static_cast<double>(x[i]) * x[i];
  const Double2x pair = FoldHalves<Double2x>(FoldHalves<Double4x>(part));
  const float mean = static_cast<float>((pair[0] + pair[1]) / n);
  const float scale = 1.0f / std::sqrt(mean + eps);
  i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    Float16x v = Load16(x + i) * scale;
    if (w != nullptr) v *= Load16(w + i);
    std::memcpy(out + i, &v, sizeof v);
  }
  for (; i < n; ++i) out[i] = w != nullptr ? x[i] * scale * w[i] : x[i] * scale;
}

void RopeAngles(int n_rot, int pos, float base, const float* freq_factors, float* cos_sin) {
  const float theta_scale = std::pow(base, -2.0f / static_cast<float>(n_rot));
  const int half = n_rot / 2;
  float theta = static_cast<float>(pos);
  for (int i = 0; i < half; ++i) {
    const float angle = freq_factors != nullptr ? theta / freq_factors[i] : theta;
    cos_sin[i] = std::cos(angle);
    cos_sin[half + i] = std::sin(angle);
    theta *= theta_scale;
  }
}

void Rope(float* x, int n_heads, int head_dim, int n_rot, const float* cos_sin, bool adjacent_pairs) {
  const int half = n_rot / 2;
  for (int h = 0; h < n_heads; ++h) {
    float* v = x + static_cast<int64_t>(h) * head_dim;
    for (int i = 0; i < half; ++i) {
      const float c = cos_sin[i];
      const float s = cos_sin[half + i];
      const int a = adjacent_pairs ? 2 * i : i;
      const int b = adjacent_pairs ? 2 * i + 1 : i + half;
      const float x0 = v[a];
      const float x1 = v[b];
      v[a] = x0 * c - x1 * s;
      v[b] = x0 * s + x1 * c;
    }
  }
}

namespace {

// Scores of 16 consecutive keys (pointers kj) for one query head qh: key j's
// q . k is 16 partial sums (lane l sums elements l, l + 16, ...) added by
// SumLanes, times the scale. The 16 keys' sums are independent chains, which
// the loop over keys inside the loop over elements keeps in flight together
// (one key at a time waited on each multiply-add's latency).
inline __attribute__((always_inline)) Float16x ScoreBlock(const float* qh, const float* const (&kj)[kLanes],
                                                          int head_dim, float scale) {
  Float16x part[kLanes] = {};
  int d = 0;
  for (; d + kLanes <= head_dim; d += kLanes) {
    const Float16x qd = Load16(qh + d);
#pragma GCC unroll 16
    for (int j = 0; j < kLanes; ++j) part[j] += qd * Load16(kj[j] + d);
  }
  // head_dim not a multiple of 16: element d goes to lane l as a select, so
  // that part[] is only ever indexed by constants and stays in registers.
  typedef int32_t Int16x __attribute__((vector_size(64)));
  const Int16x lanes = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15};
  for (int l = 0; d < head_dim; ++d, ++l) {
    const Float16x qd = Float16x{} + qh[d];
    for (int j = 0; j < kLanes; ++j) {
      const Float16x sum = part[j] + qd * (Float16x{} + kj[j][d]);
      part[j] = lanes == l ? sum : part[j];
    }
  }
  return SumLanes16(part) * scale;
}

// scores[j] = e^(scores[j] - max) / sum, 16 keys at a time; the last partial
// vector is padded with the maximum's own score and its padding lanes cleared.
inline __attribute__((always_inline)) void Softmax(float* scores, int n_keys, float max_score) {
  Float16x sums = {};
  for (int j = 0; j < n_keys; j += kLanes) {
    const int lanes = std::min(kLanes, n_keys - j);
    Float16x x = {};
    x += max_score;
    std::memcpy(&x, scores + j, sizeof(float) * lanes);
    Float16x e = ExpNonPositive(x - max_score);
    for (int l = lanes; l < kLanes; ++l) e[l] = 0.0f;
    std::memcpy(scores + j, &e, sizeof(float) * lanes);
    sums += e;
  }
  const float inv_sum = 1.0f / SumLanes(sums);
  for (int j = 0; j < n_keys; ++j) scores[j] *= inv_sum;
}

// out[h][d] += sum over keys j < n_keys of weight[h][j] * vj[j][d] for N heads
// that share the values, in key order for every element d. 64 elements per
// pass make four independent accumulator chains per head (one waited on the
// latency of each add); two heads at a time make eight, on one load of values.
template <int N>
inline __attribute__((always_inline)) void AddWeightedValues(const float* const (&weight)[N], const float* const* vj,
                                                             int n_keys, int value_dim, float* const (&out)[N]) {
  constexpr int kChains = 4;
  int d0 = 0;
  for (; d0 + kChains * kLanes <= value_dim; d0 += kChains * kLanes) {
    Float16x acc[N][kChains];
    for (int h = 0; h < N; ++h) std::memcpy(acc[h], out[h] + d0, sizeof acc[h]);
    for (int j = 0; j < n_keys; ++j) {
      for (int c = 0; c < kChains; ++c) {
        const Float16x v = Load16(vj[j] + d0 + c * kLanes);
        for (int h = 0; h < N; ++h) acc[h][c] += weight[h][j] * v;
      }
    }
    for (int h = 0; h < N; ++h) std::memcpy(out[h] + d0, acc[h], sizeof acc[h]);
  }
  for (; d0 + kLanes <= value_dim; d0 += kLanes) {
    Float16x acc[N];
    for (int h = 0; h < N; ++h) acc[h] = Load16(out[h] + d0);
    for (int j = 0; j < n_keys; ++j) {
      const Float16x v = Load16(vj[j] + d0);
      for (int h = 0; h < N; ++h) acc[h] += weight[h][j] * v;
    }
    for (int h = 0; h < N; ++h) std::memcpy(out[h] + d0, &acc[h], sizeof acc[h]);
  }
  for (; d0 < value_dim; ++d0) {  // value_dim not a multiple of 16
    for (int h = 0; h < N; ++h) {
      float acc = out[h][d0];
      for (int j = 0; j < n_keys; ++j) acc += weight[h][j] * vj[j][d0];
      out[h][d0] = acc;
    }
  }
}

}  // namespace

size_t AttendScratchFloats(const AttentionShape& s, int n_rows, int max_keys) {
  const size_t slots = size_t(n_rows) * (s.n_head / s.n_head_kv);
  return slots * max_keys + slots;
}

// Keys and values are read in blocks of 16 positions, each block used by
// every (row, head) of the call while it is in L1: one (row, head) at a time
// streamed the whole window from L2 for each, and attention was a quarter of
// a 6-row verify step of the shipped 20M model. Each (row, head) still
// visits its keys in position order with the arithmetic of a lone pass.
static inline __attribute__((always_inline)) void AttendKvHeadBody(const AttentionShape& s, int kv_head,
                                                           const AttentionRows& rows, const KvView& kv,
                                                           float* scratch) {
  const int group = s.n_head / s.n_head_kv;
  const int64_t k_offset = static_cast<int64_t>(kv_head) * s.head_dim;
  const int64_t v_offset = static_cast<int64_t>(kv_head) * s.value_dim;
  auto first_key = [&](int pos) { return FirstVisiblePosition(pos, rows.window); };
  const int first_pos = rows.first_pos;
  // The last key row r sees: its own position, or the block's end for all.
  auto row_last = [&](int r) { return rows.block_end >= 0 ? rows.block_end : first_pos + r; };
  const int last_pos = row_last(rows.n_rows - 1);     // the last key any row sees
  const int begin = first_key(row_last(0));           // the earliest key any row sees
  const int stride = last_pos - first_key(last_pos) + 1;  // the last row sees the most keys
  const int slots = rows.n_rows * group;
  float* max_score = scratch + size_t(slots) * stride;
  // Row r's weights: [0] is its first key's.
  auto weights = [&](int r, int g) { return scratch + size_t(r * group + g) * stride; };
  auto query = [&](int r, int g) { return rows.q + r * rows.q_stride + int64_t(kv_head * group + g) * s.head_dim; };
  auto output = [&](int r, int g) { return rows.out + r * rows.out_stride + int64_t(kv_head * group + g) * s.value_dim; };
  // The part of block [p0, p1) that row r sees.
  auto visible = [&](int r, int p0, int p1, int* lo, int* hi) {
    *lo = std::max(p0, first_key(row_last(r)));
    *hi = std::min(p1, row_last(r) + 1);
    return *lo < *hi;
  };
  for (int i = 0; i < slots; ++i) max_score[i] = -std::numeric_limits<float>::infinity();

  // Scores, and each (row, head)'s running maximum in key order. A partial
  // block repeats its first key.
  for (int p0 = begin; p0 <= last_pos; p0 += kLanes) {
    const int p1 = std::min(p0 + kLanes, last_pos + 1);
    const float* kj[kLanes];
    for (int p = p0; p < p0 + kLanes; ++p) {
      kj[p - p0] = kv.k + (p < p1 ? p : p0) % kv.capacity * kv.k_stride + k_offset;
    }
    for (int r = 0; r < rows.n_rows; ++r) {
      int lo, hi;
      if (!visible(r, p0, p1, &lo, &hi)) continue;
      for (int g = 0; g < group; ++g) {
        Float16x score = ScoreBlock(query(r, g), kj, s.head_dim, s.scale);
        float* w = weights(r, g) + (lo - first_key(row_last(r)));
        float& max = max_score[r * group + g];
        for (int p = lo; p < hi; ++p) {
          float x = score[p - p0];
          if (s.softcap > 0.0f) x = s.softcap * std::tanh(x / s.softcap);
          w[p - lo] = x;
          if (x > max) max = x;
        }
      }
    }
  }
  for (int r = 0; r < rows.n_rows; ++r) {
    const int first = first_key(row_last(r));
    for (int g = 0; g < group; ++g) {
      Softmax(weights(r, g), row_last(r) - first + 1, max_score[r * group + g]);
      std::fill_n(output(r, g), s.value_dim, 0.0f);
    }
  }
  // Weighted values, block by block, into the outputs.
  for (int p0 = begin; p0 <= last_pos; p0 += kLanes) {
    const int p1 = std::min(p0 + kLanes, last_pos + 1);
    const float* vj[kLanes];
    for (int p = p0; p < p1; ++p) vj[p - p0] = kv.v + p % kv.capacity * kv.v_stride + v_offset;
    for (int r = 0; r < rows.n_rows; ++r) {
      int lo, hi;
      if (!visible(r, p0, p1, &lo, &hi)) continue;
      const int skip = lo - first_key(row_last(r));  // this block's first visible key, in the row's weights
      int g = 0;
      for (; g + 1 < group; g += 2) {
        const float* const w[2] = {weights(r, g) + skip, weights(r, g + 1) + skip};
        float* const o[2] = {output(r, g), output(r, g + 1)};
        AddWeightedValues<2>(w, vj + (lo - p0), hi - lo, s.value_dim, o);
      }
      if (g < group) {
        const float* const w[1] = {weights(r, g) + skip};
        float* const o[1] = {output(r, g)};
        AddWeightedValues<1>(w, vj + (lo - p0), hi - lo, s.value_dim, o);
      }
    }
  }
}

namespace {

// GELU (tanh form) as ggml's CPU backend computes it: the input rounded to
// F16, the result rounded to F16. It is a function of the input's 16 F16 bits,
// so it is tabulated once (as ggml does), which replaces a tanh per element:
// on the shipped 12M model that tanh was 3x the time of all the matmuls.
const float* GeluTable() {
  static const std::vector<float> table = [] {
    constexpr float kSqrt2OverPi = 0.79788456080286535588f;
    constexpr float kCoef = 0.044715f;
    std::vector<float> t(1 << 16);
    for (uint32_t bits = 0; bits < t.size(); ++bits) {
      const float h = F16ToF32(static_cast<uint16_t>(bits));
      t[bits] = F16ToF32(F32ToF16(0.5f * h * (1.0f + std::tanh(kSqrt2OverPi * h * (1.0f + kCoef * h * h)))));
    }
    return t;
  }();
  return table.data();
}

// F32ToF16 (dequant.cc) of 16 lanes, each of its branches a select.
inline __attribute__((always_inline)) UInt16x F32ToF16Lanes(Float16x f) {
  UInt16x u, sub_bits;
  std::memcpy(&u, &f, sizeof u);
  const UInt16x sign = (u >> 16) & 0x8000u;
  const UInt16x a = u & 0x7FFFFFFFu;
  Float16x sub;
  std::memcpy(&sub, &a, sizeof sub);
  sub += 0.5f;
  std::memcpy(&sub_bits, &sub, sizeof sub_bits);
  UInt16x h = (a + 0xC8000FFFu + ((a >> 13) & 1u)) >> 13;
  h = a < 0x38800000u ? sub_bits - 0x3F000000u : h;
  const UInt16x infinity = UInt16x{} + 0x7C00u;
  h = a >= 0x477FF000u ? infinity : h;
  h = a > 0x7F800000u ? (0x7E00u | ((a >> 13) & 0x3FFu)) : h;
  return sign | h;
}

}  // namespace

// 16 lanes at a time: the F16 rounding inlined as selects and the table read
// per lane; as a scalar loop with a call to F32ToF16 per element it was 5% of a
// 4-row verify step on the shipped 20M model, all of it on the calling thread.
static inline __attribute__((always_inline)) void GeluMulBody(const float* gate, const float* up, int n, float* out) {
  const float* table = GeluTable();
  const Float16x zero = {};
  int i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    const Float16x x = Load16(gate + i);
    const UInt16x h = F32ToF16Lanes(x);
    Float16x g;
    for (int l = 0; l < kLanes; ++l) g[l] = table[h[l]];
    g = x <= zero - 10.0f ? zero : x >= zero + 10.0f ? x : g;
    const Float16x y = g * Load16(up + i);
    std::memcpy(out + i, &y, sizeof y);
  }
  for (; i < n; ++i) {
    const float x = gate[i];
    const float g = x <= -10.0f ? 0.0f : x >= 10.0f ? x : table[F32ToF16(x)];
    out[i] = g * up[i];
  }
}

// silu(g) = g * sigmoid(g), with the exponential only of -|g| (ExpNonPositive)
// so that it never overflows: sigmoid(g) = 1 / (1 + e) for g >= 0 and
// e / (1 + e) below, e = e^-|g|. With std::exp per element it ran on the
// calling thread while the other waited: 1.25B Q8_0, 2 threads, alternating
// runs, 128-row prefill 367-417 -> 337-375 ms, 16-row verify 60-67 -> 56-63.
static inline __attribute__((always_inline)) Float16x SiluMulLanes(Float16x g, Float16x up) {
  const Float16x zero = {};
  const Float16x e = ExpNonPositive(g < zero ? g : zero - g);
  return g * ((g < zero ? e : zero + 1.0f) / (1.0f + e)) * up;
}

static inline __attribute__((always_inline)) void SiluMulBody(const float* gate, const float* up, int n, float* out) {
  int i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    const Float16x y = SiluMulLanes(Load16(gate + i), Load16(up + i));
    std::memcpy(out + i, &y, sizeof y);
  }
  if (i == n) return;
  // The tail as one zero-padded vector: every element gets the same arithmetic.
  Float16x g = {}, u = {};
  std::memcpy(&g, gate + i, (n - i) * sizeof(float));
  std::memcpy(&u, up + i, (n - i) * sizeof(float));
  const Float16x y = SiluMulLanes(g, u);
  std::memcpy(out + i, &y, (n - i) * sizeof(float));
}

// RmsNorm, AttendKvHead, GeluMul and SiluMul are compiled for AVX-512, AVX2 and the
// baseline (the vector types above lower to each width with the same
// arithmetic) and run in the build that the active CPU target names
// (ActiveVectorIsa, matmul.h), so KAKEYA_CPU_TARGET and the tests that force
// each target reach them as they reach MatMul. Measured on Zen 5 (1.25B
// Q4_K_M, 8 rows, context 64): attention alone was 11% of the step in the
// baseline (SSE2) build. GCC's target_clones chose by CPU at load instead,
// which no test could override and which ThreadSanitizer builds crash on.
// GCC contracts a * b + c into FMA where the ISA has it (C++ defaults to
// -ffp-contract=fast), so attention's bits differ between the FMA builds and
// the baseline; RmsNorm (exact squares) and GeluMul (a table) do not.
#if defined(__x86_64__) && defined(__GNUC__)
#define KAKEYA_PER_ISA(name, params, args)                                         \
  static __attribute__((target("avx512f"))) void name##Avx512 params { name##Body args; } \
  static __attribute__((target("avx2,fma"))) void name##Avx2 params { name##Body args; } \
  void name params {                                                               \
    switch (ActiveVectorIsa()) {                                                   \
      case VectorIsa::kAvx512: return name##Avx512 args;                           \
      case VectorIsa::kAvx2: return name##Avx2 args;                               \
      case VectorIsa::kBaseline: break;                                            \
    }                                                                              \
    name##Body args;                                                               \
  }
#else
#define KAKEYA_PER_ISA(name, params, args) \
  void name params { name##Body args; }
#endif

KAKEYA_PER_ISA(RmsNorm, (const float* x, const float* w, int n, float eps, float* out), (x, w, n, eps, out))
KAKEYA_PER_ISA(AttendKvHead,
               (const AttentionShape& s, int kv_head, const AttentionRows& rows, const KvView& kv, float* scratch),
               (s, kv_head, rows, kv, scratch))
KAKEYA_PER_ISA(GeluMul, (const float* gate, const float* up, int n, float* out), (gate, up, n, out))
KAKEYA_PER_ISA(SiluMul, (const float* gate, const float* up, int n, float* out), (gate, up, n, out))
#undef KAKEYA_PER_ISA

void Scale(float* x, int n, float s) {
  for (int i = 0; i < n; ++i) x[i] *= s;
}

void SoftCap(float* x, int n, float cap) {
  for (int i = 0; i < n; ++i) x[i] = cap * std::tanh(x[i] / cap);
}

}  // namespace kakeya
