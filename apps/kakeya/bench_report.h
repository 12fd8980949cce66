// What `kakeya bench spec` prints: one row per configuration (workload,
// method, block) as a table, JSON or CSV rows. The columns are documented in
// README.md ("Benchmarks").
#pragma once

#include <cstddef>
#include <cstdio>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace kakeya::cli {

// Where and what ran, the same for every row of a run.
struct BenchSetup {
  std::string machine;     // CPU model name
  std::string cpu_target;  // the SIMD target the kernels chose
  std::string model;       // file name
  std::string dtype;       // the weight type holding most of the model's bytes
  int threads = 0;
  std::string sampling;    // "greedy" or "temp 0.8 seed 1 top-k 40 top-p 0.95 min-p 0.05"
  int reps = 0;            // timed repetitions, after one warm-up
  double synthetic_accept = 0;  // --synthetic-accept TAU, 0 = off
};

// One configuration's medians over the repetitions.
struct BenchRow {
  std::string workload;
  std::string method;       // "none" is plain decoding
  int block = 0;            // rows per verify step; 0 = adaptive (plain: none; JSON null, CSV "-")
  int prompts = 0;
  long tokens = 0;          // generated per repetition, over every prompt
  double prefill_tok_s = 0;
  double decode_tok_s = 0;  // generated tokens after the first over decode time
  double speedup = 0;       // decode tok/s over plain decoding's in the same repetition
  double mean_accept_len = 0;  // tokens per verify step, the bonus included; 0 for plain
  double draft_share = 0;   // of decode time: drafting
  double verify_share = 0;  // of decode time: the target's verify forwards
  size_t peak_rss_bytes = 0;
  size_t kv_bytes = 0;      // the target context's KV cache
  std::string identical;    // "yes", "no", "-" (plain), "skipped" (synthetic acceptance)
  int degenerate = 0;       // outputs that degenerate, of `prompts`
};

std::string BlockName(int block);  // "adaptive" for 0

void PrintTable(std::FILE* out, const BenchSetup& setup, const std::vector<BenchRow>& rows);
nlohmann::json ReportJson(const BenchSetup& setup, const std::vector<BenchRow>& rows);
// Appends one line per row, the header first when the file is new or empty.
void AppendCsv(const std::string& path, const BenchSetup& setup, const std::vector<BenchRow>& rows);

}  // namespace kakeya::cli
