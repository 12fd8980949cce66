// The server's engine room: N slots over one model, continuous batching.
// Requests wait in a bounded queue, take a free slot, and from then on every
// step runs one forward over the rows of all active slots (prefill chunks,
// decode rows and verify blocks together); a request joins and leaves between
// steps. Each slot decodes speculatively with its own drafter, its draft
// length chosen against the whole batch's cost (ADR 0009).
//
// Because the kernels are batch-invariant, a request's tokens do not depend
// on what else runs: a greedy request returns the same ids alone or beside
// others, and the same as `kakeya run` with the same settings.
//
// Threads: one scheduler thread runs the steps; Submit, Cancel and Metrics
// may be called from any thread. Callbacks run on the scheduler thread and
// must be quick (hand the token to the connection's own thread).
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "engine/generate.h"
#include "model/model.h"
#include "engine/limits.h"
#include "model/workspace.h"
#include "speculative/drafter.h"
#include "speculative/speculative.h"

namespace kakeya {

struct SchedulerOptions {
  int slots = 4;            // requests decoded at once
  int n_ctx = kDefaultContextSize;  // positions per slot (prompt + generated)
  int n_threads = 2;
  int max_queue = 64;       // requests waiting for a slot; more are refused
  int max_step_rows = 512;  // rows of one forward, all slots together (prefill is chunked to fit)
  int max_block = kAdaptiveMaxBlock;  // rows of one slot's verify block (1 + drafts), at most kMaxBlock
  KvType cache_type_k = KvType::kF32;  // how every slot's cache stores keys and values (ContextOptions)
  KvType cache_type_v = KvType::kF32;
};

// Builds one slot's drafter on the slot's target context (null: plain
// decoding). Called once per slot, at start-up.
using DrafterFactory = std::function<std::unique_ptr<Drafter>(Context& slot_context)>;

struct GenerationRequest {
  std::vector<TokenId> prompt;  // not empty, shorter than n_ctx
  GenerateOptions options;      // n_predict, ignore_eos, sampling (n_top is not used)
};

// One committed token and the logits row it was chosen from (valid during
// the callback only: logprobs are computed from it there).
struct TokenEvent {
  TokenId token;
  std::span<const float> logits;
};

struct GenerationOutcome {
  StopReason stop = StopReason::kLength;
  bool cancelled = false;            // Cancel() or shutdown
  bool stopped_by_consumer = false;  // on_token returned false (a stop string matched)
  std::string error;       // non-empty if the request failed (nothing else was affected)
  int prompt_tokens = 0;
  int completion_tokens = 0;
  // Speculation: verify steps, draft tokens proposed and accepted.
  int steps = 0;
  int drafted = 0;
  int accepted = 0;
  double queue_ms = 0;    // waiting for a slot
  double ttft_ms = 0;     // from Submit to the first token
  double total_ms = 0;    // from Submit to the end
  double mean_accept_len() const { return steps > 0 ? double(steps + accepted) / steps : 0.0; }
};

struct GenerationCallbacks {
  // Each committed token, in order. Return false to stop the request (the
  // client went away, or a stop string matched): its slot is free for the
  // next step.
  std::function<bool(const TokenEvent&)> on_token;
  // Exactly once, last, whatever happened.
  std::function<void(const GenerationOutcome&)> on_done;
};

// Thrown by Submit when max_queue requests already wait (HTTP 503).
struct QueueFull : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// A snapshot for /metrics (counters since start-up).
struct SchedulerMetrics {
  int slots = 0;
  int slots_busy = 0;
  int queued = 0;
  uint64_t requests_done = 0;
  uint64_t requests_cancelled = 0;
  uint64_t requests_failed = 0;
  uint64_t prompt_tokens = 0;
  uint64_t completion_tokens = 0;
  uint64_t steps = 0;            // batched forwards
  uint64_t rows = 0;             // rows over all of them
  uint64_t drafted = 0;
  uint64_t accepted = 0;
  double busy_seconds = 0;       // time spent in steps
  // The draft policy's last choice: mean drafted tokens per decoding slot in
  // the last step, by the number of slots that were decoding.
  std::vector<double> drafts_by_concurrency;  // [k - 1]: k slots decoding
};

class Scheduler {
 public:
  // Creates the slots' contexts and drafters and starts the scheduler thread.
  // Throws Error for options out of range or a drafter that does not fit.
  Scheduler(const Model& model, const SchedulerOptions& options, const DrafterFactory& make_drafter);
  // Shutdown(), then joins the thread.
  ~Scheduler();

  // Queues a request and returns its id. Throws Error for a request that
  // cannot run (empty prompt, prompt too long for n_ctx, bad sampling
  // parameters: the message names the field), QueueFull when the queue is
  // full, and Error after Shutdown().
  uint64_t Submit(GenerationRequest request, GenerationCallbacks callbacks);
  // Stops a queued or running request before the next step; on_done follows
  // with cancelled = true. Unknown or finished ids are ignored.
  void Cancel(uint64_t id);
  // Stops accepting; cancels queued requests; running ones finish unless
  // cancel_running. Returns when every request has had its on_done.
  void Shutdown(bool cancel_running = false);

  SchedulerMetrics Metrics() const;
  const SchedulerOptions& options() const { return options_; }
  const std::string& drafter_name() const { return drafter_name_; }

 private:
  struct Slot;
  struct Pending;
  void Loop();
  // Takes queued requests into free slots and stops cancelled ones; false
  // when the scheduler has stopped for good.
  bool AdmitAndCancel();
  // One forward over the rows of every active slot.
  void Step();
  void Finish(Slot& slot);
  // Slots holding a request (only the scheduler thread changes that).
  int BusySlots() const;

  const Model& model_;
  SchedulerOptions options_;
  std::string drafter_name_;
  std::unique_ptr<Workspace> workspace_;
  StepCost cost_;  // the forward's cost, shared by the slots' draft policies
  std::vector<std::unique_ptr<Slot>> slots_;
  std::vector<SequenceRows> batch_;      // reserved: one step's rows
  std::vector<Slot*> batch_slots_;       // the slot of each
  mutable std::mutex mu_;
  std::condition_variable wake_;
  std::condition_variable idle_;
  std::deque<std::unique_ptr<Pending>> queue_;
  std::vector<uint64_t> cancelled_;
  uint64_t next_id_ = 1;
  bool stopping_ = false;
  bool cancel_running_ = false;
  SchedulerMetrics metrics_;
  std::thread thread_;
};

}  // namespace kakeya
