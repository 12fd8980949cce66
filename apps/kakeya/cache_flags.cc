#include "cache_flags.h"

#include <string>

#include "base/error.h"

namespace kakeya::cli {

void AddCacheTypeFlags(CLI::App& app, CacheTypeFlags& f) {
  const CLI::Validator known(
      [](std::string& name) {
        return ParseKvType(name) ? std::string() : "unknown cache type '" + name + "' (one of " + KvTypeNames() + ")";
      },
      "TYPE");
  const std::string types =
      "f32 (the default: exact), f16, bf16, q8_0, q4_0 (llama.cpp's: every position in that type), or "
      "kakeya4 / kakeya3 (kakeya's codec, for keys and values together: the first 16 and the latest 256+ "
      "positions exact, every older one rotated and coded at 4 or 3 bits a value plus a scale per head; "
      "-ctk kakeya4 -ctv kakeya3 stores 0.23x an F16 cache's bytes beyond the exact ones)";
  app.add_option_function<std::string>(
         "--cache-type-k", [&f](const std::string& name) { f.k = *ParseKvType(name); },
         "How the KV cache stores keys (-ctk): " + types)
      ->check(known)
      ->option_text("TYPE");
  app.add_option_function<std::string>(
         "--cache-type-v", [&f](const std::string& name) { f.v = *ParseKvType(name); },
         "How the KV cache stores values (-ctv), as --cache-type-k")
      ->check(known)
      ->option_text("TYPE");
}

CacheTypes ParseCacheTypes(const std::string& item, const char* flag) {
  const size_t slash = item.find('/');
  const std::string k = item.substr(0, slash), v = slash == std::string::npos ? k : item.substr(slash + 1);
  for (const std::string& name : {k, v}) {
    if (!ParseKvType(name)) {
      Fail(flag, ": unknown cache type '", name, "' in '", item, "' (one of ", KvTypeNames(), ")");
    }
  }
  return {*ParseKvType(k), *ParseKvType(v), k + "/" + v};
}

std::vector<std::string> WithLongCacheFlags(int argc, char** argv) {
  std::vector<std::string> args(argv, argv + argc);
  for (std::string& a : args) {
    for (const auto& [flag, long_name] : {std::pair{"-ctk", "--cache-type-k"}, std::pair{"-ctv", "--cache-type-v"}}) {
      if (a == flag) a = long_name;
      if (a.rfind(std::string(flag) + "=", 0) == 0) a = long_name + a.substr(std::string(flag).size());
    }
  }
  return args;
}

}  // namespace kakeya::cli
