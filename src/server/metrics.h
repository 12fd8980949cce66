// GET /metrics in the Prometheus text exposition format (version 0.0.4):
// the scheduler's counters and gauges (requests, tokens in and out, decode
// tok/s, draft acceptance, queue length, slot use, the draft policy's
// choice by concurrency) and the HTTP side's (responses by route and status,
// how requests finished). Counters end in _total; rates are Prometheus's
// job (rate(kakeya_completion_tokens_total[1m]) is the recent tok/s).
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <utility>

#include "server/scheduler.h"

namespace kakeya {

// What the HTTP side counts; any thread may add.
class ServerCounters {
 public:
  struct Snapshot {
    std::map<std::pair<std::string, int>, uint64_t> responses;  // (route, status)
    std::map<std::string, uint64_t> finishes;                    // finish reason
  };

  void CountResponse(const std::string& route, int status);
  // "stop", "length", "tool_calls", "cancelled" (the client went away) or "error".
  void CountFinish(const std::string& reason);
  Snapshot Get() const;

 private:
  mutable std::mutex mu_;
  Snapshot counts_;
};

std::string PrometheusText(const SchedulerMetrics& scheduler, const ServerCounters::Snapshot& server, double uptime_s);

}  // namespace kakeya
