// Attention over one layer's KV cache at depth, per cache type: the part of a
// long-context decode or verify step that grows with the context. The layer
// has the bench model's shape (32 query heads on 8 KV heads of 64, full
// attention); its cache holds `depth` positions of random keys and values,
// written and coded as a prefill leaves them, and 1 or 4 rows (a decode step,
// a verify block) attend to all of it, every KV head in turn on one thread.
// Counters: cache bytes per second (the bytes of the positions read, of the
// type stored) and nanoseconds per position read per query head.
//
//   build/bin/attention_bench --benchmark_filter='Attention/(f16|kakeya4)/32768'
#include <benchmark/benchmark.h>

#include <memory>
#include <random>
#include <vector>

#include "cache/kv_cache.h"
#include "kernels/cpu/attention.h"
#include "kernels/cpu/kv_types.h"

namespace kakeya {
namespace {

constexpr int kHeads = 32, kKvHeads = 8, kHeadDim = 64;

// The cache of one layer, filled to `depth` positions plus the rows that
// attend (their own keys included), and what the rows read.
struct Layer {
  std::unique_ptr<LayerCache> cache;
  std::vector<float> q, out, scratch;
};

Layer MakeLayer(KvType k_type, KvType v_type, int depth, int rows) {
  const LayerCacheShape shape{0, kKvHeads, kHeadDim, kHeadDim, k_type, v_type};
  const int n_ctx = depth + rows;
  Layer layer;
  layer.cache = std::make_unique<LayerCache>(shape, LayerCapacity(shape, n_ctx, rows), n_ctx);
  std::mt19937 rng(7);
  std::normal_distribution<float> normal;
  std::vector<float> k(kKvHeads * kHeadDim), v(kKvHeads * kHeadDim);
  for (int pos = 0; pos < n_ctx; ++pos) {
    for (float& x : k) x = normal(rng);
    for (float& x : v) x = normal(rng);
    layer.cache->Write(pos, k.data(), v.data());
    // As the forward pass does after each write: code what the next row reads coded.
    layer.cache->CodeUpTo(CodedEnd(pos, layer.cache->split()));
  }
  layer.q.resize(size_t(rows) * kHeads * kHeadDim);
  for (float& x : layer.q) x = normal(rng);
  layer.out.resize(layer.q.size());
  return layer;
}

void Attention(benchmark::State& state, KvType type) {
  const int depth = static_cast<int>(state.range(0));
  const int rows = static_cast<int>(state.range(1));
  // Keys in the named type; values too, but the codec's keys get 4 bits and
  // its values 3 (the pair README suggests).
  const KvType v_type = type == KvType::kKakeya4 ? KvType::kKakeya3 : type;
  Layer layer = MakeLayer(type, v_type, depth, rows);
  const AttentionShape shape{kHeads, kKvHeads, kHeadDim, kHeadDim, 0.125f, 0.0f};
  const AttentionRows attend{rows, depth, 0, layer.q.data(), kHeads * kHeadDim, layer.out.data(), kHeads * kHeadDim};
  layer.scratch.resize(AttendScratchFloats(shape, rows, depth + rows));
  const KvView kv = layer.cache->view();
  for (auto _ : state) {
    for (int h = 0; h < kKvHeads; ++h) AttendKvHead(shape, h, attend, kv, layer.scratch.data());
    benchmark::DoNotOptimize(layer.out.data());
  }
  const double positions = depth + rows;
  const double bytes = positions * kKvHeads * (KvHeadBytes(type, kHeadDim) + KvHeadBytes(v_type, kHeadDim));
  state.counters["cache_bytes/s"] = benchmark::Counter(bytes, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["ns/pos/head"] =
      benchmark::Counter(positions * kHeads * 1e-9, benchmark::Counter::kIsIterationInvariantRate |
                                                          benchmark::Counter::kInvert);
}

void Register() {
  for (KvType t : {KvType::kF32, KvType::kF16, KvType::kBF16, KvType::kQ8_0, KvType::kQ4_0, KvType::kKakeya4}) {
    benchmark::RegisterBenchmark(("Attention/" + std::string(KvTypeName(t))).c_str(),
                                 [t](benchmark::State& s) { Attention(s, t); })
        ->ArgsProduct({{1024, 8192, 32768}, {1, 4}})
        ->ArgNames({"depth", "rows"})
        ->Unit(benchmark::kMillisecond);
  }
}
const bool kRegistered = (Register(), true);

}  // namespace
}  // namespace kakeya
