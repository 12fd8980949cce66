#include "kernels/cpu/attention.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

#include "kernels/cpu/dequant.h"
#include "kernels/cpu/kv_codec.h"
#include "kernels/cpu/vec16-inl.h"

namespace kakeya {
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

namespace {

typedef uint16_t UShort16x __attribute__((vector_size(32)));
typedef int8_t Byte16x __attribute__((vector_size(16)));
typedef uint8_t UByte16x __attribute__((vector_size(16)));
typedef int32_t Int16x __attribute__((vector_size(64)));

inline __attribute__((always_inline)) Float16x BitsToFloats(UInt16x bits) {
  Float16x f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

// 16 F16 values to F32, exactly as F16ToF32 (dequant.cc): the exponent and
// mantissa shifted into place and scaled by 2^112 (which also makes the
// subnormals' denormal floats exact normal ones), infinities and NaNs set
// apart.
inline __attribute__((always_inline)) Float16x F16Lanes(const uint8_t* p) {
  UShort16x h;
  std::memcpy(&h, p, sizeof h);
  const UInt16x u = __builtin_convertvector(h, UInt16x);
  const UInt16x magnitude = (u & 0x7FFFu) << 13;
  const Float16x scaled = BitsToFloats(magnitude) * 0x1p112f;
  UInt16x bits;
  std::memcpy(&bits, &scaled, sizeof bits);
  bits = (u & 0x7FFFu) >= 0x7C00u ? magnitude | 0x7F800000u : bits;
  return BitsToFloats(bits | (u & 0x8000u) << 16);
}

inline __attribute__((always_inline)) Float16x BF16Lanes(const uint8_t* p) {
  UShort16x h;
  std::memcpy(&h, p, sizeof h);
  return BitsToFloats(__builtin_convertvector(h, UInt16x) << 16);
}

inline __attribute__((always_inline)) float F16Scalar(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, sizeof h);
  return F16ToF32(h);
}

// levels[codes[i]] for 16 codes below 16: a select tree over the code's
// bits, so that every target does it with its vector blends (no lookup
// instruction is portable across the three builds).
inline __attribute__((always_inline)) Float16x LookUp(UInt16x codes, const float* levels, int n_levels) {
  Float16x v[16];
  for (int i = 0; i < n_levels; ++i) v[i] = Float16x{} + levels[i];
  for (int bit = 0, n = n_levels; n > 1; ++bit, n /= 2) {
    const UInt16x set = (codes >> bit) & 1u;
    for (int i = 0; i < n / 2; ++i) v[i] = set != 0u ? v[2 * i + 1] : v[2 * i];
  }
  return v[0];
}

// One head vector of `type` at p into out (F32 [dim]): the values
// DecodeKvHead gives, 16 lanes at a time (the quantized types' heads are
// multiples of 32, KvTypeUnfit).
inline __attribute__((always_inline)) void DecodeHead(KvType type, const uint8_t* p, int dim, float* out) {
  switch (type) {
    case KvType::kF32:
      std::memcpy(out, p, sizeof(float) * dim);
      return;
    case KvType::kF16:
    case KvType::kBF16: {  // any head size: a scalar tail
      const bool f16 = type == KvType::kF16;
      int i = 0;
      for (; i + kLanes <= dim; i += kLanes) {
        const Float16x f = f16 ? F16Lanes(p + 2 * i) : BF16Lanes(p + 2 * i);
        std::memcpy(out + i, &f, sizeof f);
      }
      for (; i < dim; ++i) {
        uint16_t h;
        std::memcpy(&h, p + 2 * i, sizeof h);
        out[i] = f16 ? F16ToF32(h) : BF16ToF32(h);
      }
      return;
    }
    case KvType::kQ8_0:  // blocks of an F16 scale and 32 int8: d * q
      for (int b = 0; b < dim / 32; ++b, p += 34) {
        const float d = F16Scalar(p);
        for (int h = 0; h < 2; ++h) {
          Byte16x q;
          std::memcpy(&q, p + 2 + 16 * h, sizeof q);
          const Float16x f = __builtin_convertvector(q, Float16x) * d;
          std::memcpy(out + 32 * b + 16 * h, &f, sizeof f);
        }
      }
      return;
    case KvType::kQ4_0: {  // blocks of an F16 scale and 16 bytes: d * (low nibbles - 8), then the high ones
      for (int b = 0; b < dim / 32; ++b, p += 18) {
        const float d = F16Scalar(p);
        UByte16x q;
        std::memcpy(&q, p + 2, sizeof q);
        const Int16x lo = __builtin_convertvector(q & 15, Int16x) - 8;
        const Int16x hi = __builtin_convertvector(q >> 4, Int16x) - 8;
        const Float16x flo = __builtin_convertvector(lo, Float16x) * d, fhi = __builtin_convertvector(hi, Float16x) * d;
        std::memcpy(out + 32 * b, &flo, sizeof flo);
        std::memcpy(out + 32 * b + 16, &fhi, sizeof fhi);
      }
      return;
    }
    case KvType::kKakeya4:
    case KvType::kKakeya3: {  // scale * level[code], the codes packed before the F16 scale
      const int bits = type == KvType::kKakeya4 ? 4 : 3;
      const float scale = F16Scalar(p + dim * bits / 8);
      const float* levels = CodecLevels(bits);
      for (int i = 0; i < dim; i += kLanes) {
        UInt16x codes;
        if (bits == 4) {  // 8 bytes, low nibble first
          UByte16x raw = {};
          std::memcpy(&raw, p + i / 2, 8);
          const UByte16x pairs = __builtin_shufflevector(raw, raw, 0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7);
          const UInt16x shift = {0, 4, 0, 4, 0, 4, 0, 4, 0, 4, 0, 4, 0, 4, 0, 4};
          codes = (__builtin_convertvector(pairs, UInt16x) >> shift) & 15u;
        } else {  // 6 bytes: two groups of 8 codes in 24 bits
          const uint8_t* q = p + i / 8 * 3;
          const uint32_t w0 = q[0] | uint32_t(q[1]) << 8 | uint32_t(q[2]) << 16;
          const uint32_t w1 = q[3] | uint32_t(q[4]) << 8 | uint32_t(q[5]) << 16;
          const UInt16x words = {w0, w0, w0, w0, w0, w0, w0, w0, w1, w1, w1, w1, w1, w1, w1, w1};
          const UInt16x shift = {0, 3, 6, 9, 12, 15, 18, 21, 0, 3, 6, 9, 12, 15, 18, 21};
          codes = (words >> shift) & 7u;
        }
        const Float16x f = scale * LookUp(codes, levels, 1 << bits);
        std::memcpy(out + i, &f, sizeof f);
      }
      return;
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

KvView F32KvView(const float* k, int64_t k_stride, const float* v, int64_t v_stride, int capacity) {
  return {reinterpret_cast<const uint8_t*>(k), k_stride * int64_t(sizeof(float)), KvType::kF32,
          reinterpret_cast<const uint8_t*>(v), v_stride * int64_t(sizeof(float)), KvType::kF32, capacity};
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
static inline __attribute__((always_inline)) void AttendKvHeadBody(const AttentionShape& s, int kv_head,
                                                           const AttentionRows& rows, const KvView& kv,
                                                           float* scratch) {
  const int group = s.n_head / s.n_head_kv;
  const int64_t k_offset = static_cast<int64_t>(kv_head) * s.head_dim;
  const int64_t v_offset = static_cast<int64_t>(kv_head) * s.value_dim;
  const int64_t k_head_bytes = KvHeadBytes(kv.k_type, s.head_dim), v_head_bytes = KvHeadBytes(kv.v_type, s.value_dim);
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
  auto coded = [&](int r, int p0) {
    return codec && p0 >= kv.split.sink && p0 + kLanes <= std::min(CodedEnd(row_last(r), kv.split), kv.coded_through);
  };
  // Pointers to the 16 F32 rows of block [p0, p1) of keys or values: in the
  // cache (F32 rows, the codec's sink), or decoded into `tile`. A partial
  // block repeats its first row.
  auto block_rows = [&](const float* (&out)[kLanes], int p0, int p1, bool read_coded, bool keys, float* tile) {
    const int dim = keys ? s.head_dim : s.value_dim;
    for (int p = p0; p < p0 + kLanes; ++p) {
      const int q = p < p1 ? p : p0;
      float* t = tile + size_t(p - p0) * dim;
      if (read_coded) {
        const uint8_t* row = (keys ? kv.coded_k + q * kv.coded_k_row_bytes : kv.coded_v + q * kv.coded_v_row_bytes);
        const KvType type = keys ? kv.coded_k_type : kv.coded_v_type;
        if (p < p1 || p == p0) DecodeHead(type, row + kv_head * KvHeadBytes(type, dim), dim, t);
        out[p - p0] = p < p1 ? t : tile;
      } else if (codec && q < kv.split.sink) {
        out[p - p0] = (keys ? kv.sink_k : kv.sink_v) + size_t(q) * s.n_head_kv * dim + kv_head * dim;
      } else {
        const uint8_t* row = (keys ? kv.k + q % kv.capacity * kv.k_row_bytes : kv.v + q % kv.capacity * kv.v_row_bytes);
        const KvType type = keys ? kv.k_type : kv.v_type;
        if (type == KvType::kF32) {
          out[p - p0] = reinterpret_cast<const float*>(row) + (keys ? k_offset : v_offset);
        } else {
          if (p < p1 || p == p0) DecodeHead(type, row + kv_head * (keys ? k_head_bytes : v_head_bytes), dim, t);
          out[p - p0] = p < p1 ? t : tile;
        }
      }
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

  // Scores, and each (row, head)'s running maximum in key order.
  for (int p0 = begin; p0 <= last_pos; p0 += kLanes) {
    const int p1 = std::min(p0 + kLanes, last_pos + 1);
    bool want_exact = false, want_coded = false;
    for (int r = 0; r < rows.n_rows; ++r) {
      int lo, hi;
      if (visible(r, p0, p1, &lo, &hi)) (coded(r, p0) ? want_coded : want_exact) = true;
    }
    // Exact and coded keys of one block never both need the tile: a codec's
    // exact rows are F32, read in place.
    const float* exact_k[kLanes];
    const float* coded_k[kLanes];
    if (want_exact) block_rows(exact_k, p0, p1, false, true, tile_k);
    if (want_coded) block_rows(coded_k, p0, p1, true, true, tile_k);
    for (int r = 0; r < rows.n_rows; ++r) {
      int lo, hi;
      if (!visible(r, p0, p1, &lo, &hi)) continue;
      const bool rc = coded(r, p0);
      for (int g = 0; g < group; ++g) {
        Float16x score = ScoreBlock(rc ? rotated_query(r, g) : query(r, g), rc ? coded_k : exact_k, s.head_dim, s.scale);
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
  // Weighted values, block by block, into the outputs (coded ones into the
  // rotated sums).
  for (int p0 = begin; p0 <= last_pos; p0 += kLanes) {
    const int p1 = std::min(p0 + kLanes, last_pos + 1);
    bool want_exact = false, want_coded = false;
    for (int r = 0; r < rows.n_rows; ++r) {
      int lo, hi;
      if (visible(r, p0, p1, &lo, &hi)) (coded(r, p0) ? want_coded : want_exact) = true;
    }
    const float* exact_v[kLanes];
    const float* coded_v[kLanes];
    if (want_exact) block_rows(exact_v, p0, p1, false, false, tile_v);
    if (want_coded) block_rows(coded_v, p0, p1, true, false, tile_v);
    for (int r = 0; r < rows.n_rows; ++r) {
      int lo, hi;
      if (!visible(r, p0, p1, &lo, &hi)) continue;
      const bool rc = coded(r, p0);
      const float* const* vj = (rc ? coded_v : exact_v) + (lo - p0);
      auto out = [&](int g) { return rc ? rotated_output(r, g) : output(r, g); };
      const int skip = lo - first_key(row_last(r));  // this block's first visible key, in the row's weights
      int g = 0;
      for (; g + 1 < group; g += 2) {
        const float* const w[2] = {weights(r, g) + skip, weights(r, g + 1) + skip};
        float* const o[2] = {out(g), out(g + 1)};
        AddWeightedValues<2>(w, vj, hi - lo, s.value_dim, o);
      }
      if (g < group) {
        const float* const w[1] = {weights(r, g) + skip};
        float* const o[1] = {out(g)};
        AddWeightedValues<1>(w, vj, hi - lo, s.value_dim, o);
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

KAKEYA_PER_ISA(AttendKvHead,
               (const AttentionShape& s, int kv_head, const AttentionRows& rows, const KvView& kv, float* scratch),
               (s, kv_head, rows, kv, scratch))
#undef KAKEYA_PER_ISA

}  // namespace kakeya
