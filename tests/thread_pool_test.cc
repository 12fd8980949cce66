#include "base/thread_pool.h"

#include <atomic>
#include <vector>

#include <gtest/gtest.h>

namespace kakeya {
namespace {

TEST(ThreadPool, RunsEveryTaskExactlyOnce) {
  for (int threads : {1, 2, 3, 8}) {
    ThreadPool pool(threads);
    for (int64_t n_tasks : {0, 1, 2, 7, 1000}) {
      std::vector<std::atomic<int>> hits(n_tasks);
      pool.Run(n_tasks, [&](int64_t task, int thread) {
        ASSERT_GE(thread, 0);
        ASSERT_LT(thread, threads);
        hits[task].fetch_add(1);
      });
      for (int64_t t = 0; t < n_tasks; ++t) EXPECT_EQ(hits[t].load(), 1) << "task " << t;
    }
  }
}

TEST(ThreadPool, ManyBackToBackRunsDoNotLoseWork) {
  ThreadPool pool(3);
  std::atomic<int64_t> sum{0};
  for (int round = 0; round < 5000; ++round) {
    pool.Run(5, [&](int64_t task, int) { sum.fetch_add(task + 1); });
  }
  EXPECT_EQ(sum.load(), 5000 * 15);
}

// More threads than cores, so workers wake late and find their run over or
// a later one started (one with more tasks: a late worker must not take a
// task past the end of its run by reading the next run's count): every task
// must still run once, in its own run, and Run must return.
TEST(ThreadPool, LateWorkersNeverRunAnotherRunsTask) {
  for (int threads : {2, 3, 8}) {
    ThreadPool pool(threads);
    std::vector<std::atomic<int>> hits(9);
    for (int round = 0; round < 100000; ++round) {
      const int n_tasks = 1 + round % 9;
      for (auto& h : hits) h.store(0);
      pool.Run(n_tasks, [&, round](int64_t task, int) {
        ASSERT_LT(task, n_tasks) << "round " << round;
        hits[task].fetch_add(1);
      });
      for (int t = 0; t < 9; ++t) ASSERT_EQ(hits[t].load(), t < n_tasks ? 1 : 0) << "round " << round << " task " << t;
    }
  }
}

TEST(ThreadPool, WorkersWakeAfterSleeping) {
  ThreadPool pool(2);
  std::atomic<int> count{0};
  pool.Run(4, [&](int64_t, int) { count.fetch_add(1); });
  std::this_thread::sleep_for(std::chrono::milliseconds(20));  // past the spin time
  pool.Run(4, [&](int64_t, int) { count.fetch_add(1); });
  EXPECT_EQ(count.load(), 8);
}

}  // namespace
}  // namespace kakeya
