#include "machine.h"

#include <sys/resource.h>
#if defined(__APPLE__)
#include <sys/sysctl.h>
#endif

#include <fstream>
#include <sstream>

namespace kakeya::cli {

namespace {

// The value of the first /proc/cpuinfo line whose key is name ("key\t: value").
std::string CpuInfoField(const std::string& name) {
  std::ifstream in("/proc/cpuinfo");
  for (std::string line; std::getline(in, line);) {
    const size_t colon = line.find(':');
    if (colon == std::string::npos) continue;
    std::string key = line.substr(0, colon);
    key.erase(key.find_last_not_of(" \t") + 1);  // npos + 1 = 0: all blanks
    if (key != name) continue;
    const size_t start = line.find_first_not_of(" \t", colon + 1);
    return start == std::string::npos ? "" : line.substr(start);
  }
  return "";
}

#if defined(__APPLE__)
std::string SysctlString(const char* name) {
  char value[256] = {};
  size_t size = sizeof value - 1;
  return sysctlbyname(name, value, &size, nullptr, 0) == 0 ? std::string(value) : "";
}
bool SysctlFlag(const char* name) {
  int value = 0;
  size_t size = sizeof value;
  return sysctlbyname(name, &value, &size, nullptr, 0) == 0 && value != 0;
}
#endif

}  // namespace

std::string CpuModel() {
#if defined(__APPLE__)
  if (std::string brand = SysctlString("machdep.cpu.brand_string"); !brand.empty()) return brand;
#endif
  if (std::string model = CpuInfoField("model name"); !model.empty()) {
    // A virtual machine may name only the brand ("AMD EPYC"); the family
    // and model numbers still tell the core apart (AMD family 23 is Zen 1
    // and 2, with half-width AVX2 units; 25 is Zen 3 and 4; 26 Zen 5), and
    // speed figures mean little without them.
    const std::string family = CpuInfoField("cpu family"), number = CpuInfoField("model");
    if (!family.empty() && !number.empty()) model += " (family " + family + " model " + number + ")";
    return model;
  }
  // ARM Linux names the core only by its implementer and part numbers.
  if (std::string part = CpuInfoField("CPU part"); !part.empty()) {
    return "ARM implementer " + CpuInfoField("CPU implementer") + " part " + part;
  }
  return "unknown";
}

std::vector<std::string> CpuFeatures() {
  std::vector<std::string> out;
#if defined(__APPLE__)
  if (SysctlFlag("hw.optional.arm.FEAT_DotProd")) out.push_back("asimddp");
  if (SysctlFlag("hw.optional.arm.FEAT_I8MM")) out.push_back("i8mm");
  return out;
#endif
  // x86 "flags", ARM "Features": the ones the kernels dispatch on.
  std::string line = CpuInfoField("flags");
  if (line.empty()) line = CpuInfoField("Features");
  std::istringstream words(line);
  for (std::string w; words >> w;) {
    if (w.rfind("avx", 0) == 0 || w == "fma" || w == "f16c" || w.rfind("amx", 0) == 0 || w == "asimddp" ||
        w == "i8mm" || w.rfind("sve", 0) == 0) {
      out.push_back(w);
    }
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
#if defined(__APPLE__)
  return static_cast<size_t>(usage.ru_maxrss);  // bytes on macOS
#else
  return static_cast<size_t>(usage.ru_maxrss) * 1024;  // Linux reports KiB
#endif
}

void ResetPeakRss() {
  std::ofstream clear("/proc/self/clear_refs");
  clear << "5";  // "5": reset the peak RSS to the current RSS (proc(5))
}

}  // namespace kakeya::cli
