// MatMul throughput per weight type, SIMD target and number of activation
// rows (1, 2, 4, 8, 16), 2 threads, 1 GiB of weights so they stream from DRAM
// (64 MB stayed in the 480 MB L3 of one virtual Xeon and read at twice the
// roofline).
// Reports GB/s of weight bytes (cost(L rows) / cost(1 row) = ratio of times).
// Also: a streaming-read roofline (sum of a 1 GB buffer, 2 threads), and
// "MatMulInCache": the same kernels on 512 KB of weights (in L2) on one
// thread, timed in CPU time: the compute cost per weight byte, which is what
// decides cost(L rows) / cost(1 row) once it exceeds the DRAM time, and which
// stays meaningful when other processes share the cores. "ComputePeak": the
// multiply-add rate of one core on registers alone (F32 FMA, and the int8 dot
// products the quantized kernels use), the ceiling that MatMulInCache's
// GMACps counter is to be read against.
//
//   build-kern/bin/matmul_bench --benchmark_filter='MatMul/(F16|Q8_0|Q4_K)/avx512_vnni'
#include <benchmark/benchmark.h>
// GCC 12 flags the deliberately undefined pass-through operands inside its
// own AVX-512 intrinsics once inlined (GCC bug 105593): silenced for those
// header lines only.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>
#pragma GCC diagnostic pop

#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "base/huge_pages.h"
#include "base/thread_pool.h"
#include "kernels/cpu/dequant.h"
#include "kernels/cpu/matmul.h"

