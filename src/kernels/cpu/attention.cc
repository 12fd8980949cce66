#include "kernels/cpu/attention.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

#include "base/portable_math.h"
#include "kernels/cpu/dequant.h"
#include "kernels/cpu/kv_codec.h"
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

}  // namespace

size_t AttendScratchFloats(const AttentionShape& s, int n_rows, int max_keys) {
  const size_t slots = size_t(n_rows) * (s.n_head / s.n_head_kv);
  // Weights and maxima; a block's decoded keys and values; rotated queries
  // and value sums (the codec).
  return slots * max_keys + slots + size_t(kLanes) * (s.head_dim + s.value_dim) + slots * (s.head_dim + s.value_dim);
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
  constexpr int kW = std::is_same_v<V, Float16x> ? 16 : 8;  // the codec decoders' lanes
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
  float* q_rot = tile_v + size_t(kLanes) * s.value_dim;    // F32 [slots, head_dim]
  float* out_rot = q_rot + size_t(slots) * s.head_dim;     // F32 [slots, value_dim]
  // Row r's weights: [0] is its first key's.
  auto weights = [&](int r, int g) { return scratch + size_t(r * group + g) * stride; };
  auto query = [&](int r, int g) { return rows.q + r * rows.q_stride + int64_t(kv_head * group + g) * s.head_dim; };
  auto output = [&](int r, int g) { return rows.out + r * rows.out_stride + int64_t(kv_head * group + g) * s.value_dim; };
  auto rotated_query = [&](int r, int g) { return q_rot + size_t(r * group + g) * s.head_dim; };
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
  // codec's exact and sink rows are F32.
  // (always_inline: a lambda left out of line is compiled for the baseline
  // ISA, not the target this body is built for.)
  auto block_rows = [&](const float* (&out)[kLanes], int p0, int p1, bool read_coded, bool keys,
                        float* tile) __attribute__((always_inline)) {
    const int dim = keys ? s.head_dim : s.value_dim;
    const KvRows& rows = read_coded ? (keys ? kv.coded_k : kv.coded_v) : (keys ? kv.k : kv.v);
    const uint8_t* at[kLanes];
    for (int p = p0; p < p1; ++p) {
      if (read_coded) {
        at[p - p0] = rows.at(p, kv_head);
      } else if (codec && p < kv.split.sink) {
        at[p - p0] = (keys ? kv.sink_k : kv.sink_v).at(p, kv_head);
      } else {
        at[p - p0] = rows.at(p % kv.capacity, kv_head);
      }
    }
    const int n = p1 - p0;
    if (read_coded) {  // values (coded keys are scored in place: CodedKeyScores), a whole block
      const int bits = CodecBits(rows.type);
      for (int i = 0; i < n; ++i) {
        DecodeValueLevels<kW>(CodecValueCodes(at[0], i, dim, bits), bits, dim, tile + size_t(i) * dim);
        out[i] = tile + size_t(i) * dim;
      }
    } else if (rows.type == KvType::kF32) {
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
  if (codec) {
    for (int r = 0; r < rows.n_rows; ++r) {
      if (!coded(r, kv.split.sink)) continue;  // reads nothing coded
      for (int g = 0; g < group; ++g) {
        std::memcpy(rotated_query(r, g), query(r, g), sizeof(float) * s.head_dim);
        CodecRotate(rotated_query(r, g), s.head_dim);
        std::fill_n(rotated_output(r, g), s.value_dim, 0.0f);
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
  // block at hand, scored 4 at a time by score_coded (fewer: one at a time).
  const uint8_t* coded_keys = nullptr;
  int coded_pairs[4];
  int n_coded = 0;
  auto score_coded = [&](int p0) __attribute__((always_inline)) {
    const int bits = CodecBits(kv.coded_k.type);
    float scores[4][kCodedBlock];
    auto q_of = [&](int pair) { return rotated_query(pair / group, pair % group); };
    if (n_coded == 4) {
      const float* const q4[4] = {q_of(coded_pairs[0]), q_of(coded_pairs[1]), q_of(coded_pairs[2]), q_of(coded_pairs[3])};
      CodedKeyScores<kW, 4, kX86Vector>(q4, coded_keys, s.head_dim, bits, s.scale, scores);
    }
    for (int i = 0; i < n_coded; ++i) {
      if (n_coded < 4) {
        const float* const q1[1] = {q_of(coded_pairs[i])};
        CodedKeyScores<kW, 1, kX86Vector>(q1, coded_keys, s.head_dim, bits, s.scale,
                                          reinterpret_cast<float (&)[1][kCodedBlock]>(scores[i]));
      }
      const int r = coded_pairs[i] / group, g = coded_pairs[i] % group;
      record(r, g, p0, p0 + kCodedBlock, p0, LoadLanes<V>(scores[i]));
    }
    n_coded = 0;
  };
  // Scores, and each (row, head)'s running maximum in key order.
  for (int p0 = begin; p0 <= last_pos; p0 += kLanes) {
    const int p1 = std::min(p0 + kLanes, last_pos + 1);
    bool want_exact, want_coded;
    wanted(p0, p1, &want_exact, &want_coded);
    const float* exact_k[kLanes];
    if (want_exact) block_rows(exact_k, p0, p1, false, true, tile_k);
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
        if (n_coded == 4) score_coded(p0);
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
  // Weighted values, block by block, into the outputs (coded ones into the
  // rotated sums).
  for (int p0 = begin; p0 <= last_pos; p0 += kLanes) {
    const int p1 = std::min(p0 + kLanes, last_pos + 1);
    bool want_exact, want_coded;
    wanted(p0, p1, &want_exact, &want_coded);
    const float* exact_v[kLanes];
    const float* coded_v[kLanes];
    float value_scales[kCodedBlock] = {};  // read only where want_coded set them (GCC cannot tell)
    if (want_exact) block_rows(exact_v, p0, p1, false, false, tile_v);
    if (want_coded) {
      block_rows(coded_v, p0, p1, true, false, tile_v);
      BlockScales<kX86Vector>(kv.coded_v.at(p0, kv_head), value_scales);
    }
    for (int r = 0; r < rows.n_rows; ++r) {
      int lo, hi;
      if (!visible(r, p0, p1, &lo, &hi)) continue;
      const bool rc = coded(r, p0);
      if (rc) {  // the levels were decoded without the scales: the weights take them
        for (int g = 0; g < group; ++g) {
          float* w = weights(r, g) + (lo - first_key(row_last(r)));
          StoreLanes(w, LoadLanes<V>(w) * LoadLanes<V>(value_scales));
        }
      }
      const float* const* vj = (rc ? coded_v : exact_v) + (lo - p0);
      auto out = [&](int g) { return rc ? rotated_output(r, g) : output(r, g); };
      const int skip = lo - first_key(row_last(r));  // this block's first visible key, in the row's weights
      int g = 0;
      for (; g + 1 < group; g += 2) {
        const float* const w[2] = {weights(r, g) + skip, weights(r, g + 1) + skip};
        float* const o[2] = {out(g), out(g + 1)};
        AddWeightedValues<V, 2>(w, vj, hi - lo, s.value_dim, o);
      }
      if (g < group) {
        const float* const w[1] = {weights(r, g) + skip};
        float* const o[1] = {out(g)};
        AddWeightedValues<V, 1>(w, vj, hi - lo, s.value_dim, o);
      }
    }
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
