// GET /metrics: valid Prometheus text (every sample's family announced by
// HELP and TYPE first; names and labels well formed) with the values given.
#include <gtest/gtest.h>

#include <regex>
#include <set>
#include <sstream>
#include <string>

#include "server/metrics.h"

namespace kakeya {
namespace {

TEST(Metrics, PrometheusTextFormat) {
  SchedulerMetrics m;
  m.slots = 4;
  m.slots_busy = 2;
  m.queued = 3;
  m.requests_done = 10;
  m.completion_tokens = 500;
  m.busy_seconds = 2.0;
  m.drafted = 80;
  m.accepted = 60;
  m.drafts_by_concurrency = {3.5, 2.0, 0.0, 0.0};
  ServerCounters counters;
  counters.CountResponse("/v1/completions", 200);
  counters.CountResponse("/v1/completions", 200);
  counters.CountResponse("other", 404);
  counters.CountFinish("stop");
  const std::string text = PrometheusText(m, counters.Get(), 12.0);

  const std::regex help(R"(# HELP (kakeya_[a-z_]+) .+)");
  const std::regex type(R"(# TYPE (kakeya_[a-z_]+) (counter|gauge))");
  const std::regex sample(R"((kakeya_[a-z_]+)(\{[a-z_]+="[^"\n]*"(,[a-z_]+="[^"\n]*")*\})? (-?[0-9.e+-]+))");
  std::set<std::string> typed;
  std::istringstream lines(text);
  std::string line;
  std::smatch match;
  int samples = 0;
  while (std::getline(lines, line)) {
    if (std::regex_match(line, match, type)) {
      typed.insert(match[1]);
    } else if (!std::regex_match(line, help)) {
      ASSERT_TRUE(std::regex_match(line, match, sample)) << line;
      EXPECT_TRUE(typed.count(match[1])) << "no TYPE before " << line;
      if (std::string(match[1]).ends_with("_total")) {
        EXPECT_GE(std::stod(match[4]), 0) << line;
      }
      ++samples;
    }
  }
  EXPECT_GT(samples, 20);
  auto has = [&](const std::string& s) { return text.find(s + "\n") != std::string::npos; };
  EXPECT_TRUE(has("kakeya_slots_busy 2"));
  EXPECT_TRUE(has("kakeya_queue_length 3"));
  EXPECT_TRUE(has("kakeya_requests_total{outcome=\"done\"} 10"));
  EXPECT_TRUE(has("kakeya_decode_tokens_per_second 250"));
  EXPECT_TRUE(has("kakeya_draft_acceptance_ratio 0.75"));
  EXPECT_TRUE(has("kakeya_drafts_per_slot{decoding_slots=\"1\"} 3.5"));
  EXPECT_TRUE(has("kakeya_http_responses_total{route=\"/v1/completions\",status=\"200\"} 2"));
  EXPECT_TRUE(has("kakeya_finished_total{reason=\"stop\"} 1"));
}

TEST(Metrics, NothingYetIsZeroNotNaN) {
  const std::string text = PrometheusText(SchedulerMetrics{}, ServerCounters().Get(), 0);
  EXPECT_EQ(text.find("nan"), std::string::npos);
  EXPECT_NE(text.find("kakeya_decode_tokens_per_second 0\n"), std::string::npos);
}

}  // namespace
}  // namespace kakeya
