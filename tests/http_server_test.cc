// HttpServer's life cycle: Stop() ends Serve() whenever it comes, also
// before the serving thread has started listening (`kakeya serve` told to
// stop by a signal that arrived during start-up, which used to hang: httplib
// ignores stop() until its listening loop runs).
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <future>
#include <memory>
#include <string>
#include <thread>

#include "model/model.h"
#include "server/chat_prompt.h"
#include "server/http_server.h"
#include "server/scheduler.h"

namespace kakeya {
namespace {

const std::string kTarget = std::string(KAKEYA_FIXTURES) + "/../../models/kakeya-pystdlib.gguf";

// Runs Serve() on a thread, calls Stop() before it or delay_ms after it
// starts, and checks that Serve() returns. A hung Serve() cannot be joined:
// the test then ends the process with a message instead of waiting for the
// timeout.
void ExpectServeEnds(bool stop_before_serve, int delay_ms) {
  const std::unique_ptr<Model> model = Model::Load(kTarget);
  Scheduler scheduler(*model, SchedulerOptions{.slots = 1, .n_ctx = 64, .n_threads = 1}, nullptr);
  const ChatPrompt chat(*model);
  HttpOptions options;
  options.port = 0;
  options.threads = 2;
  HttpServer http(*model, "m", scheduler, chat, options);
  ASSERT_GT(http.Bind(), 0);
  std::promise<void> served;
  std::future<void> done = served.get_future();
  if (stop_before_serve) http.Stop();
  std::thread server([&] {
    http.Serve();
    served.set_value();
  });
  if (!stop_before_serve) {
    std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms));
    http.Stop();
  }
  if (done.wait_for(std::chrono::seconds(20)) != std::future_status::ready) {
    std::fprintf(stderr, "Serve() did not return within 20 s of Stop() (stop_before_serve %d, delay %d ms)\n",
                 stop_before_serve, delay_ms);
    std::_Exit(1);
  }
  server.join();
}

TEST(HttpServer, StopBeforeServeKeepsServeFromListening) { ExpectServeEnds(true, 0); }

TEST(HttpServer, StopRightAfterServeStartsEndsIt) {
  for (int i = 0; i < 20; ++i) ExpectServeEnds(false, 0);
}

TEST(HttpServer, StopWhileListeningEndsServe) { ExpectServeEnds(false, 100); }

}  // namespace
}  // namespace kakeya
