#include "cache_flags.h"

#include <algorithm>
#include <map>
#include <string>

namespace kakeya::cli {

void AddCacheTypeFlags(CLI::App& app, CacheTypeFlags& f) {
  std::map<std::string, KvType> names;
  const std::string all = KvTypeNames();  // "f32, f16, ..."
  for (size_t begin = 0; begin < all.size();) {
    const size_t end = std::min(all.find(", ", begin), all.size());
    const std::string name = all.substr(begin, end - begin);
    names.emplace(name, *ParseKvType(name));
    begin = end + 2;
  }
  const std::string types =
      "f32 (the default: exact), f16, bf16, q8_0, q4_0 (llama.cpp's: every position in that type), or "
      "kakeya4 / kakeya3 (kakeya's codec, for keys and values together: the first 16 and the latest 256+ "
      "positions exact, every older one rotated and coded at 4 or 3 bits a value plus a scale per head; "
      "-ctk kakeya4 -ctv kakeya3 stores 0.23x an F16 cache's bytes beyond the exact ones)";
  app.add_option("--cache-type-k", f.k, "How the KV cache stores keys (-ctk): " + types)
      ->transform(CLI::CheckedTransformer(names))
      ->option_text("TYPE");
  app.add_option("--cache-type-v", f.v, "How the KV cache stores values (-ctv), as --cache-type-k")
      ->transform(CLI::CheckedTransformer(names))
      ->option_text("TYPE");
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
