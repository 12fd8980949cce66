#include "server/scheduler.h"

#include <algorithm>
#include <chrono>

#include "base/error.h"
#include "model/context.h"
#include "speculative/speculative.h"

namespace kakeya {
namespace {

using Clock = std::chrono::steady_clock;

double MsBetween(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

}  // namespace

struct Scheduler::Slot {
  std::unique_ptr<Context> context;
  std::unique_ptr<Drafter> drafter;
};

struct Scheduler::Pending {
  uint64_t id;
  GenerationRequest request;
  GenerationCallbacks callbacks;
  Clock::time_point submitted;
};

Scheduler::Scheduler(const Model& model, const SchedulerOptions& options, const DrafterFactory& make_drafter)
    : model_(model), options_(options) {
  if (options_.slots < 1 || options_.slots > 256) Fail("--slots ", options_.slots, " is out of range (1 .. 256)");
  if (options_.max_queue < 0) Fail("--max-queue ", options_.max_queue, " is negative");
  ContextOptions copts;
  copts.n_ctx = options_.n_ctx;
  copts.n_threads = options_.n_threads;
  copts.max_batch = std::max(options_.max_step_rows, options_.max_block);
  copts.max_logit_rows = options_.max_block;
  for (int i = 0; i < options_.slots; ++i) {
    auto slot = std::make_unique<Slot>();
    slot->context = std::make_unique<Context>(model_, copts);
    if (make_drafter) slot->drafter = make_drafter(*slot->context);
    slots_.push_back(std::move(slot));
  }
  drafter_name_ = slots_[0]->drafter ? slots_[0]->drafter->name() : "none";
  metrics_.slots = options_.slots;
  metrics_.drafts_by_concurrency.assign(options_.slots, 0.0);
  thread_ = std::thread([this] { Loop(); });
}

Scheduler::~Scheduler() {
  Shutdown(true);
  if (thread_.joinable()) thread_.join();
}

uint64_t Scheduler::Submit(GenerationRequest request, GenerationCallbacks callbacks) {
  if (request.prompt.empty()) Fail("the prompt is empty");
  if (static_cast<int>(request.prompt.size()) >= options_.n_ctx) {
    Fail("the prompt has ", request.prompt.size(), " tokens but the context holds ", options_.n_ctx);
  }
  request.options.sampling.Validate();
  std::lock_guard lock(mu_);
  if (stopping_) Fail("the server is shutting down");
  if (static_cast<int>(queue_.size()) >= options_.max_queue) throw QueueFull("the request queue is full");
  const uint64_t id = next_id_++;
  queue_.push_back(std::make_unique<Pending>(Pending{id, std::move(request), std::move(callbacks), Clock::now()}));
  metrics_.queued = static_cast<int>(queue_.size());
  wake_.notify_all();
  return id;
}

void Scheduler::Cancel(uint64_t id) {
  std::lock_guard lock(mu_);
  cancelled_.push_back(id);
}

void Scheduler::Shutdown(bool cancel_running) {
  std::unique_lock lock(mu_);
  stopping_ = true;
  cancel_running_ = cancel_running_ || cancel_running;
  wake_.notify_all();
  idle_.wait(lock, [&] { return queue_.empty() && metrics_.slots_busy == 0; });
}

SchedulerMetrics Scheduler::Metrics() const {
  std::lock_guard lock(mu_);
  return metrics_;
}

// One request at a time on slot 0.
void Scheduler::Loop() {
  for (;;) {
    std::unique_ptr<Pending> job;
    {
      std::unique_lock lock(mu_);
      wake_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) {
        idle_.notify_all();
        if (stopping_) return;
        continue;
      }
      job = std::move(queue_.front());
      queue_.pop_front();
      metrics_.queued = static_cast<int>(queue_.size());
      metrics_.slots_busy = 1;
    }
    GenerationOutcome outcome;
    outcome.prompt_tokens = static_cast<int>(job->request.prompt.size());
    const auto started = Clock::now();
    outcome.queue_ms = MsBetween(job->submitted, started);
    auto stop_requested = [&] {
      std::lock_guard lock(mu_);
      return cancel_running_ || std::find(cancelled_.begin(), cancelled_.end(), job->id) != cancelled_.end();
    };
    Slot& slot = *slots_[0];
    const TokenCallback on_token = [&](TokenId t) {
      if (outcome.completion_tokens++ == 0) outcome.ttft_ms = MsBetween(job->submitted, Clock::now());
      const bool go = job->callbacks.on_token(TokenEvent{t, {}});
      if (!go || stop_requested()) outcome.cancelled = true;
      return !outcome.cancelled;
    };
    try {
      if (stop_requested()) {
        outcome.cancelled = true;
      } else if (slot.drafter) {
        SpecOptions spec;
        spec.max_block = options_.max_block;
        SpecStats stats;
        const GenerateResult r =
            GenerateSpeculative(*slot.context, *slot.drafter, job->request.prompt, job->request.options, spec, on_token, &stats);
        outcome.stop = r.stop;
        outcome.steps = stats.steps;
        outcome.drafted = stats.drafted;
        outcome.accepted = stats.accepted;
      } else {
        outcome.stop = Generate(*slot.context, job->request.prompt, job->request.options, on_token).stop;
      }
    } catch (const std::exception& e) {
      outcome.error = e.what();
    }
    outcome.total_ms = MsBetween(job->submitted, Clock::now());
    job->callbacks.on_done(outcome);
    std::lock_guard lock(mu_);
    metrics_.slots_busy = 0;
    ++(outcome.error.empty() ? (outcome.cancelled ? metrics_.requests_cancelled : metrics_.requests_done)
                             : metrics_.requests_failed);
    metrics_.prompt_tokens += outcome.prompt_tokens;
    metrics_.completion_tokens += outcome.completion_tokens;
    metrics_.drafted += outcome.drafted;
    metrics_.accepted += outcome.accepted;
    std::erase(cancelled_, job->id);
  }
}

}  // namespace kakeya
