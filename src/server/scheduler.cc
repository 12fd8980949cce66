#include "server/scheduler.h"

#include <algorithm>
#include <chrono>

#include "base/error.h"
#include "model/context.h"

namespace kakeya {
namespace {

using Clock = std::chrono::steady_clock;

double MsBetween(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

}  // namespace

struct Scheduler::Pending {
  uint64_t id;
  GenerationRequest request;
  GenerationCallbacks callbacks;
  Clock::time_point submitted;
};

struct Scheduler::Slot {
  std::unique_ptr<Context> context;
  std::unique_ptr<Drafter> drafter;
  std::unique_ptr<SpeculativeDecoder> decoder;
  std::unique_ptr<Pending> job;  // null: free
  GenerationOutcome outcome;
  bool stop_requested = false;   // Cancel() or shutdown
};

Scheduler::Scheduler(const Model& model, const SchedulerOptions& options, const DrafterFactory& make_drafter)
    : model_(model), options_(options) {
  if (options_.slots < 1 || options_.slots > ForwardBuffers::kMaxSequences) {
    Fail("--slots ", options_.slots, " is out of range (1 .. ", ForwardBuffers::kMaxSequences, ")");
  }
  if (options_.max_queue < 0) Fail("--max-queue ", options_.max_queue, " is negative");
  if (options_.max_block < 1 || options_.max_block > kMaxBlock) {
    Fail("block size ", options_.max_block, " is out of range (1 .. ", kMaxBlock, ")");
  }
  options_.max_step_rows = std::max(options_.max_step_rows, options_.slots * options_.max_block);
  workspace_ = std::make_unique<Workspace>(model_, WorkspaceOptions{.max_rows = options_.max_step_rows,
                                                                    .max_logit_rows = options_.slots * options_.max_block,
                                                                    .n_ctx = options_.n_ctx,
                                                                    .n_threads = options_.n_threads});
  ContextOptions copts;
  copts.n_ctx = options_.n_ctx;
  copts.max_batch = options_.max_step_rows;
  copts.max_logit_rows = options_.max_block;
  copts.workspace = workspace_.get();
  copts.cache_type_k = options_.cache_type_k;
  copts.cache_type_v = options_.cache_type_v;
  SpecOptions spec;
  spec.max_block = options_.max_block;
  for (int i = 0; i < options_.slots; ++i) {
    auto slot = std::make_unique<Slot>();
    slot->context = std::make_unique<Context>(model_, copts);
    if (make_drafter) slot->drafter = make_drafter(*slot->context);
    slot->decoder = std::make_unique<SpeculativeDecoder>(*slot->context, slot->drafter.get(), spec, cost_);
    slots_.push_back(std::move(slot));
  }
  drafter_name_ = slots_[0]->drafter ? slots_[0]->drafter->name() : "none";
  batch_.reserve(options_.slots);
  batch_slots_.reserve(options_.slots);
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
  const int n_vocab = model_.hparams().n_vocab;
  for (TokenId t : request.prompt) {
    if (t < 0 || t >= n_vocab) Fail("token id ", t, " in the prompt is out of range for a vocabulary of ", n_vocab);
  }
  request.options.sampling.Validate();
  std::lock_guard lock(mu_);
  if (stopping_) Fail("the server is shutting down");
  // Requests pass through the queue on their way to a slot: free slots add
  // to the room, so that --max-queue counts only requests that must wait.
  const int free_slots = options_.slots - metrics_.slots_busy;
  if (static_cast<int>(queue_.size()) >= options_.max_queue + free_slots) throw QueueFull("the request queue is full");
  const uint64_t id = next_id_++;
  queue_.push_back(std::make_unique<Pending>(Pending{id, std::move(request), std::move(callbacks), Clock::now()}));
  metrics_.queued = static_cast<int>(queue_.size());
  wake_.notify_all();
  return id;
}

void Scheduler::Cancel(uint64_t id) {
  std::lock_guard lock(mu_);
  cancelled_.push_back(id);
  wake_.notify_all();
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

int Scheduler::BusySlots() const {
  return static_cast<int>(std::count_if(slots_.begin(), slots_.end(), [](const auto& s) { return s->job != nullptr; }));
}

void Scheduler::Loop() {
  while (AdmitAndCancel()) Step();
}

bool Scheduler::AdmitAndCancel() {
  std::vector<std::unique_ptr<Pending>> refused;  // queued when the server stopped: cancelled
  std::vector<Slot*> admitted;
  {
    std::unique_lock lock(mu_);
    wake_.wait(lock, [&] { return stopping_ || !queue_.empty() || BusySlots() > 0; });
    for (auto& slot : slots_) {
      if (slot->job == nullptr) continue;
      const uint64_t id = slot->job->id;
      if (cancel_running_ || std::find(cancelled_.begin(), cancelled_.end(), id) != cancelled_.end()) {
        slot->stop_requested = true;
      }
    }
    if (stopping_) {
      while (!queue_.empty()) {
        refused.push_back(std::move(queue_.front()));
        queue_.pop_front();
      }
    }
    for (auto& slot : slots_) {
      if (slot->job != nullptr || queue_.empty()) continue;
      slot->job = std::move(queue_.front());
      queue_.pop_front();
      admitted.push_back(slot.get());
    }
    // Ids of requests that are neither queued nor running are forgotten.
    std::erase_if(cancelled_, [&](uint64_t id) {
      const bool running = std::any_of(slots_.begin(), slots_.end(), [&](const auto& s) { return s->job && s->job->id == id; });
      const bool queued = std::any_of(queue_.begin(), queue_.end(), [&](const auto& p) { return p->id == id; });
      return !running && !queued;
    });
    metrics_.queued = static_cast<int>(queue_.size());
    metrics_.slots_busy = BusySlots();
  }
  for (auto& p : refused) {
    GenerationOutcome outcome;
    outcome.cancelled = true;
    outcome.prompt_tokens = static_cast<int>(p->request.prompt.size());
    p->callbacks.on_done(outcome);
    std::lock_guard lock(mu_);
    ++metrics_.requests_cancelled;
  }
  for (Slot* slot : admitted) {
    Pending& job = *slot->job;
    slot->outcome = GenerationOutcome{};
    slot->outcome.prompt_tokens = static_cast<int>(job.request.prompt.size());
    slot->outcome.queue_ms = MsBetween(job.submitted, Clock::now());
    slot->stop_requested = false;
    try {
      slot->decoder->Start(job.request.prompt, job.request.options, [slot](TokenId t, std::span<const float> logits) {
        GenerationOutcome& o = slot->outcome;
        if (o.completion_tokens++ == 0) o.ttft_ms = MsBetween(slot->job->submitted, Clock::now());
        if (!slot->job->callbacks.on_token(TokenEvent{t, logits})) o.stopped_by_consumer = true;
        return !o.stopped_by_consumer;
      });
    } catch (const std::exception& e) {
      slot->outcome.error = e.what();
      slot->decoder->Stop();
    }
  }
  for (auto& slot : slots_) {
    if (slot->job == nullptr) continue;
    if (slot->stop_requested && !slot->decoder->finished()) {
      slot->outcome.cancelled = true;
      slot->decoder->Stop();
    }
    if (slot->decoder->finished()) Finish(*slot);
  }
  std::lock_guard lock(mu_);
  if (BusySlots() == 0 && queue_.empty()) {
    idle_.notify_all();
    if (stopping_) return false;
  }
  return true;
}

// The step's rows: prompt chunks first, within what the decoding slots leave
// of max_step_rows; then each decoding slot's bonus and drafts, its draft
// length weighed against everything else in the step (StepLoad).
void Scheduler::Step() {
  batch_.clear();
  batch_slots_.clear();
  int decoding = 0;
  for (auto& slot : slots_) {
    if (slot->job != nullptr && !slot->decoder->finished() && !slot->decoder->prefilling()) ++decoding;
  }
  int budget = options_.max_step_rows - decoding * options_.max_block;
  StepLoad load;
  bool prefill = false;
  for (auto& slot : slots_) {
    if (slot->job == nullptr || slot->decoder->finished() || !slot->decoder->prefilling() || budget < 1) continue;
    const SequenceRows rows = slot->decoder->Plan(budget, {});
    budget -= static_cast<int>(rows.tokens.size());
    load.rows += static_cast<int>(rows.tokens.size());
    load.tokens += slot->decoder->expected_tokens();
    prefill = true;
    batch_.push_back(rows);
    batch_slots_.push_back(slot.get());
  }
  // Each decoding slot sees the others' bonus rows as already in the step.
  load.rows += decoding - 1;
  load.tokens += decoding - 1;
  int drafts = 0;
  for (auto& slot : slots_) {
    if (slot->job == nullptr || slot->decoder->finished() || slot->decoder->prefilling()) continue;
    const SequenceRows rows = slot->decoder->Plan(options_.max_block, load);
    if (rows.tokens.empty()) continue;  // finished in planning (context full)
    drafts += static_cast<int>(rows.tokens.size()) - 1;
    batch_.push_back(rows);
    batch_slots_.push_back(slot.get());
  }
  if (batch_.empty()) return;

  const auto t0 = Clock::now();
  int rows = 0;
  for (const SequenceRows& r : batch_) rows += static_cast<int>(r.tokens.size());
  try {
    RunForward(*workspace_, batch_);
  } catch (const std::exception& e) {
    // Only a bug can get here (every row was checked when planned): fail
    // the step's requests, keep serving.
    for (Slot* slot : batch_slots_) {
      slot->outcome.error = e.what();
      slot->context->Trim(slot->context->n_past() - slot->context->n_committed());
      slot->decoder->Stop();
    }
    return;
  }
  const double ms = MsBetween(t0, Clock::now());
  if (!prefill) cost_.Observe(rows - 1, ms);
  for (Slot* slot : batch_slots_) slot->decoder->Apply(ms);

  std::lock_guard lock(mu_);
  ++metrics_.steps;
  metrics_.rows += rows;
  metrics_.busy_seconds += ms / 1000;
  if (decoding > 0) {
    double& d = metrics_.drafts_by_concurrency[decoding - 1];
    d = 0.9 * d + 0.1 * (double(drafts) / decoding);
  }
}

void Scheduler::Finish(Slot& slot) {
  std::unique_ptr<Pending> job = std::move(slot.job);
  GenerationOutcome& o = slot.outcome;
  const SpecStats& stats = slot.decoder->stats();
  o.stop = slot.decoder->result().stop;
  o.steps = stats.steps;
  o.drafted = stats.drafted;
  o.accepted = stats.accepted;
  o.total_ms = MsBetween(job->submitted, Clock::now());
  {
    // A consumer that stopped taking tokens because its Cancel() is under
    // way (a client gone: CompletionJob::Cancel calls Cancel() first) cancelled it.
    std::lock_guard lock(mu_);
    if (o.stopped_by_consumer && std::find(cancelled_.begin(), cancelled_.end(), job->id) != cancelled_.end()) {
      o.cancelled = true;
    }
  }
  job->callbacks.on_done(o);
  std::lock_guard lock(mu_);
  metrics_.slots_busy = BusySlots();
  ++(!o.error.empty() ? metrics_.requests_failed : o.cancelled ? metrics_.requests_cancelled : metrics_.requests_done);
  metrics_.prompt_tokens += o.prompt_tokens;
  metrics_.completion_tokens += o.completion_tokens;
  metrics_.drafted += o.drafted;
  metrics_.accepted += o.accepted;
}

}  // namespace kakeya
