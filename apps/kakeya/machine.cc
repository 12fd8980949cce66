#include "machine.h"

#include <sys/resource.h>

#include <fstream>
#include <sstream>

namespace kakeya::cli {

std::string CpuModel() {
  std::ifstream in("/proc/cpuinfo");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("model name", 0) == 0) return line.substr(line.find(':') + 2);
  }
  return "unknown";
}

std::vector<std::string> CpuFeatures() {
  std::ifstream in("/proc/cpuinfo");
  std::vector<std::string> out;
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("flags", 0) != 0) continue;
    std::istringstream words(line.substr(line.find(':') + 1));
    for (std::string w; words >> w;) {
      if (w.rfind("avx", 0) == 0 || w == "fma" || w == "f16c" || w.rfind("amx", 0) == 0) out.push_back(w);
    }
    break;
  }
  return out;
}

size_t PeakRssBytes() {
  // VmHWM follows clear_refs; getrusage's maximum never goes down.
  std::ifstream status("/proc/self/status");
  for (std::string line; std::getline(status, line);) {
    if (line.rfind("VmHWM:", 0) == 0) return static_cast<size_t>(std::stoull(line.substr(6))) * 1024;  // kB
  }
  struct rusage usage {};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<size_t>(usage.ru_maxrss) * 1024;  // Linux reports KiB
}

void ResetPeakRss() {
  std::ofstream clear("/proc/self/clear_refs");
  clear << "5";  // "5": reset the peak RSS to the current RSS (proc(5))
}

}  // namespace kakeya::cli
