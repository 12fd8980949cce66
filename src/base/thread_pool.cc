#include "base/thread_pool.h"

#include <chrono>

#include "base/error.h"

#if defined(__x86_64__) || defined(_M_X64)
#include <immintrin.h>
#define KAKEYA_PAUSE() _mm_pause()
#elif defined(__aarch64__)
#define KAKEYA_PAUSE() asm volatile("yield")
#else
#define KAKEYA_PAUSE() \
  do {                 \
  } while (0)
#endif

namespace kakeya {
namespace {
// How long an idle worker spins before sleeping. Within a decode step Run()
// calls follow each other within microseconds, and sleeping between them
// would cost a futex wake (~5-20 us) each; between steps (sampling, drafting,
// output) and on a machine busy with other work, spinning longer only takes a
// core from someone else.
constexpr auto kSpinTime = std::chrono::microseconds(200);
}  // namespace

ThreadPool::ThreadPool(int n_threads) : n_threads_(n_threads < 1 ? 1 : n_threads) {
  workers_.reserve(n_threads_ - 1);
  for (int t = 1; t < n_threads_; ++t) workers_.emplace_back([this, t] { WorkerLoop(t); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_.store(true);
    generation_.fetch_add(1);
  }
  wake_.notify_all();
  for (auto& w : workers_) w.join();
}

// Sequentially consistent throughout: the argument that a late worker
// cannot take a task below relies on one order of next_ and n_tasks_.
void ThreadPool::Drain(uint32_t run, int thread) {
  uint64_t next = next_.load();
  for (;;) {
    const int64_t task = static_cast<int64_t>(next & 0xFFFFFFFFu);
    if ((next >> 32) != run || task >= n_tasks_.load()) return;
    if (!next_.compare_exchange_weak(next, next + 1)) continue;
    fn_(ctx_, task, thread);
    done_.fetch_add(1);
    next = next_.load();
  }
}

void ThreadPool::RunErased(int64_t n_tasks, void* ctx, TaskFn fn) {
  if (n_tasks > int64_t{0xFFFFFFFF}) Fail("ThreadPool::Run: ", n_tasks, " tasks; at most 2^32 - 1 per run");
  const uint64_t run = generation_.load(std::memory_order_relaxed) + 1;
  const uint64_t tag = (run & 0xFFFFFFFFu) << 32;
  // Close the word to the last run before changing its count: a worker that
  // read the last run's word and then this run's larger count would else take
  // a task past the last run's end (and count it in done_ of this run). Its
  // compare-exchange now fails, and index 2^32 - 1 is past any run's end.
  next_.store(tag | 0xFFFFFFFFu);
  ctx_ = ctx;
  fn_ = fn;
  n_tasks_.store(n_tasks);
  done_.store(0);
  next_.store(tag);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    generation_.store(run, std::memory_order_release);
  }
  wake_.notify_all();
  Drain(static_cast<uint32_t>(run), 0);
  // Yield now and then: with more threads than free cores (a busy machine), a
  // worker we wait for may need our core to finish.
  for (int spins = 1; done_.load() != n_tasks; ++spins) {
    KAKEYA_PAUSE();
    if ((spins & 255) == 0) std::this_thread::yield();
  }
}

void ThreadPool::WorkerLoop(int thread) {
  uint64_t seen = 0;
  for (;;) {
    const auto spin_until = std::chrono::steady_clock::now() + kSpinTime;
    int spins = 0;
    while (generation_.load(std::memory_order_acquire) == seen) {
      KAKEYA_PAUSE();
      if ((++spins & 255) != 0) continue;
      std::this_thread::yield();
      if (std::chrono::steady_clock::now() > spin_until) {
        std::unique_lock<std::mutex> lock(mutex_);
        wake_.wait(lock, [&] { return generation_.load(std::memory_order_acquire) != seen; });
        break;
      }
    }
    seen = generation_.load(std::memory_order_acquire);
    if (stop_.load()) return;
    Drain(static_cast<uint32_t>(seen), thread);
  }
}

}  // namespace kakeya
