#include "bench_report.h"

#include <filesystem>
#include <fstream>

#include "base/error.h"

namespace kakeya::cli {
namespace {

double MiB(size_t bytes) { return bytes / (1024.0 * 1024.0); }

// RFC 4180: fields holding a comma, quote or line break are quoted.
std::string CsvField(const std::string& s) {
  if (s.find_first_of(",\"\n\r") == std::string::npos) return s;
  std::string out = "\"";
  for (char c : s) out += c == '"' ? std::string("\"\"") : std::string(1, c);
  return out + "\"";
}

std::string Fixed(double v, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

}  // namespace

std::string BlockName(int block) { return block > 0 ? std::to_string(block) : "adaptive"; }

void PrintTable(std::FILE* out, const BenchSetup& s, const std::vector<BenchRow>& rows) {
  std::fprintf(out, "machine: %s | target %s | %d threads\n", s.machine.c_str(), s.cpu_target.c_str(), s.threads);
  std::fprintf(out, "model: %s (%s) | %s | medians of %d repetitions after a warm-up\n", s.model.c_str(),
               s.dtype.c_str(), s.sampling.c_str(), s.reps);
  if (s.synthetic_accept > 0) {
    std::fprintf(out, "synthetic acceptance: drafts accepted at random, %.2f tokens per step targeted; "
                 "NOT lossless, the identity gate is skipped\n", s.synthetic_accept);
  }
  std::string workload;
  for (const BenchRow& r : rows) {
    if (r.workload != workload) {
      workload = r.workload;
      std::fprintf(out, "\nworkload %s: %d prompts, %ld tokens per repetition\n", r.workload.c_str(), r.prompts,
                   r.tokens);
      std::fprintf(out, "%-7s %8s %9s %9s %8s %7s %13s %9s %8s %9s %10s\n", "method", "block", "prefill", "decode",
                   "speedup", "accept", "draft/verify", "peak RSS", "KV", "identical", "degenerate");
      std::fprintf(out, "%-7s %8s %9s %9s %8s %7s %13s %9s %8s %9s %10s\n", "", "", "tok/s", "tok/s", "", "len",
                   "% of decode", "MiB", "MiB", "", "");
    }
    const std::string accept = r.method == "none" ? "-" : Fixed(r.mean_accept_len, 2);
    const std::string shares =
        r.method == "none" ? "-" : Fixed(100 * r.draft_share, 0) + "/" + Fixed(100 * r.verify_share, 0);
    std::fprintf(out, "%-7s %8s %9.1f %9.1f %7.2fx %7s %13s %9.1f %8.2f %9s %6d/%d\n", r.method.c_str(),
                 r.method == "none" ? "-" : BlockName(r.block).c_str(), r.prefill_tok_s, r.decode_tok_s, r.speedup,
                 accept.c_str(), shares.c_str(), MiB(r.peak_rss_bytes), MiB(r.kv_bytes), r.identical.c_str(),
                 r.degenerate, r.prompts);
  }
}

nlohmann::json ReportJson(const BenchSetup& s, const std::vector<BenchRow>& rows) {
  nlohmann::json out = {{"machine", s.machine}, {"cpu_target", s.cpu_target}, {"model", s.model},
                        {"dtype", s.dtype},     {"threads", s.threads},       {"sampling", s.sampling},
                        {"reps", s.reps}};
  out["results"] = nlohmann::json::array();
  for (const BenchRow& r : rows) {
    out["results"].push_back({{"workload", r.workload},
                              {"method", r.method},
                              {"block", r.method == "none" ? nlohmann::json(nullptr)
                                        : r.block > 0    ? nlohmann::json(r.block)
                                                         : nlohmann::json("adaptive")},
                              {"prompts", r.prompts},
                              {"tokens", r.tokens},
                              {"prefill_tok_s", r.prefill_tok_s},
                              {"decode_tok_s", r.decode_tok_s},
                              {"speedup", r.speedup},
                              {"mean_accept_len", r.mean_accept_len},
                              {"draft_share", r.draft_share},
                              {"verify_share", r.verify_share},
                              {"peak_rss_bytes", r.peak_rss_bytes},
                              {"kv_bytes", r.kv_bytes},
                              {"identical", r.identical},
                              {"degenerate", r.degenerate}});
  }
  if (s.synthetic_accept > 0) {
    out["synthetic_accept"] = s.synthetic_accept;
    out["synthetic"] = nlohmann::json::array();
    for (const BenchRow& r : rows) {
      if (r.method == "none") continue;
      out["synthetic"].push_back({{"workload", r.workload},
                                  {"method", r.method},
                                  {"block", r.block},
                                  {"tau", s.synthetic_accept},
                                  {"mean_accept_len", r.mean_accept_len},
                                  {"tok_s", r.decode_tok_s},
                                  {"speedup", r.speedup}});
    }
  }
  return out;
}

void AppendCsv(const std::string& path, const BenchSetup& s, const std::vector<BenchRow>& rows) {
  std::error_code ec;
  const bool fresh = !std::filesystem::exists(path, ec) || std::filesystem::file_size(path, ec) == 0;
  std::ofstream out(path, std::ios::app);
  if (!out) Fail("--csv: cannot write ", path);
  if (fresh) {
    out << "machine,cpu_target,model,dtype,threads,sampling,synthetic_accept,workload,method,block,prompts,tokens,"
           "prefill_tok_s,decode_tok_s,speedup,mean_accept_len,draft_share,verify_share,peak_rss_bytes,kv_bytes,"
           "identical,degenerate\n";
  }
  for (const BenchRow& r : rows) {
    out << CsvField(s.machine) << ',' << s.cpu_target << ',' << CsvField(s.model) << ',' << s.dtype << ','
        << s.threads << ',' << CsvField(s.sampling) << ',' << Fixed(s.synthetic_accept, 2) << ','
        << CsvField(r.workload) << ',' << r.method << ',' << (r.method == "none" ? "-" : BlockName(r.block)) << ','
        << r.prompts << ',' << r.tokens << ',' << Fixed(r.prefill_tok_s, 1) << ',' << Fixed(r.decode_tok_s, 1) << ','
        << Fixed(r.speedup, 3) << ',' << Fixed(r.mean_accept_len, 3) << ',' << Fixed(r.draft_share, 3) << ','
        << Fixed(r.verify_share, 3) << ',' << r.peak_rss_bytes << ',' << r.kv_bytes << ',' << r.identical << ','
        << r.degenerate << '\n';
  }
  if (!out) Fail("--csv: writing ", path, " failed");
}

}  // namespace kakeya::cli
