// MatMul entry point: scratch layout, activation quantization, the split of
// output columns over threads and the choice of SIMD target.
#include "kernels/cpu/matmul.h"

#include "kernels/cpu/matmul_internal.h"  // first hwy-related include (target set)

#include <hwy/targets.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#if defined(__aarch64__) && defined(__linux__)
#include <asm/hwcap.h>
#include <sys/auxv.h>
#elif defined(__aarch64__) && defined(__APPLE__)
#include <sys/sysctl.h>
#endif

#include "base/error.h"
#include "kernels/cpu/blocks.h"

namespace kakeya {

#if HWY_TARGETS & HWY_AVX3_DL
KAKEYA_DECLARE_KERNELS(N_AVX3_DL)
#endif
#if HWY_TARGETS & HWY_AVX3
KAKEYA_DECLARE_KERNELS(N_AVX3)
#endif
#if HWY_TARGETS & HWY_AVX2
KAKEYA_DECLARE_KERNELS(N_AVX2)
#endif
#if HWY_TARGETS & HWY_NEON
KAKEYA_DECLARE_KERNELS(N_NEON)
#endif
#if HWY_TARGETS & HWY_EMU128
KAKEYA_DECLARE_KERNELS(N_EMU128)
#endif
#if HWY_TARGETS & HWY_SCALAR
KAKEYA_DECLARE_KERNELS(N_SCALAR)
#endif

namespace {

// What an ARM target needs beyond NEON (Highway 1.0.3 has one NEON target;
// the extensions are chosen here, inside it).
enum class ArmExtension { kNone, kDotprod, kI8mm };

bool CpuHas(ArmExtension e) {
  if (e == ArmExtension::kNone) return true;
#if defined(__aarch64__) && defined(__linux__)
  const unsigned long hwcap = getauxval(AT_HWCAP), hwcap2 = getauxval(AT_HWCAP2);
  const bool dotprod = (hwcap & HWCAP_ASIMDDP) != 0;
  return e == ArmExtension::kDotprod ? dotprod : dotprod && (hwcap2 & HWCAP2_I8MM) != 0;
#elif defined(__aarch64__) && defined(__APPLE__)
  auto sysctl_flag = [](const char* name) {
    int value = 0;
    size_t size = sizeof value;
    return sysctlbyname(name, &value, &size, nullptr, 0) == 0 && value != 0;
  };
  const bool dotprod = sysctl_flag("hw.optional.arm.FEAT_DotProd");
  return e == ArmExtension::kDotprod ? dotprod : dotprod && sysctl_flag("hw.optional.arm.FEAT_I8MM");
#else
  return false;
#endif
}

struct CpuTarget {
  const char* name;  // KAKEYA_CPU_TARGET value
  int64_t hwy_target;
  ArmExtension needs;
  VectorIsa ops_isa;
  MatMulKernel (*float_kernel)(DType);
  MatMulKernel (*legacy_kernel)(DType);
  MatMulKernel (*kquant_kernel)(DType);
  MatMulKernel (*packed_kernel)(WeightLayout);
  void (*quantize_q8)(const float* x, int64_t n_in, int8_t* qs, float* d, float* s, int16_t* sums);
  void (*quantize_q8k)(const float* x, int64_t n_in, int8_t* qs, float* d, int16_t* bsums);
};

#define KAKEYA_TARGET_WITH(name, bit, needs, isa, NS, packed)                                       \
  {name, bit, ArmExtension::needs, VectorIsa::isa, &NS::FloatKernel, &NS::LegacyQuantKernel, &NS::KQuantKernel, \
   &NS::packed, &NS::QuantizeRowQ8, &NS::QuantizeRowQ8K},
#define KAKEYA_TARGET(name, bit, isa, NS) KAKEYA_TARGET_WITH(name, bit, kNone, isa, NS, PackedKernel)

// Best first. The portable target is last and always supported.
constexpr CpuTarget kTargets[] = {
#if HWY_TARGETS & HWY_AVX3_DL
    KAKEYA_TARGET("avx512_vnni", HWY_AVX3_DL, kAvx512, N_AVX3_DL)
#endif
#if HWY_TARGETS & HWY_AVX3
    KAKEYA_TARGET("avx512", HWY_AVX3, kAvx512, N_AVX3)
#endif
#if HWY_TARGETS & HWY_AVX2
    KAKEYA_TARGET("avx2", HWY_AVX2, kAvx2, N_AVX2)
#endif
#if HWY_TARGETS & HWY_NEON
    KAKEYA_TARGET_WITH("neon_i8mm", HWY_NEON, kI8mm, kBaseline, N_NEON, PackedKernelI8mm)
    KAKEYA_TARGET_WITH("neon_dotprod", HWY_NEON, kDotprod, kBaseline, N_NEON, PackedKernelDotprod)
    KAKEYA_TARGET("neon", HWY_NEON, kBaseline, N_NEON)
#endif
#if HWY_TARGETS & HWY_EMU128
    KAKEYA_TARGET("scalar", HWY_EMU128, kBaseline, N_EMU128)
#endif
#if HWY_TARGETS & HWY_SCALAR
    KAKEYA_TARGET("scalar", HWY_SCALAR, kBaseline, N_SCALAR)
#endif
};
#undef KAKEYA_TARGET
#undef KAKEYA_TARGET_WITH

bool IsSupported(const CpuTarget& t) { return (hwy::SupportedTargets() & t.hwy_target) != 0 && CpuHas(t.needs); }

std::string ValidTargetNames() {
  std::string names;
  for (const CpuTarget& t : kTargets) {
    if (!IsSupported(t)) continue;
    if (!names.empty()) names += ", ";
    names += t.name;
  }
  return names;
}

int FindTarget(const std::string& name) {
  for (size_t i = 0; i < std::size(kTargets); ++i) {
    if (name == kTargets[i].name && IsSupported(kTargets[i])) return static_cast<int>(i);
  }
  Fail("unknown or unsupported CPU target '", name, "'; valid on this CPU: ", ValidTargetNames());
}

// Index into kTargets: KAKEYA_CPU_TARGET if set, else the best supported one.
int InitialTarget() {
  if (const char* env = std::getenv("KAKEYA_CPU_TARGET"); env != nullptr && *env != '\0') {
    return FindTarget(env);
  }
  for (size_t i = 0; i < std::size(kTargets); ++i) {
    if (IsSupported(kTargets[i])) return static_cast<int>(i);
  }
  return static_cast<int>(std::size(kTargets)) - 1;
}

std::atomic<int>& TargetIndex() {
  static std::atomic<int> index{InitialTarget()};
  return index;
}

bool IsLegacyQuant(DType t) {
  return t == DType::kQ8_0 || t == DType::kQ4_0 || t == DType::kQ4_1 || t == DType::kQ5_0 ||
         t == DType::kQ5_1;
}
bool IsKQuant(DType t) { return t == DType::kQ4_K || t == DType::kQ5_K || t == DType::kQ6_K; }

constexpr size_t kAlign = 64;
size_t AlignUp(size_t n) { return (n + kAlign - 1) / kAlign * kAlign; }

}  // namespace

size_t MatMulScratchBytes(DType type, int64_t n_in, int64_t n_rows) {
  const auto rows = static_cast<size_t>(n_rows), in = static_cast<size_t>(n_in);
  if (IsLegacyQuant(type)) {
    return AlignUp(rows * in) + 2 * AlignUp(rows * in / kQK * sizeof(float)) +
           AlignUp(rows * in / kQK * sizeof(int16_t));
  }
  if (IsKQuant(type)) {
    return AlignUp(rows * in) + AlignUp(rows * in / kQKK * sizeof(float)) +
           AlignUp(rows * in / 16 * sizeof(int16_t));
  }
  return 0;
}

namespace {

MatMulKernel KernelFor(const CpuTarget& target, const WeightMatrix& w) {
  const bool packed = w.layout != WeightLayout::kRows;
  MatMulKernel kernel = packed                 ? target.packed_kernel(w.layout)
                        : IsLegacyQuant(w.type) ? target.legacy_kernel(w.type)
                        : IsKQuant(w.type)      ? target.kquant_kernel(w.type)
                                                : target.float_kernel(w.type);
  // A layout packed for another target (ForceCpuTarget after loading) runs
  // on the portable target's kernel: same bits, slower.
  if (kernel == nullptr && packed) kernel = kTargets[std::size(kTargets) - 1].packed_kernel(w.layout);
  if (kernel == nullptr) Fail("MatMul: unsupported weight type ", NameOf(w.type));
  return kernel;
}

// How a weight type wants its activation rows: as they are, Q8 blocks of 32
// (legacy quants) or Q8K super-blocks of 256 (K-quants).
enum class ActKind { kFloat, kQ8, kQ8K };
ActKind ActKindOf(DType t) { return IsLegacyQuant(t) ? ActKind::kQ8 : IsKQuant(t) ? ActKind::kQ8K : ActKind::kFloat; }

// Below this many activation elements, quantizing on the calling thread costs
// less than a hand-off to the pool (a few microseconds).
constexpr int64_t kInlineQuantizeElements = 16384;

template <typename Fn>
void ForEachRow(int64_t n_rows, int64_t n_in, ThreadPool& pool, Fn&& fn) {
  if (n_rows * n_in <= kInlineQuantizeElements) {
    for (int64_t r = 0; r < n_rows; ++r) fn(r);
  } else {
    pool.Run(n_rows, [&](int64_t r, int) { fn(r); });
  }
}

}  // namespace

void MatMulGroups(std::span<const MatMulGroup> groups, const float* x, int64_t n_rows, void* scratch,
                  ThreadPool& pool) {
  if (n_rows <= 0 || groups.empty()) return;
  const WeightMatrix& w0 = *groups[0].w;
  const ActKind kind = ActKindOf(w0.type);
  for (const MatMulGroup& g : groups) {
    if (g.w->n_in != w0.n_in) Fail("MatMulGroups: matrices of ", w0.n_in, " and ", g.w->n_in, " inputs");
    if (g.first_row < 0 || g.n_rows < 0 || g.first_row + g.n_rows > n_rows) {
      Fail("MatMulGroups: rows ", g.first_row, " + ", g.n_rows, " outside the ", n_rows, " given");
    }
  }
  for (const MatMulGroup& g : groups) {
    if (ActKindOf(g.w->type) != kind) {
      // Weight types that quantize activations differently (a mixed-type
      // model): one group at a time; the results are the same bits.
      for (const MatMulGroup& each : groups) {
        const MatMulGroup alone{each.w, 0, each.n_rows, each.y};
        MatMulGroups({&alone, 1}, x + each.first_row * w0.n_in, each.n_rows, scratch, pool);
      }
      return;
    }
  }

  // Every row quantized once; each group's job reads its own range.
  const CpuTarget& target = kTargets[TargetIndex().load(std::memory_order_relaxed)];
  auto* base = static_cast<uint8_t*>(scratch);
  const int64_t n_in = w0.n_in;
  ActQ8 q8{};
  ActQ8K q8k{};
  if (kind == ActKind::kQ8) {
    const int64_t nb = n_in / kQK;
    auto* qs = reinterpret_cast<int8_t*>(base);
    auto* d = reinterpret_cast<float*>(base + AlignUp(n_rows * n_in));
    float* s = d + AlignUp(n_rows * nb * sizeof(float)) / sizeof(float);
    auto* sums = reinterpret_cast<int16_t*>(s + AlignUp(n_rows * nb * sizeof(float)) / sizeof(float));
    ForEachRow(n_rows, n_in, pool, [&](int64_t r) {
      target.quantize_q8(x + r * n_in, n_in, qs + r * n_in, d + r * nb, s + r * nb, sums + r * nb);
    });
    q8 = {qs, d, s, sums};
  } else if (kind == ActKind::kQ8K) {
    const int64_t nsb = n_in / kQKK;
    auto* qs = reinterpret_cast<int8_t*>(base);
    auto* d = reinterpret_cast<float*>(base + AlignUp(n_rows * n_in));
    auto* bsums = reinterpret_cast<int16_t*>(reinterpret_cast<uint8_t*>(d) +
                                             AlignUp(n_rows * nsb * sizeof(float)));
    ForEachRow(n_rows, n_in, pool, [&](int64_t r) {
      target.quantize_q8k(x + r * n_in, n_in, qs + r * n_in, d + r * nsb, bsums + r * nsb * 16);
    });
    q8k = {qs, d, bsums};
  }
  auto job_of = [&](const MatMulGroup& g) {
    const int64_t r = g.first_row;
    MatMulJob job{g.w, g.n_rows, x + r * n_in, {}, {}, g.y};
    if (kind == ActKind::kQ8) {
      const int64_t nb = n_in / kQK;
      job.q8 = {q8.qs + r * n_in, q8.d + r * nb, q8.s + r * nb, q8.sums + r * nb};
    } else if (kind == ActKind::kQ8K) {
      const int64_t nsb = n_in / kQKK;
      job.q8k = {q8k.qs + r * n_in, q8k.d + r * nsb, q8k.bsums + r * nsb * 16};
    }
    return job;
  };

  // Column chunks of a multiple of 4 (of a packed group of 16), all in one
  // pool run, for load balance about 8 per thread and matrix up to 4
  // matrices (Q/K/V, gate/up) and 32 per thread in all beyond (a mixture's
  // experts), each matrix's share by its columns. Chunking never changes how
  // a column is computed.
  int64_t total_columns = 0;
  for (const MatMulGroup& g : groups) total_columns += g.n_rows > 0 ? g.w->n_out : 0;
  const int64_t target_tasks = 8 * pool.size() * static_cast<int64_t>(std::min<size_t>(groups.size(), 4));
  const int64_t columns_per_task = (total_columns + target_tasks - 1) / target_tasks;
  auto chunk_of = [&](const MatMulGroup& g) {
    const int64_t unit = g.w->layout != WeightLayout::kRows ? 16 : 4;
    return std::max<int64_t>(unit, (columns_per_task + unit - 1) / unit * unit);
  };
  auto tasks_of = [&](const MatMulGroup& g) {
    return g.n_rows > 0 ? (g.w->n_out + chunk_of(g) - 1) / chunk_of(g) : 0;
  };
  int64_t n_tasks = 0;
  for (const MatMulGroup& g : groups) n_tasks += tasks_of(g);
  pool.Run(n_tasks, [&](int64_t t, int) {
    // The group of task t: a walk over a handful of groups (a mixture's
    // touched experts at most), cheaper than a table the hot loop would
    // have to keep without allocating.
    size_t g = 0;
    for (int64_t n; t >= (n = tasks_of(groups[g])); t -= n) ++g;
    const MatMulJob job = job_of(groups[g]);
    const int64_t chunk = chunk_of(groups[g]);
    KernelFor(target, *groups[g].w)(job, t * chunk, std::min(job.w->n_out, (t + 1) * chunk));
  });
}

void MatMulSharedInput(std::span<const MatMulOutput> outs, const float* x, int64_t n_rows, void* scratch,
                       ThreadPool& pool) {
  constexpr size_t kMaxOutputs = 4;
  if (outs.size() > kMaxOutputs) Fail("MatMulSharedInput: at most ", kMaxOutputs, " matrices, got ", outs.size());
  MatMulGroup groups[kMaxOutputs];
  for (size_t m = 0; m < outs.size(); ++m) groups[m] = {outs[m].w, 0, n_rows, outs[m].y};
  MatMulGroups({groups, outs.size()}, x, n_rows, scratch, pool);
}

void MatMul(const WeightMatrix& w, const float* x, int64_t n_rows, float* y, void* scratch, ThreadPool& pool) {
  const MatMulGroup group{&w, 0, n_rows, y};
  MatMulGroups({&group, 1}, x, n_rows, scratch, pool);
}

WeightMatrix FirstOutputs(const WeightMatrix& w, int64_t n) {
  if (n < 1 || n > w.n_out || (n % 16 != 0 && n != w.n_out)) {
    Fail("the first ", n, " outputs of a matrix of ", w.n_out, ": must be a multiple of 16, or all");
  }
  WeightMatrix first = w;
  first.n_out = n;
  return first;
}

WeightLayout PackedLayoutOf(DType type) {
  switch (type) {
    case DType::kQ8_0: return WeightLayout::kQ8_0x16;
    case DType::kQ4_0: return WeightLayout::kQ4_0x16;
    case DType::kQ4_1: return WeightLayout::kQ4_1x16;
    case DType::kQ5_0: return WeightLayout::kQ5_0x16;
    case DType::kQ5_1: return WeightLayout::kQ5_1x16;
    case DType::kQ4_K: return WeightLayout::kQ4_Kx16;
    case DType::kQ5_K: return WeightLayout::kQ5_Kx16;
    case DType::kQ6_K: return WeightLayout::kQ6_Kx16;
    default: return WeightLayout::kRows;
  }
}

bool CanPack(const WeightMatrix& w) {
  const WeightLayout layout = PackedLayoutOf(w.type);
  if (w.layout != WeightLayout::kRows || layout == WeightLayout::kRows) return false;
  return kTargets[TargetIndex().load()].packed_kernel(layout) != nullptr;
}

size_t PackedBytes(const WeightMatrix& w) {
  const WeightLayout layout = PackedLayoutOf(w.type);
  return IsPacked32(layout) ? Packed32Bytes(w, layout) : PackedKQuantBytes(w, layout);
}

WeightMatrix PackWeights(const WeightMatrix& w, void* dst) {
  const WeightLayout layout = PackedLayoutOf(w.type);
  if (w.layout != WeightLayout::kRows || layout == WeightLayout::kRows) {
    Fail("PackWeights: no packed layout for ", NameOf(w.type), " [", w.n_in, ", ", w.n_out, "]");
  }
  auto* out = static_cast<uint8_t*>(dst);
  if (IsPacked32(layout)) {
    Pack32(w, layout, out);
  } else {
    PackKQuant(w, layout, out);
  }
  WeightMatrix packed = w;
  packed.data = dst;
  packed.layout = layout;
  return packed;
}

const char* ActiveCpuTarget() { return kTargets[TargetIndex().load()].name; }

VectorIsa ActiveVectorIsa() { return kTargets[TargetIndex().load(std::memory_order_relaxed)].ops_isa; }

std::vector<std::string> SupportedCpuTargets() {
  std::vector<std::string> names;
  for (const CpuTarget& t : kTargets) {
    if (IsSupported(t)) names.emplace_back(t.name);
  }
  return names;
}

void ForceCpuTarget(const std::string& name) { TargetIndex().store(FindTarget(name)); }

}  // namespace kakeya
