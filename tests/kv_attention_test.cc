// Attention over every cache type (kernels/cpu/attention.h on a LayerCache,
// cache/kv_cache.h) against float64 attention written out here over what the
// cache holds: llama.cpp's types decoded, full and ring layers read across
// their wrap; the codec's rows exact where the row reads them exact (the
// sink, its latest positions) and coded elsewhere, rotated back in float64.
// Rows of one call that straddle a coded block's edge each read their own
// split, and get the bits each gets alone.
#include "kernels/cpu/attention.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "cache/kv_cache.h"
#include "kernels/cpu/dequant.h"
#include "kernels/cpu/kv_codec.h"
#include "kernels/cpu/matmul.h"

namespace kakeya {
namespace {

constexpr int kHeadKv = 2, kGroup = 3, kHeadDim = 64, kValueDim = 64;

// x = D H y in float64 (the inverse of CodecRotate), with D read off
// CodecRotate's action on unit vectors (row 0 of H is all +1/sqrt(d)).
std::vector<double> UnrotateReference(const float* y, int d) {
  static std::vector<double> signs;
  if (static_cast<int>(signs.size()) != d) {
    signs.assign(d, 0.0);
    for (int i = 0; i < d; ++i) {
      std::vector<float> e(d, 0.0f);
      e[i] = 1.0f;
      CodecRotate(e.data(), d);
      signs[i] = e[0] > 0 ? 1 : -1;
    }
  }
  std::vector<double> out(d, 0.0);
  for (int r = 0; r < d; ++r) {
    for (int c = 0; c < d; ++c) out[r] += (__builtin_popcount(r & c) % 2 ? -1.0 : 1.0) / std::sqrt(double(d)) * y[c];
    out[r] *= signs[r];
  }
  return out;
}

struct Layer {
  KvCache cache;
  std::vector<std::vector<float>> k, v;  // what was written, per position
};

// A one-layer cache of `type` with `n` positions of random keys and values,
// written one forward at a time.
Layer Filled(KvType type, int window, int n, int n_ctx, int max_pending, std::mt19937& rng) {
  const KvType v_type = IsCodec(type) ? KvType::kKakeya3 : type;
  Layer l{KvCache({LayerCacheShape{window, kHeadKv, kHeadDim, kValueDim, type, v_type}}, n_ctx, max_pending), {}, {}};
  std::normal_distribution<float> normal;
  for (int p = 0; p < n; ++p) {
    if (!l.cache.CanAppend(1)) ADD_FAILURE() << "cache full at " << p;
    std::vector<float> k(kHeadKv * kHeadDim), v(kHeadKv * kValueDim);
    for (float& x : k) x = normal(rng);
    for (float& x : v) x = normal(rng);
    k[5] *= 8;  // an outlier channel
    l.cache.layer(0).Write(p, k.data(), v.data());
    l.cache.layer(0).CodeUpTo(CodedEnd(p, l.cache.layer(0).split()));  // as each forward does
    l.cache.Append(1);
    l.cache.Commit();
    l.k.push_back(k);
    l.v.push_back(v);
  }
  return l;
}

// What a row at `pos` reads for position j, head g, in float64: the decoded
// row of a llama.cpp type or the codec's exact row, or for the codec's coded
// positions the decoded vector still rotated, with its scale.
struct Read {
  bool coded;
  std::vector<double> x;
  double scale;  // coded: F16 scale / 128, which the levels are multiplied by
};
Read Stored(const Layer& l, KvType type, bool keys, int pos, int j, int g, int coded_through) {
  const int dim = keys ? kHeadDim : kValueDim;
  const float* x = (keys ? l.k : l.v)[j].data() + g * dim;
  const CodecSplit split = l.cache.layer(0).split();
  const bool coded = split.exact > 0 && j >= split.sink && j < std::min(CodedEnd(pos, split), coded_through);
  std::vector<float> decoded(dim);
  if (split.exact > 0 && !coded) return {false, std::vector<double>(x, x + dim), 1};
  const KvType t = IsCodec(type) ? (keys ? type : KvType::kKakeya3) : type;
  std::vector<uint8_t> bytes(KvHeadBytes(t, dim) * kCodedBlock);
  if (!coded) {
    EncodeKvHead(t, x, dim, bytes.data());
    DecodeKvHead(t, bytes.data(), dim, decoded.data());
    return {false, std::vector<double>(decoded.begin(), decoded.end()), 1};
  }
  // The vector coded alone, as position 0 of a block of its own.
  const CodecSide side = keys ? CodecSide::kKeys : CodecSide::kValues;
  CodecEncode(x, dim, CodecBits(t), side, bytes.data(), 0);
  CodecDecodeRotated(bytes.data(), 0, dim, CodecBits(t), side, decoded.data());
  uint16_t scale;
  std::memcpy(&scale, bytes.data(), sizeof scale);
  return {true, std::vector<double>(decoded.begin(), decoded.end()), double(F16ToF32(scale)) / 128};
}

// Float64 attention over what the row reads, with the codec's roundings as
// attention.h specifies them: a query reading coded keys is rotated
// (CodecRotate, which kv_types_test checks against float64) and rounded to
// 8 bits against its largest coordinate, in float32 as specified, and a
// coded block's weights times its scales are rounded to 7 bits against their
// largest. Float32 weights may round the other way where float64 ones lie
// within 1e-3 of a half: `slack` takes such a weight's whole step, per head.
struct Expected {
  std::vector<double> out, slack;
};
Expected Reference(const Layer& l, KvType type, int window, int pos, const float* q, float scale, int coded_through) {
  const int n_head = kHeadKv * kGroup;
  Expected e{std::vector<double>(size_t(n_head) * kValueDim, 0.0), std::vector<double>(n_head, 0.0)};
  const int first = FirstVisiblePosition(pos, window);
  for (int h = 0; h < n_head; ++h) {
    const int g = h / kGroup;
    std::vector<float> rotated(q + h * kHeadDim, q + (h + 1) * kHeadDim);
    CodecRotate(rotated.data(), kHeadDim);
    float largest = 0;
    for (float x : rotated) largest = std::max(largest, std::abs(x));
    const float to_int = 127.0f / largest;
    std::vector<double> q_coded(kHeadDim);
    for (int d = 0; d < kHeadDim; ++d) q_coded[d] = std::nearbyint(rotated[d] * to_int) * (double(largest) / 127);
    std::vector<double> score;
    double max_score = -INFINITY;
    for (int j = first; j <= pos; ++j) {
      const Read k = Stored(l, type, true, pos, j, g, coded_through);
      double dot = 0;
      for (int d = 0; d < kHeadDim; ++d) dot += (k.coded ? q_coded[d] : double(q[h * kHeadDim + d])) * k.x[d];
      score.push_back(dot * scale);
      max_score = std::max(max_score, score.back());
    }
    double sum = 0;
    for (double& s : score) sum += (s = std::exp(s - max_score));
    double* out = e.out.data() + h * kValueDim;
    std::vector<double> coded_sum(kValueDim, 0.0);
    bool any_coded = false;
    for (int b = first; b <= pos; b = (b / kCodedBlock + 1) * kCodedBlock) {
      const int b_end = std::min(pos + 1, (b / kCodedBlock + 1) * kCodedBlock);
      std::vector<Read> v;
      for (int j = b; j < b_end; ++j) v.push_back(Stored(l, type, false, pos, j, g, coded_through));
      if (!v[0].coded) {
        for (int j = b; j < b_end; ++j) {
          for (int d = 0; d < kValueDim; ++d) out[d] += score[j - first] / sum * v[j - b].x[d];
        }
        continue;
      }
      any_coded = true;  // a coded block is whole
      double block_max = 0;
      for (int j = b; j < b_end; ++j) block_max = std::max(block_max, score[j - first] / sum * v[j - b].scale);
      for (int j = b; j < b_end; ++j) {
        const double t = score[j - first] / sum * v[j - b].scale * 127 / block_max;
        const double step = block_max / 127 / v[j - b].scale;  // one unit of the 7 bits, on the decoded vector
        double norm = 0;
        for (int d = 0; d < kValueDim; ++d) {
          coded_sum[d] += std::nearbyint(t) * step * v[j - b].x[d];
          norm += v[j - b].x[d] * v[j - b].x[d];
        }
        if (std::abs(t - std::floor(t) - 0.5) < 1e-3) e.slack[h] += step * std::sqrt(norm);
      }
    }
    if (any_coded) {
      std::vector<float> rotated_sum(coded_sum.begin(), coded_sum.end());
      const std::vector<double> back = UnrotateReference(rotated_sum.data(), kValueDim);
      for (int d = 0; d < kValueDim; ++d) out[d] += back[d];
    }
  }
  return e;
}

// Rows [first_pos, first_pos + n_rows) in one call per KV head.
std::vector<float> Attend(const Layer& l, int window, int first_pos, int n_rows, const std::vector<float>& q,
                          const AttentionShape& s, int coded_through) {
  const int q_width = s.n_head * kHeadDim, o_width = s.n_head * kValueDim;
  std::vector<float> out(size_t(n_rows) * o_width);
  const int last = first_pos + n_rows - 1;
  std::vector<float> scratch(AttendScratchFloats(s, n_rows, window > 0 ? std::min(window, last + 1) : last + 1));
  KvView kv = l.cache.layer(0).view();
  kv.coded_through = std::min(kv.coded_through, coded_through);
  for (int g = 0; g < kHeadKv; ++g) {
    const AttentionRows rows{n_rows, first_pos, window, q.data(), q_width, out.data(), o_width};
    AttendKvHead(s, g, rows, kv, scratch.data());
  }
  return out;
}

void Check(KvType type, int window, int n, int n_rows, int coded_through = 1 << 30) {
  SCOPED_TRACE(std::string(KvTypeName(type)) + " window " + std::to_string(window) + " positions " +
               std::to_string(n) + " coded through " + std::to_string(coded_through));
  std::mt19937 rng(static_cast<unsigned>(n * 31 + window));
  const Layer l = Filled(type, window, n, 1024, 16, rng);
  const AttentionShape s{kHeadKv * kGroup, kHeadKv, kHeadDim, kValueDim, 0.125f, 0.0f};
  std::normal_distribution<float> normal;
  std::vector<float> q(size_t(n_rows) * s.n_head * kHeadDim);
  for (float& x : q) x = 2.0f * normal(rng);
  const int first_pos = n - n_rows;
  const std::vector<float> together = Attend(l, window, first_pos, n_rows, q, s, coded_through);
  for (int r = 0; r < n_rows; ++r) {
    const int o_width = s.n_head * kValueDim;
    const std::vector<float> qr(q.begin() + size_t(r) * s.n_head * kHeadDim, q.begin() + size_t(r + 1) * s.n_head * kHeadDim);
    const std::vector<float> alone = Attend(l, window, first_pos + r, 1, qr, s, coded_through);
    EXPECT_EQ(0, std::memcmp(alone.data(), together.data() + size_t(r) * o_width, sizeof(float) * o_width))
        << "row " << r << " alone";
    const Expected ref = Reference(l, type, window, first_pos + r, qr.data(), s.scale, coded_through);
    double worst = 0;
    for (int i = 0; i < o_width; ++i) {
      worst = std::max(worst, std::abs(ref.out[i] - alone[i]) - ref.slack[i / kValueDim]);
    }
    EXPECT_LT(worst, 2e-5) << "row " << r;
  }
}

TEST(KvAttention, LlamaCppTypesMatchFloat64OverTheirDecodedRows) {
  for (const std::string& target : SupportedCpuTargets()) {
    SCOPED_TRACE(target);
    ForceCpuTarget(target);
    for (KvType type : {KvType::kF16, KvType::kBF16, KvType::kQ8_0, KvType::kQ4_0}) {
      Check(type, 0, 77, 5);
      Check(type, 40, 300, 6);  // a ring of 56 rows, wrapped five times
    }
  }
  ForceCpuTarget(SupportedCpuTargets().front());
}

TEST(KvAttention, CodecRowsReadTheirOwnSplitAndMatchFloat64) {
  for (const std::string& target : SupportedCpuTargets()) {
    SCOPED_TRACE(target);
    ForceCpuTarget(target);
    // Rows at 280 .. 291: CodedEnd is 16 up to position 286 and 32 from 287.
    Check(KvType::kKakeya4, 0, 292, 12);
    Check(KvType::kKakeya4, 0, 700, 9);
    // A reader one block ahead of the cache's coding (Gemma 4's assistant,
    // drafting after the target's last forward) reads exact what is not coded
    // yet: the rows read coded end at 432 for these rows, 416 here.
    Check(KvType::kKakeya4, 0, 700, 3, 416);
  }
  ForceCpuTarget(SupportedCpuTargets().front());
}

// Random appends, trims and commits, coding as a forward would: every coded
// row a later query reads coded is the code of the latest exact row written
// at its position, and bytes stay those of the sizes given.
TEST(KvAttention, CodedCacheUnderAppendTrimCommit) {
  std::mt19937 rng(17);
  const int n_ctx = 900, max_pending = 16;
  KvCache cache({LayerCacheShape{0, 1, 32, 32, KvType::kKakeya4, KvType::kKakeya3}}, n_ctx, max_pending);
  LayerCache& layer = cache.layer(0);
  std::vector<float> latest(n_ctx, 0.0f);
  float generation = 0;
  for (int op = 0; op < 4000; ++op) {
    const int choice = static_cast<int>(rng() % 4);
    if (choice <= 1) {
      const int n = 1 + static_cast<int>(rng() % max_pending);
      if (!cache.CanAppend(n)) {
        cache.Clear();
        continue;
      }
      for (int i = 0; i < n; ++i) {
        const int pos = cache.n_past() + i;
        std::vector<float> k(32, 0.0f), v(32, 0.0f);
        k[0] = v[0] = latest[pos] = (generation += 1);
        layer.Write(pos, k.data(), v.data());
      }
      layer.CodeUpTo(CodedEnd(cache.n_past() + n - 1, layer.split()));
      cache.Append(n);
    } else if (choice == 2) {
      cache.Trim(cache.n_pending() == 0 ? 0 : static_cast<int>(rng() % (cache.n_pending() + 1)));
    } else {
      cache.Commit();
    }
    if (cache.n_past() == 0) continue;
    const KvView kv = layer.view();
    const int pos = cache.n_past() - 1;
    ASSERT_GE(kv.coded_through, CodedEnd(pos, kv.split));
    for (int j = kv.split.sink; j < CodedEnd(pos, kv.split); j += 37) {
      std::vector<float> k(32);
      const int block = j / kCodedBlock * kCodedBlock;
      CodecDecodeRotated(kv.coded_k.at(block, 0), j - block, 32, 4, CodecSide::kKeys, k.data());
      CodecUnrotate(k.data(), 32);
      ASSERT_NEAR(k[0], latest[j], 0.2f * latest[j]) << "position " << j;
    }
    for (int j = CodedEnd(pos, kv.split); j <= pos; ++j) {
      ASSERT_EQ(reinterpret_cast<const float*>(kv.k.at(j % kv.capacity, 0))[0], latest[j]);
    }
  }
  EXPECT_EQ(cache.full_bytes_per_token(), size_t{(32 / 2 + 2) + (32 * 3 / 8 + 2)});
}

}  // namespace
}  // namespace kakeya
