// -ctk / -ctv (--cache-type-k / --cache-type-v): how the KV cache stores keys
// and values, llama.cpp's flags and names plus kakeya's codec (ADR 0013).
// Shared by run, chat, serve, perplexity and the benches.
#pragma once

#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "kernels/cpu/kv_types.h"

namespace kakeya::cli {

struct CacheTypeFlags {
  KvType k = KvType::kF32;
  KvType v = KvType::kF32;
};

void AddCacheTypeFlags(CLI::App& app, CacheTypeFlags& f);

// An item of --cache-types (bench depth, bench recall): "K" or "K/V" as
// -ctk/-ctv take them; name is "K/V". Throws Error naming `flag` and the item.
struct CacheTypes {
  KvType k, v;
  std::string name;
};
CacheTypes ParseCacheTypes(const std::string& item, const char* flag);

// llama.cpp spells the flags -ctk and -ctv, which CLI11 cannot name (one
// dash takes one letter): main() rewrites them to the long names first.
std::vector<std::string> WithLongCacheFlags(int argc, char** argv);

}  // namespace kakeya::cli
