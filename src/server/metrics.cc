#include "server/metrics.h"

#include <cstdio>

namespace kakeya {
namespace {

// Appends one metric family: its HELP and TYPE lines, then its samples.
class Writer {
 public:
  void Family(const char* name, const char* type, const char* help) {
    out_ += "# HELP kakeya_" + std::string(name) + " " + help + "\n";
    out_ += "# TYPE kakeya_" + std::string(name) + " " + type + "\n";
    name_ = name;
  }
  void Sample(double value, const std::string& labels = "") {
    char number[32];
    std::snprintf(number, sizeof number, "%.17g", value);
    out_ += "kakeya_" + name_ + (labels.empty() ? "" : "{" + labels + "}") + " " + number + "\n";
  }
  void One(const char* name, const char* type, const char* help, double value) {
    Family(name, type, help);
    Sample(value);
  }
  std::string Take() { return std::move(out_); }

 private:
  std::string out_;
  std::string name_;
};

}  // namespace

void ServerCounters::CountResponse(const std::string& route, int status) {
  std::lock_guard lock(mu_);
  ++counts_.responses[{route, status}];
}

void ServerCounters::CountFinish(const std::string& reason) {
  std::lock_guard lock(mu_);
  ++counts_.finishes[reason];
}

ServerCounters::Snapshot ServerCounters::Get() const {
  std::lock_guard lock(mu_);
  return counts_;
}

std::string PrometheusText(const SchedulerMetrics& m, const ServerCounters::Snapshot& server, double uptime_s) {
  Writer w;
  w.One("uptime_seconds", "gauge", "Seconds since the server started.", uptime_s);
  w.Family("requests_total", "counter", "Generations the scheduler ended, by outcome.");
  w.Sample(static_cast<double>(m.requests_done), "outcome=\"done\"");
  w.Sample(static_cast<double>(m.requests_cancelled), "outcome=\"cancelled\"");
  w.Sample(static_cast<double>(m.requests_failed), "outcome=\"failed\"");
  w.One("prompt_tokens_total", "counter", "Prompt tokens of ended generations.", static_cast<double>(m.prompt_tokens));
  w.One("completion_tokens_total", "counter", "Generated tokens of ended generations.",
        static_cast<double>(m.completion_tokens));
  w.One("busy_seconds_total", "counter", "Seconds the scheduler spent in steps.", m.busy_seconds);
  w.One("decode_tokens_per_second", "gauge", "Generated tokens per busy second since start-up.",
        m.busy_seconds > 0 ? static_cast<double>(m.completion_tokens) / m.busy_seconds : 0.0);
  w.One("steps_total", "counter", "Batched forward passes.", static_cast<double>(m.steps));
  w.One("step_rows_total", "counter", "Rows over all batched forward passes.", static_cast<double>(m.rows));
  w.One("draft_tokens_total", "counter", "Draft tokens proposed.", static_cast<double>(m.drafted));
  w.One("draft_accepted_tokens_total", "counter", "Draft tokens the target accepted.", static_cast<double>(m.accepted));
  w.One("draft_acceptance_ratio", "gauge", "Accepted over proposed draft tokens since start-up.",
        m.drafted > 0 ? static_cast<double>(m.accepted) / static_cast<double>(m.drafted) : 0.0);
  w.One("queue_length", "gauge", "Requests waiting for a slot.", m.queued);
  w.One("slots", "gauge", "Slots (requests decoded at once).", m.slots);
  w.One("slots_busy", "gauge", "Slots holding a request.", m.slots_busy);
  w.Family("drafts_per_slot", "gauge",
           "The draft policy's last choice: mean draft tokens per decoding slot, by how many slots were decoding.");
  for (size_t k = 0; k < m.drafts_by_concurrency.size(); ++k) {
    w.Sample(m.drafts_by_concurrency[k], "decoding_slots=\"" + std::to_string(k + 1) + "\"");
  }
  w.Family("http_responses_total", "counter", "HTTP responses by route and status.");
  for (const auto& [key, n] : server.responses) {
    w.Sample(static_cast<double>(n), "route=\"" + key.first + "\",status=\"" + std::to_string(key.second) + "\"");
  }
  w.Family("finished_total", "counter", "Completions by how they ended (stop, length, tool_calls, cancelled, error).");
  for (const auto& [reason, n] : server.finishes) w.Sample(static_cast<double>(n), "reason=\"" + reason + "\"");
  return w.Take();
}

}  // namespace kakeya
