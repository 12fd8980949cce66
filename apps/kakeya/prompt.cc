#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <thread>

#include "base/error.h"
#include "commands.h"
#include "engine/limits.h"

namespace kakeya::cli {

std::string ReadPrompt(const std::string& text, const std::string& file) {
  if (!text.empty() && !file.empty()) Fail("give the prompt with -p or -f, not both");
  if (file.empty()) {
    if (text.empty()) Fail("no prompt: pass -p TEXT or -f FILE");
    return text;
  }
  return ReadTextFile(file);
}

std::string ReadTextFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) Fail("cannot read file ", path);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

namespace {
std::string ModelsDir() {
  const char* env = std::getenv("KAKEYA_MODELS_DIR");
  return env != nullptr && *env != '\0' ? env : KAKEYA_MODELS_DIR;
}
}  // namespace

std::string ShippedTargetPath() { return ModelsDir() + "/kakeya-pystdlib.gguf"; }

int ThreadsOrDefault(int threads) {
  if (threads > 0) return threads;
  const unsigned n = std::thread::hardware_concurrency();
  return n == 0 ? 1 : static_cast<int>(n);
}

int ContextSizeOrDefault(int n_ctx, int n_ctx_train) {
  if (n_ctx < 0) Fail("-c ", n_ctx, " is negative");
  return n_ctx > 0 ? n_ctx : DefaultContextSize(n_ctx_train);
}

}  // namespace kakeya::cli
