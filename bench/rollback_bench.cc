// What rolling back a recurrent state costs (ADR 0017): the decode step
// after a verify block of 8 rows that was fully accepted (the state
// continues from the head) against the one after a block of which only
// `kept` rows were (the base is loaded, the kept rows replayed, the base
// written once more). The difference is the rollback's whole cost: the trim
// itself is O(1). Counters: step_ms (the median step after an accepted
// block), rollback_ms (the median extra time of the step after a rollback,
// measured back to back with it) and rollback_pct (their ratio). Any model runs; qwen35's recurrent layers are what it
// measures (make-bench-model --arch qwen35moe writes the bench shape).
//
//   KAKEYA_BENCH_MODEL=bench-q35moe-q8_0.gguf build/bin/rollback_bench
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "model/context.h"
#include "model/model.h"

namespace kakeya {
namespace {

constexpr int kBlock = 8;
constexpr int kCtx = 4096;

const Model* BenchModel() {
  static const std::unique_ptr<Model> model = [] {
    const char* path = std::getenv("KAKEYA_BENCH_MODEL");
    return path == nullptr ? nullptr : Model::Load(path);
  }();
  return model.get();
}

// One decode step after a verify block of kBlock rows of which `kept` were
// kept (and committed); returns its seconds.
double StepAfterVerify(Context& ctx, const std::vector<TokenId>& block, int kept) {
  if (ctx.n_past() + kBlock + 1 > kCtx) ctx.Clear();
  ctx.Forward(block, /*all_logits=*/true);
  ctx.Trim(kBlock - kept);
  ctx.Commit();
  const auto start = std::chrono::steady_clock::now();
  ctx.Forward({block.data(), 1}, /*all_logits=*/false);
  const std::chrono::duration<double> seconds = std::chrono::steady_clock::now() - start;
  ctx.Commit();
  return seconds.count();
}

// Each iteration times the step after a fully accepted block and the step
// after a block of which `kept` rows were kept, back to back, so that the
// machine's drifts (its memory bandwidth changes within minutes) hit both:
// the counters are the accepted step and the rolled-back one's extra time.
void RollbackCost(benchmark::State& state) {
  const Model* model = BenchModel();
  if (model == nullptr) {
    state.SkipWithError("set KAKEYA_BENCH_MODEL to a GGUF file");
    return;
  }
  const int kept = static_cast<int>(state.range(0));
  Context ctx(*model, ContextOptions{.n_ctx = kCtx, .max_batch = 64, .n_threads = 2, .max_logit_rows = kBlock});
  const std::vector<TokenId> block(kBlock, 100);
  std::vector<double> accepted, extra;
  for (auto _ : state) {
    const double after_accept = StepAfterVerify(ctx, block, kBlock);
    const double after_rollback = StepAfterVerify(ctx, block, kept);
    state.SetIterationTime(after_rollback);
    accepted.push_back(after_accept);
    extra.push_back(after_rollback - after_accept);
  }
  std::sort(accepted.begin(), accepted.end());
  std::sort(extra.begin(), extra.end());
  const double step = accepted[accepted.size() / 2], cost = extra[extra.size() / 2];
  state.counters["step_ms"] = step * 1e3;
  state.counters["rollback_ms"] = cost * 1e3;
  state.counters["rollback_pct"] = 100 * cost / step;
  state.SetLabel(ctx.cache().recurrent() == nullptr
                     ? "no recurrent layers"
                     : "recurrent state " + std::to_string(ctx.cache().recurrent()->bytes() >> 20) + " MiB");
}
BENCHMARK(RollbackCost)->ArgName("kept")->Arg(1)->Arg(4)->Arg(7)->Unit(benchmark::kMillisecond)->UseManualTime()
    ->Iterations(60);

}  // namespace
}  // namespace kakeya