namespace kakeya {
namespace {

constexpr int64_t kNIn = 2048;  // the common input width of a ~1B model
constexpr int64_t kDramBytes = 1024ll << 20;
constexpr int64_t kCacheBytes = 512ll << 10;
constexpr int kThreads = 2;

ThreadPool& Pool() {
  static ThreadPool pool(kThreads);
  return pool;
}
ThreadPool& SinglePool() {
  static ThreadPool pool(1);
  return pool;
}

// In 2 MiB pages, as a model's weights are and as the CLI's roofline reads.
using Buffer = HugePageBuffer;
Buffer Alloc(size_t bytes) { return AllocateHugePages(bytes); }

// A weight matrix of >= min_bytes: 64 properly quantized random rows, repeated.
// With `pack`, the matrix in the layout PackWeights gives it (as models load).
struct Weights {
  WeightMatrix w;
  Buffer bytes;
  Buffer packed;
};
// The DRAM-sized ones are kept one at a time (each is 1-2 GiB).
const Weights& GetWeights(DType type, int64_t min_bytes, bool pack) {
  static std::map<std::tuple<DType, int64_t, bool>, Weights> cache;
  auto it = cache.find({type, min_bytes, pack});
  if (it != cache.end()) return it->second;
  if (min_bytes == kDramBytes) std::erase_if(cache, [](const auto& e) { return std::get<1>(e.first) == kDramBytes; });
  const int64_t row_bytes = RowBytes(type, kNIn);
  const int64_t n_out = (min_bytes + row_bytes - 1) / row_bytes;
  Weights& out = cache[{type, min_bytes, pack}];
  out.bytes = Alloc(static_cast<size_t>(n_out * row_bytes));
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.f, 0.05f);
  std::vector<float> src(kNIn);
  constexpr int kDistinct = 64;
  for (int64_t o = 0; o < n_out; ++o) {
    if (o < kDistinct) {
      for (auto& v : src) v = normal(rng);
      QuantizeRow(type, src.data(), out.bytes.get() + o * row_bytes, kNIn);
    } else {
      std::memcpy(out.bytes.get() + o * row_bytes, out.bytes.get() + (o % kDistinct) * row_bytes,
                  static_cast<size_t>(row_bytes));
    }
  }
  out.w = {type, kNIn, n_out, out.bytes.get(), row_bytes};
  if (pack) {
    out.packed = Alloc(PackedBytes(out.w));
    out.w = PackWeights(out.w, out.packed.get());
    out.bytes = {};
  }
  return out;
}

void BM_MatMul(benchmark::State& state, DType type, bool pack, std::string target, bool in_cache) {
  const int n_rows = static_cast<int>(state.range(0));
  ForceCpuTarget(target);
  const Weights& weights = GetWeights(type, in_cache ? kCacheBytes : kDramBytes, pack);
  ThreadPool& pool = in_cache ? SinglePool() : Pool();
  std::vector<float> x(static_cast<size_t>(n_rows * kNIn)), y(n_rows * weights.w.n_out);
  std::mt19937 rng(1);
  std::normal_distribution<float> normal(0.f, 1.f);
  for (auto& v : x) v = normal(rng);
  Buffer scratch = Alloc(MatMulScratchBytes(type, kNIn, n_rows) + 64);
  MatMul(weights.w, x.data(), n_rows, y.data(), scratch.get(), pool);  // warm-up
  for (auto _ : state) {
    MatMul(weights.w, x.data(), n_rows, y.data(), scratch.get(), pool);
    benchmark::ClobberMemory();
  }
  const double bytes = static_cast<double>(weights.w.n_out * weights.w.row_bytes);
  state.SetBytesProcessed(static_cast<int64_t>(bytes * state.iterations()));
  state.counters["weight_GBps"] = benchmark::Counter(bytes * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["rows"] = n_rows;
  const double macs = static_cast<double>(n_rows) * static_cast<double>(weights.w.n_out) * kNIn;
  state.counters["GMACps"] = benchmark::Counter(macs * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
  state.SetLabel(std::string(NameOf(type)) + (pack ? " packed " : " ") + target + " " +
                 std::to_string(weights.w.n_out) + "x" + std::to_string(kNIn));
}

// Streaming read of a 1 GB buffer by 2 threads with the widest loads this CPU
// has: the memory roofline the matmul is measured against.
__attribute__((target("avx512f"))) double SumAvx512(const float* p, int64_t n) {
  __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
  for (int64_t i = 0; i < n; i += 64) {
    a0 = _mm512_add_ps(a0, _mm512_load_ps(p + i));
    a1 = _mm512_add_ps(a1, _mm512_load_ps(p + i + 16));
    a2 = _mm512_add_ps(a2, _mm512_load_ps(p + i + 32));
    a3 = _mm512_add_ps(a3, _mm512_load_ps(p + i + 48));
  }
  alignas(64) float v[16];
  _mm512_store_ps(v, _mm512_add_ps(_mm512_add_ps(a0, a1), _mm512_add_ps(a2, a3)));
  double sum = 0;
  for (float f : v) sum += f;
  return sum;
}
__attribute__((target("avx2"))) double SumAvx2(const float* p, int64_t n) {
  __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
  for (int64_t i = 0; i < n; i += 32) {
    a0 = _mm256_add_ps(a0, _mm256_load_ps(p + i));
    a1 = _mm256_add_ps(a1, _mm256_load_ps(p + i + 8));
    a2 = _mm256_add_ps(a2, _mm256_load_ps(p + i + 16));
    a3 = _mm256_add_ps(a3, _mm256_load_ps(p + i + 24));
  }
  alignas(32) float v[8];
  _mm256_store_ps(v, _mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)));
  return v[0] + v[1] + v[2] + v[3] + v[4] + v[5] + v[6] + v[7];
}

void BM_StreamRoofline(benchmark::State& state) {
  constexpr int64_t kBytes = 1ll << 30, kFloats = kBytes / 4, kChunks = 64;
  Buffer buf = Alloc(kBytes);
  auto* f = reinterpret_cast<float*>(buf.get());
  Pool().Run(kChunks, [&](int64_t c, int) {  // first touch by the pool's threads
    std::memset(f + c * (kFloats / kChunks), 0, kBytes / kChunks);
  });
  const bool avx512 = __builtin_cpu_supports("avx512f");
  double sink[kChunks];
  for (auto _ : state) {
    Pool().Run(kChunks, [&](int64_t c, int) {
      const float* p = f + c * (kFloats / kChunks);
      sink[c] = avx512 ? SumAvx512(p, kFloats / kChunks) : SumAvx2(p, kFloats / kChunks);
    });
    benchmark::DoNotOptimize(sink);
  }
  state.SetBytesProcessed(kBytes * state.iterations());
  state.counters["GBps"] = benchmark::Counter(kBytes * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
  state.SetLabel(avx512 ? "avx512 loads" : "avx2 loads");
}

// Peak multiply-add rates of one core: kChains independent accumulators (more
// than latency x issue width), registers only. Each returns a value that
// depends on every step so the compiler keeps the loop.
constexpr int kChains = 12;
__attribute__((target("avx512f"))) float PeakFmaAvx512(int64_t iters) {
  const __m512 a = _mm512_set1_ps(0.999f), b = _mm512_set1_ps(1e-3f);
  __m512 acc[kChains];
  for (int k = 0; k < kChains; ++k) acc[k] = _mm512_set1_ps(static_cast<float>(k));
  for (int64_t i = 0; i < iters; ++i) {
    for (int k = 0; k < kChains; ++k) acc[k] = _mm512_fmadd_ps(acc[k], a, b);
  }
  for (int k = 1; k < kChains; ++k) acc[0] = _mm512_add_ps(acc[0], acc[k]);
  return _mm512_reduce_add_ps(acc[0]);
}
__attribute__((target("avx2,fma"))) float PeakFmaAvx2(int64_t iters) {
  const __m256 a = _mm256_set1_ps(0.999f), b = _mm256_set1_ps(1e-3f);
  __m256 acc[kChains];
  for (int k = 0; k < kChains; ++k) acc[k] = _mm256_set1_ps(static_cast<float>(k));
  for (int64_t i = 0; i < iters; ++i) {
    for (int k = 0; k < kChains; ++k) acc[k] = _mm256_fmadd_ps(acc[k], a, b);
  }
  alignas(32) float v[8];
  for (int k = 1; k < kChains; ++k) acc[0] = _mm256_add_ps(acc[0], acc[k]);
  _mm256_store_ps(v, acc[0]);
  return v[0] + v[7];
}
// vpdpbusd: 64 u8 x s8 multiply-adds per instruction (the Q8_0/K-quant kernels on
// AVX-512 VNNI).
__attribute__((target("avx512f,avx512vnni"))) float PeakDpbusdAvx512(int64_t iters) {
  const __m512i a = _mm512_set1_epi8(3), b = _mm512_set1_epi8(-5);
  __m512i acc[kChains];
  for (int k = 0; k < kChains; ++k) acc[k] = _mm512_set1_epi32(k);
  for (int64_t i = 0; i < iters; ++i) {
    for (int k = 0; k < kChains; ++k) acc[k] = _mm512_dpbusd_epi32(acc[k], a, b);
  }
  for (int k = 1; k < kChains; ++k) acc[0] = _mm512_add_epi32(acc[0], acc[k]);
  return static_cast<float>(_mm512_reduce_add_epi32(acc[0]));
}
// The Q8_0 tile's arithmetic per activation row, 16 columns and 32-element
// block (matmul_packed.cc): 8 vpdpbusd, then the block's fold into the float
// sum, acc = fma(float(isum), d_w * d_x, acc). The fold's multiply and FMA
// run on the ports vpdpbusd uses, so against PeakDpbusdAvx512 this is the
// ceiling of that tile (measured on Zen 4: 199 vs 234 GMAC/s, 85%).
__attribute__((target("avx512f,avx512vnni"))) float PeakDpbusdBlockFoldAvx512(int64_t iters) {
  __m512i a = _mm512_set1_epi8(3);
  const __m512i b = _mm512_set1_epi8(-5);
  const __m512 dw = _mm512_set1_ps(1e-3f);
  alignas(64) static float dx[kChains] = {};
  __m512 acc[kChains];
  for (int k = 0; k < kChains; ++k) acc[k] = _mm512_set1_ps(static_cast<float>(k));
  for (int64_t i = 0; i < iters; ++i) {
    // New weights and d_x every step, as in the tile (nothing is hoisted).
    asm volatile("" : "+v"(a) : : "memory");
    for (int k = 0; k < kChains; ++k) {
      __m512i isum = _mm512_set1_epi32(k);
      for (int j = 0; j < 8; ++j) isum = _mm512_dpbusd_epi32(isum, a, b);
      acc[k] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum), _mm512_mul_ps(dw, _mm512_set1_ps(dx[k])), acc[k]);
    }
  }
  for (int k = 1; k < kChains; ++k) acc[0] = _mm512_add_ps(acc[0], acc[k]);
  return _mm512_reduce_add_ps(acc[0]);
}
// AVX2 without VNNI: vpmaddubsw + vpmaddwd + vpaddd, 32 multiply-adds per three
// instructions.
__attribute__((target("avx2"))) float PeakMaddubsAvx2(int64_t iters) {
  const __m256i a = _mm256_set1_epi8(3), b = _mm256_set1_epi8(-5), ones = _mm256_set1_epi16(1);
  __m256i acc[kChains];
  for (int k = 0; k < kChains; ++k) acc[k] = _mm256_set1_epi32(k);
  for (int64_t i = 0; i < iters; ++i) {
    for (int k = 0; k < kChains; ++k) {
      acc[k] = _mm256_add_epi32(acc[k], _mm256_madd_epi16(_mm256_maddubs_epi16(a, b), ones));
    }
  }
  for (int k = 1; k < kChains; ++k) acc[0] = _mm256_add_epi32(acc[0], acc[k]);
  return static_cast<float>(_mm256_extract_epi32(acc[0], 0));
}

