#include "kernels/cpu/attention.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

#include "base/portable_math.h"
#include "kernels/cpu/dequant.h"
#include "kernels/cpu/kv_codec.h"
#include "kernels/cpu/kv_dots.h"
#include "kernels/cpu/kv_read-inl.h"
#include "kernels/cpu/vec16-inl.h"

namespace kakeya {
namespace {

// Scores of 16 consecutive keys (pointers kj) for one query head qh: key j's
// q . k is 16 partial sums (lane l sums elements l, l + 16, ...) added by
// SumLanes, times the scale. The 16 keys' sums are independent chains, which
// the loop over keys inside the loop over elements keeps in flight together
// (one key at a time waited on each multiply-add's latency).
template <typename V>
inline __attribute__((always_inline)) V ScoreBlock(const float* qh, const float* const (&kj)[kLanes], int head_dim,
                                                   float scale) {
  // Four keys' chains at a time: all sixteen at once did not fit AVX2's
  // registers. Each key's sum is the same either way.
  constexpr int kKeysAtOnce = 4;
  V part[kLanes];
  for (int j0 = 0; j0 < kLanes; j0 += kKeysAtOnce) {
    V acc0 = {}, acc1 = {}, acc2 = {}, acc3 = {};
    int d = 0;
    for (; d + kLanes <= head_dim; d += kLanes) {
      const V qd = LoadLanes<V>(qh + d);
      acc0 += qd * LoadLanes<V>(kj[j0] + d);
      acc1 += qd * LoadLanes<V>(kj[j0 + 1] + d);
      acc2 += qd * LoadLanes<V>(kj[j0 + 2] + d);
      acc3 += qd * LoadLanes<V>(kj[j0 + 3] + d);
    }
    part[j0] = acc0, part[j0 + 1] = acc1, part[j0 + 2] = acc2, part[j0 + 3] = acc3;
    // head_dim not a multiple of 16: element d goes into lane l of each sum.
    for (int l = 0; d < head_dim; ++d, ++l) {
      for (int j = j0; j < j0 + kKeysAtOnce; ++j) {
        float lanes[kLanes];
        std::memcpy(lanes, &part[j], sizeof lanes);
        lanes[l] += qh[d] * kj[j][d];
        std::memcpy(&part[j], lanes, sizeof lanes);
      }
    }
  }
  return SumLanes16(part) * scale;
}

// scores[j] = e^(scores[j] - max) / sum, 16 keys at a time; the last partial
// vector is padded with the maximum's own score and its padding lanes cleared.
template <typename V>
inline __attribute__((always_inline)) void Softmax(float* scores, int n_keys, float max_score) {
  V sums = {};
  int j = 0;
  for (; j + kLanes <= n_keys; j += kLanes) {
    const V e = ExpNonPositive(LoadLanes<V>(scores + j) - max_score);
    StoreLanes(scores + j, e);
    sums += e;
  }
  if (j < n_keys) {
    const int lanes = n_keys - j;
    V x = Splat<V>(max_score);
    std::memcpy(&x, scores + j, sizeof(float) * lanes);
    V e = ExpNonPositive(x - max_score);
    std::memset(reinterpret_cast<float*>(&e) + lanes, 0, sizeof(float) * (kLanes - lanes));
    std::memcpy(scores + j, &e, sizeof(float) * lanes);
    sums += e;
  }
  const float inv_sum = 1.0f / SumLanes(sums);
  for (int i = 0; i < n_keys; ++i) scores[i] *= inv_sum;
}

// out[h][d] += sum over keys j < n_keys of weight[h][j] * vj[j][d] for one
// or two heads that share the values, in key order for every element d: 16
// elements at a time, one load of values for both heads. The accumulators
// are named variables, not arrays: GCC kept arrays of vectors in memory, a
// store and a reload on every key (and with more chains of 16 elements at a
// time, AVX2's 16 registers spilled).
template <typename V, int N>
inline __attribute__((always_inline)) void AddWeightedValues(const float* const (&weight)[N], const float* const* vj,
                                                             int n_keys, int value_dim, float* const (&out)[N]) {
  static_assert(N == 1 || N == 2);
  int d0 = 0;
  for (; d0 + kLanes <= value_dim; d0 += kLanes) {
    V acc0 = LoadLanes<V>(out[0] + d0);
    V acc1 = N == 2 ? LoadLanes<V>(out[N - 1] + d0) : V{};
    for (int j = 0; j < n_keys; ++j) {
      const V v = LoadLanes<V>(vj[j] + d0);
      acc0 += weight[0][j] * v;
      if constexpr (N == 2) acc1 += weight[1][j] * v;
    }
    StoreLanes(out[0] + d0, acc0);
    if constexpr (N == 2) StoreLanes(out[1] + d0, acc1);
  }
  for (; d0 < value_dim; ++d0) {  // value_dim not a multiple of 16
    for (int h = 0; h < N; ++h) {
      float acc = out[h][d0];
      for (int j = 0; j < n_keys; ++j) acc += weight[h][j] * vj[j][d0];
      out[h][d0] = acc;
    }
  }
}

// 16 int32 lanes as floats (exact: the codec's sums stay below 2^24).
template <typename V>
inline __attribute__((always_inline)) V IntLanes(const int32_t* p) {
  if constexpr (std::is_same_v<V, Float16x>) {
    Int16x i;
    std::memcpy(&i, p, sizeof i);
    return __builtin_convertvector(i, Float16x);
  } else {
    Int8x lo, hi;
    std::memcpy(&lo, p, sizeof lo);
    std::memcpy(&hi, p + 8, sizeof hi);
    return {__builtin_convertvector(lo, Float8x), __builtin_convertvector(hi, Float8x)};
  }
}

// 16 lanes holding whole numbers from 0 to 127, as bytes.
template <typename V>
inline __attribute__((always_inline)) void ByteLanes(const V& v, uint8_t* out) {
  if constexpr (std::is_same_v<V, Float16x>) {
    typedef uint8_t UByte16x __attribute__((vector_size(16)));
    const UByte16x b = __builtin_convertvector(__builtin_convertvector(v, Int16x), UByte16x);
    std::memcpy(out, &b, sizeof b);
  } else {
    const UByte8x lo = __builtin_convertvector(__builtin_convertvector(v.lo, Int8x), UByte8x);
    const UByte8x hi = __builtin_convertvector(__builtin_convertvector(v.hi, Int8x), UByte8x);
    std::memcpy(out, &lo, sizeof lo);
    std::memcpy(out + 8, &hi, sizeof hi);
  }
}

}  // namespace

size_t AttendScratchFloats(const AttentionShape& s, int n_rows, int max_keys) {
  const size_t slots = size_t(n_rows) * (s.n_head / s.n_head_kv);
  // Weights and maxima; a block's decoded keys and values; rotated queries
  // in 8 bits, their sums and factors, and rotated value sums (the codec).
  return slots * max_keys + slots + size_t(kLanes) * (s.head_dim + s.value_dim) +
         slots * (s.head_dim / 4 + 2 + s.value_dim);
}

KvView F32KvView(const float* k, int64_t k_stride, int head_dim, const float* v, int64_t v_stride, int value_dim,
                 int capacity) {
  constexpr int64_t kF = sizeof(float);
  KvView view{};
  view.k = {reinterpret_cast<const uint8_t*>(k), k_stride * kF, head_dim * kF};
  view.v = {reinterpret_cast<const uint8_t*>(v), v_stride * kF, value_dim * kF};
  view.capacity = capacity;
  return view;
}

// Keys and values are read in blocks of 16 positions, each block used by
// every (row, head) of the call while it is in L1: one (row, head) at a time
// streamed the whole window from L2 for each, and attention was a quarter of
// a 6-row verify step of the shipped 20M model. Each (row, head) still
// visits its keys in position order with the arithmetic of a lone pass.
// F32 rows are read where they lie; a block of any other type is decoded
// once into F32 rows of the scratch for every (row, head) of the call. With
// the codec, a row reads each block exact or coded as a whole (CodedEnd):
// coded keys are rotated, so the row's queries are rotated once to meet
// them, and coded values are summed rotated and rotated back at the end.
template <typename V, bool kX86Vector>
static inline __attribute__((always_inline)) void AttendKvHeadBody(const AttentionShape& s, int kv_head,
                                                           const AttentionRows& rows, const KvView& kv,
                                                           float* scratch) {
  const int group = s.n_head / s.n_head_kv;
  auto first_key = [&](int pos) { return FirstVisiblePosition(pos, rows.window); };
  const int first_pos = rows.first_pos;
  // The last key row r sees: its own position, or the block's end for all.
  auto row_last = [&](int r) { return rows.block_end >= 0 ? rows.block_end : first_pos + r; };
  const int last_pos = row_last(rows.n_rows - 1);     // the last key any row sees
  const int begin = first_key(row_last(0));           // the earliest key any row sees
  const int stride = last_pos - first_key(last_pos) + 1;  // the last row sees the most keys
  const int slots = rows.n_rows * group;
  float* max_score = scratch + size_t(slots) * stride;
  float* tile_k = max_score + slots;                       // F32 [16, head_dim]: a decoded block
  float* tile_v = tile_k + size_t(kLanes) * s.head_dim;    // F32 [16, value_dim]
  // The codec's: rotated queries in 8 bits, their sums and factors; value sums.
  auto* q8 = reinterpret_cast<int8_t*>(tile_v + size_t(kLanes) * s.value_dim);  // [slots, head_dim]
  auto* q_sum = reinterpret_cast<int32_t*>(q8 + size_t(slots) * s.head_dim);      // [slots]
  float* q_factor = reinterpret_cast<float*>(q_sum + slots);                       // [slots]
  float* out_rot = q_factor + slots;                                               // F32 [slots, value_dim]
  // Row r's weights: [0] is its first key's.
  auto weights = [&](int r, int g) { return scratch + size_t(r * group + g) * stride; };
  auto query = [&](int r, int g) { return rows.q + r * rows.q_stride + int64_t(kv_head * group + g) * s.head_dim; };
  auto output = [&](int r, int g) { return rows.out + r * rows.out_stride + int64_t(kv_head * group + g) * s.value_dim; };
  auto rotated_output = [&](int r, int g) { return out_rot + size_t(r * group + g) * s.value_dim; };
  // The part of block [p0, p1) that row r sees.
  auto visible = [&](int r, int p0, int p1, int* lo, int* hi) {
    *lo = std::max(p0, first_key(row_last(r)));
    *hi = std::min(p1, row_last(r) + 1);
    return *lo < *hi;
  };
  // Whether row r reads block p0 coded.
  const bool codec = kv.split.exact > 0;
  auto coded = [&](int r, int p0) __attribute__((always_inline)) {
    return codec && p0 >= kv.split.sink && p0 + kLanes <= std::min(CodedEnd(row_last(r), kv.split), kv.coded_through);
  };
  // Pointers to the 16 F32 rows of block [p0, p1) of keys or values: in the
  // cache (F32 rows, the codec's sink), or decoded into `tile`. A partial
  // block repeats its first row. A block's rows are all of one type: a
  // codec's exact and sink rows are F32 (its coded blocks are read by
  // integer dot products, kv_dots.h).
  // (always_inline: a lambda left out of line is compiled for the baseline
  // ISA, not the target this body is built for.)
  auto block_rows = [&](const float* (&out)[kLanes], int p0, int p1, bool keys, float* tile)
                        __attribute__((always_inline)) {
    const int dim = keys ? s.head_dim : s.value_dim;
    const KvRows& rows = keys ? kv.k : kv.v;
    const uint8_t* at[kLanes];
    for (int p = p0; p < p1; ++p) {
      if (codec && p < kv.split.sink) {
        at[p - p0] = (keys ? kv.sink_k : kv.sink_v).at(p, kv_head);
      } else {
        at[p - p0] = rows.at(p % kv.capacity, kv_head);
      }
    }
    const int n = p1 - p0;
    if (rows.type == KvType::kF32) {
      for (int i = 0; i < n; ++i) out[i] = reinterpret_cast<const float*>(at[i]);
    } else {
      DecodeHeads<kX86Vector>(rows.type, at, n, dim, tile);
      for (int i = 0; i < n; ++i) out[i] = tile + size_t(i) * dim;
    }
    for (int i = n; i < kLanes; ++i) out[i] = out[0];
  };
  // Whether some row reads block [p0, p1) exact, and whether some row reads it coded.
  auto wanted = [&](int p0, int p1, bool* exact, bool* coded_too) __attribute__((always_inline)) {
    *exact = *coded_too = false;
    for (int r = 0; r < rows.n_rows; ++r) {
      int lo, hi;
      if (visible(r, p0, p1, &lo, &hi)) (coded(r, p0) ? *coded_too : *exact) = true;
    }
  };
  for (int i = 0; i < slots; ++i) max_score[i] = -std::numeric_limits<float>::infinity();
  // A query reading coded keys is rotated to meet them and rounded to 8
  // bits against its largest coordinate; its factor takes the integer sums
  // back to scores.
  const CodedDots& dots = ActiveCodedDots();
  if (codec) {
    for (int r = 0; r < rows.n_rows; ++r) {
      if (!coded(r, kv.split.sink)) continue;  // reads nothing coded
      for (int g = 0; g < group; ++g) {
        const int pair = r * group + g;
        float* rotated = tile_k;
        std::memcpy(rotated, query(r, g), sizeof(float) * s.head_dim);
        CodecRotate(rotated, s.head_dim);
        float largest = 0.0f;
        for (int d = 0; d < s.head_dim; ++d) largest = std::max(largest, std::abs(rotated[d]));
        const float to_int = largest > 0.0f ? 127.0f / largest : 0.0f;
        int8_t* q = q8 + size_t(pair) * s.head_dim;
        int32_t sum = 0;
        for (int d = 0; d < s.head_dim; ++d) sum += q[d] = static_cast<int8_t>(std::nearbyint(rotated[d] * to_int));
        q_sum[pair] = sum;
        q_factor[pair] = largest / 127.0f * kCodecScaleUnit * s.scale;
        std::fill_n(out_rot + size_t(pair) * s.value_dim, s.value_dim, 0.0f);
      }
    }
  }

  // Row r's scores of the block from p0 for head g, [lo, hi) of them its
  // keys, into its weights, and its running maximum in key order.
  auto record = [&](int r, int g, int lo, int hi, int p0, const V& score) __attribute__((always_inline)) {
    float* w = weights(r, g) + (lo - first_key(row_last(r)));
    float& max = max_score[r * group + g];
    if (s.softcap == 0.0f && hi - lo == kLanes) {  // a whole block: stored and compared as a vector
      StoreLanes(w, score);
      const float block_max = MaxLanes(score);
      if (block_max > max) max = block_max;
      return;
    }
    for (int p = lo; p < hi; ++p) {
      float x = Lane(score, p - p0);
      if (s.softcap > 0.0f) x = s.softcap * static_cast<float>(PortableTanh(x / s.softcap));
      w[p - lo] = x;
      if (x > max) max = x;
    }
  };
  // The (row, head) pairs (r * group + g) waiting for the coded keys of the
  // block at hand, scored up to 4 at a time by score_coded.
  const uint8_t* coded_keys = nullptr;
  int coded_pairs[kMaxDotVectors];
  int n_coded = 0;
  auto score_coded = [&](int p0) __attribute__((always_inline)) {
    if (n_coded == 0) return;
    const int8_t* q[kMaxDotVectors];
    int32_t sums[kMaxDotVectors][kCodedBlock], q_sums[kMaxDotVectors];
    for (int i = 0; i < n_coded; ++i) {
      q[i] = q8 + size_t(coded_pairs[i]) * s.head_dim;
      q_sums[i] = q_sum[coded_pairs[i]];
    }
    dots.keys(q, q_sums, n_coded, CodecBlockCodes(coded_keys), s.head_dim, CodecBits(kv.coded_k.type), sums);
    float scales[kCodedBlock];
    BlockScales<kX86Vector>(coded_keys, scales);
    for (int i = 0; i < n_coded; ++i) {
      const V score = IntLanes<V>(sums[i]) * LoadLanes<V>(scales) * q_factor[coded_pairs[i]];
      record(coded_pairs[i] / group, coded_pairs[i] % group, p0, p0 + kCodedBlock, p0, score);
    }
    n_coded = 0;
  };
  // Scores, and each (row, head)'s running maximum in key order.
  for (int p0 = begin; p0 <= last_pos; p0 += kLanes) {
    const int p1 = std::min(p0 + kLanes, last_pos + 1);
    bool want_exact, want_coded;
    wanted(p0, p1, &want_exact, &want_coded);
    const float* exact_k[kLanes];
    if (want_exact) block_rows(exact_k, p0, p1, true, tile_k);
    coded_keys = want_coded ? kv.coded_k.at(p0, kv_head) : nullptr;
    for (int r = 0; r < rows.n_rows; ++r) {
      int lo, hi;
      if (!visible(r, p0, p1, &lo, &hi)) continue;
      if (!coded(r, p0)) {
        for (int g = 0; g < group; ++g) {
          record(r, g, lo, hi, p0, ScoreBlock<V>(query(r, g), exact_k, s.head_dim, s.scale));
        }
        continue;
      }
      // A coded block is whole (CodedEnd), and scored for 4 (row, head)
      // pairs at a time, of any rows: each vector of levels is decoded
      // once for them. A pair's score is the same in any company.
      for (int g = 0; g < group; ++g) {
        coded_pairs[n_coded++] = r * group + g;
        if (n_coded == kMaxDotVectors) score_coded(p0);
      }
    }
    score_coded(p0);
  }
  for (int r = 0; r < rows.n_rows; ++r) {
    const int first = first_key(row_last(r));
    for (int g = 0; g < group; ++g) {
      Softmax<V>(weights(r, g), row_last(r) - first + 1, max_score[r * group + g]);
      std::fill_n(output(r, g), s.value_dim, 0.0f);
    }
  }
  // Weighted values, block by block, into the outputs. A coded block is
  // summed by integer dot products (kv_dots.h) for up to 4 (row, head) pairs
  // at a time, into their rotated sums: a pair's weights times the
  // positions' scales, rounded to 7 bits against their largest, whose factor
  // takes the integer sums back. A pair's sum is the same in any company.
  const uint8_t* coded_values = nullptr;
  float value_scales[kCodedBlock] = {};  // read only where want_coded set them (GCC cannot tell)
  uint8_t w7[kMaxDotVectors][kCodedBlock];
  float w7_factor[kMaxDotVectors];
  int value_pairs[kMaxDotVectors];
  int n_value = 0;
  auto sum_coded = [&]() __attribute__((always_inline)) {
    if (n_value == 0) return;
    const uint8_t* w[kMaxDotVectors];
    float* out[kMaxDotVectors];
    for (int i = 0; i < n_value; ++i) {
      w[i] = w7[i];
      out[i] = out_rot + size_t(value_pairs[i]) * s.value_dim;
    }
    dots.values(w, w7_factor, n_value, CodecBlockCodes(coded_values), s.value_dim, CodecBits(kv.coded_v.type), out);
    n_value = 0;
  };
  auto add_coded = [&](int pair, const float* weight) __attribute__((always_inline)) {
    const V w = LoadLanes<V>(weight) * LoadLanes<V>(value_scales);
    const float largest = MaxLanes(w);
    if (!(largest > 0.0f)) return;  // weights of 0 add nothing
    constexpr float kRound = 12582912.0f;  // 1.5 * 2^23: adding it rounds to an integer, ties to even
    ByteLanes((w * (127.0f / largest) + Splat<V>(kRound)) - kRound, w7[n_value]);
    w7_factor[n_value] = largest / 127.0f * kCodecScaleUnit;
    value_pairs[n_value++] = pair;
    if (n_value == kMaxDotVectors) sum_coded();
  };
  for (int p0 = begin; p0 <= last_pos; p0 += kLanes) {
    const int p1 = std::min(p0 + kLanes, last_pos + 1);
    bool want_exact, want_coded;
    wanted(p0, p1, &want_exact, &want_coded);
    const float* exact_v[kLanes];
    if (want_exact) block_rows(exact_v, p0, p1, false, tile_v);
    if (want_coded) {
      coded_values = kv.coded_v.at(p0, kv_head);
      BlockScales<kX86Vector>(coded_values, value_scales);
    }
    for (int r = 0; r < rows.n_rows; ++r) {
      int lo, hi;
      if (!visible(r, p0, p1, &lo, &hi)) continue;
      const int skip = lo - first_key(row_last(r));  // this block's first visible key, in the row's weights
      if (coded(r, p0)) {  // a whole block
        for (int g = 0; g < group; ++g) add_coded(r * group + g, weights(r, g) + skip);
        continue;
      }
      const float* const* vj = exact_v + (lo - p0);
      int g = 0;
      for (; g + 1 < group; g += 2) {
        const float* const w[2] = {weights(r, g) + skip, weights(r, g + 1) + skip};
        float* const o[2] = {output(r, g), output(r, g + 1)};
        AddWeightedValues<V, 2>(w, vj, hi - lo, s.value_dim, o);
      }
      if (g < group) {
        const float* const w[1] = {weights(r, g) + skip};
        float* const o[1] = {output(r, g)};
        AddWeightedValues<V, 1>(w, vj, hi - lo, s.value_dim, o);
      }
    }
    sum_coded();
  }
  if (codec) {
    for (int r = 0; r < rows.n_rows; ++r) {
      if (!coded(r, kv.split.sink)) continue;
      for (int g = 0; g < group; ++g) {
        float* o = output(r, g);
        float* rotated = rotated_output(r, g);
        CodecUnrotate(rotated, s.value_dim);
        for (int d = 0; d < s.value_dim; ++d) o[d] += rotated[d];
      }
    }
  }
}

// As KAKEYA_PER_ISA, with 16-lane vectors for AVX-512 and halves of 8 lanes
// for the rest (vec16-inl.h, Halves): the same bits in fewer loads and stores;
// F16 rows converted by F16C on both x86 vector targets (kX86Vector).
#if defined(__x86_64__) && defined(__GNUC__)
static __attribute__((target("avx512f"))) void AttendKvHeadAvx512(const AttentionShape& s, int kv_head,
                                                                   const AttentionRows& rows, const KvView& kv,
                                                                   float* scratch) {
  AttendKvHeadBody<Float16x, true>(s, kv_head, rows, kv, scratch);
}
static __attribute__((target("avx2,fma"))) void AttendKvHeadAvx2(const AttentionShape& s, int kv_head,
                                                                  const AttentionRows& rows, const KvView& kv,
                                                                  float* scratch) {
  AttendKvHeadBody<Halves, true>(s, kv_head, rows, kv, scratch);
}
#endif

void AttendKvHead(const AttentionShape& s, int kv_head, const AttentionRows& rows, const KvView& kv, float* scratch) {
#if defined(__x86_64__) && defined(__GNUC__)
  switch (ActiveVectorIsa()) {
    case VectorIsa::kAvx512: return AttendKvHeadAvx512(s, kv_head, rows, kv, scratch);
    case VectorIsa::kAvx2: return AttendKvHeadAvx2(s, kv_head, rows, kv, scratch);
    case VectorIsa::kBaseline: break;
  }
#endif
  AttendKvHeadBody<Halves, false>(s, kv_head, rows, kv, scratch);
}

}  // namespace kakeya
