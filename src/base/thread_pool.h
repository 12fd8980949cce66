// A persistent pool of worker threads. Threads are created once; Run() hands
// them a task range without allocating or creating threads, so it can sit in
// the decode hot loop (docs/design.md, invariant 4).
//
// Results must not depend on the number of threads: callers split work along
// independent outputs (matrix columns, heads, rows), never along a reduction.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>
#include <vector>

namespace kakeya {

class ThreadPool {
 public:
  // n_threads >= 1 counts the calling thread: n_threads - 1 workers are started.
  explicit ThreadPool(int n_threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return n_threads_; }

  // Calls fn(task, thread) for every task in [0, n_tasks), spread over the
  // threads (the caller included); returns when all are done. Tasks are handed
  // out dynamically, so which thread runs a task varies: fn must not let its
  // result depend on `thread` except for choosing private scratch space.
  // The caller waits only for tasks that a worker has taken: a worker that
  // has not woken up yet (descheduled on a busy machine) is not waited for.
  template <typename Fn>
  void Run(int64_t n_tasks, Fn&& fn) {
    if (n_tasks <= 0) return;
    if (n_threads_ == 1 || n_tasks == 1) {
      for (int64_t t = 0; t < n_tasks; ++t) fn(t, 0);
      return;
    }
    RunErased(n_tasks, &fn, [](void* ctx, int64_t task, int thread) {
      (*static_cast<Fn*>(ctx))(task, thread);
    });
  }

 private:
  using TaskFn = void (*)(void* ctx, int64_t task, int thread);
  void RunErased(int64_t n_tasks, void* ctx, TaskFn fn);
  void WorkerLoop(int thread);
  void Drain(uint32_t run, int thread);

  int n_threads_;
  std::vector<std::thread> workers_;

  // The current run; ctx_ and fn_ are written by the caller before it
  // publishes the run in next_, and read by a thread only after it has taken
  // one of the run's tasks, so they never change under a running task.
  void* ctx_ = nullptr;
  TaskFn fn_ = nullptr;
  std::atomic<int64_t> n_tasks_{0};
  // (run id << 32) | next task index: taking a task is a compare-exchange
  // on both, so a late worker cannot take a task of a run it did not see
  // start (RunErased closes the word before it sets up the next run).
  std::atomic<uint64_t> next_{0};
  std::atomic<int64_t> done_{0};  // tasks of the current run finished
  std::atomic<uint64_t> generation_{0};  // the current run id; bumps wake the workers
  std::atomic<bool> stop_{false};

  // Workers spin briefly on generation_ and then sleep here.
  std::mutex mutex_;
  std::condition_variable wake_;
};

}  // namespace kakeya