void BM_ComputePeak(benchmark::State& state, float (*kernel)(int64_t), int macs_per_chain_step) {
  constexpr int64_t kIters = 1 << 16;
  float sink = 0;
  for (auto _ : state) sink += kernel(kIters);
  benchmark::DoNotOptimize(sink);
  const double macs = static_cast<double>(kIters) * kChains * macs_per_chain_step;
  state.counters["GMACps"] = benchmark::Counter(macs * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}

int Register() {
  const struct {
    const char* name;
    bool supported;
    float (*kernel)(int64_t);
    int macs;
  } peaks[] = {
      {"fma_f32/avx512", __builtin_cpu_supports("avx512f") != 0, PeakFmaAvx512, 16},
      {"fma_f32/avx2", __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"), PeakFmaAvx2, 8},
      {"dpbusd_i8/avx512_vnni", __builtin_cpu_supports("avx512vnni") != 0, PeakDpbusdAvx512, 64},
      {"dpbusd_i8_block_fold/avx512_vnni", __builtin_cpu_supports("avx512vnni") != 0, PeakDpbusdBlockFoldAvx512,
       8 * 64},
      {"maddubs_i8/avx2", __builtin_cpu_supports("avx2") != 0, PeakMaddubsAvx2, 32},
  };
  for (const auto& p : peaks) {
    if (!p.supported) continue;
    benchmark::RegisterBenchmark((std::string("ComputePeak/") + p.name).c_str(),
                                 [p](benchmark::State& s) { BM_ComputePeak(s, p.kernel, p.macs); })
        ->MeasureProcessCPUTime()->MinTime(0.2)->Unit(benchmark::kMicrosecond);
  }
  benchmark::RegisterBenchmark("StreamRoofline/1GB", BM_StreamRoofline)->UseRealTime()->MinTime(1.0);
  const DType types[] = {DType::kF16,  DType::kQ8_0, DType::kQ4_K, DType::kF32,
                         DType::kBF16, DType::kQ4_0, DType::kQ4_1, DType::kQ5_0,
                         DType::kQ5_1, DType::kQ5_K, DType::kQ6_K};
  for (DType type : types) {
   for (bool pack : {false, true}) {
    if (pack && PackedLayoutOf(type) == WeightLayout::kRows) continue;
    for (const std::string& target : SupportedCpuTargets()) {
      const std::string name = std::string(NameOf(type)) + (pack ? "x16/" : "/") + target;
      benchmark::RegisterBenchmark(
          ("MatMul/" + name).c_str(),
          [type, pack, target](benchmark::State& s) { BM_MatMul(s, type, pack, target, false); })
          ->ArgName("rows")->Arg(1)->Arg(2)->Arg(4)->Arg(8)->Arg(16)
          ->UseRealTime()->MinTime(0.5)->Unit(benchmark::kMillisecond);
      benchmark::RegisterBenchmark(
          ("MatMulInCache/" + name).c_str(),
          [type, pack, target](benchmark::State& s) { BM_MatMul(s, type, pack, target, true); })
          ->ArgName("rows")->Arg(1)->Arg(2)->Arg(4)->Arg(8)->Arg(16)
          ->MeasureProcessCPUTime()->MinTime(0.2)->Unit(benchmark::kMicrosecond);
    }
   }
  }
  return 0;
}
const int registered = Register();

}  // namespace
}  // namespace kakeya
