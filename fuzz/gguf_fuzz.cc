// libFuzzer target for the GGUF reader: any input must parse or throw
// kakeya::Error, and everything a parsed file hands out must lie inside the
// input. Run with scripts/fuzz.sh gguf.
#include <cstddef>
#include <cstdint>
#include <cstdlib>

#include "base/error.h"
#include "gguf/gguf.h"
#include "gguf/gguf_format.h"

namespace {

using kakeya::GgufFile;
using kakeya::GgufType;
using kakeya::GgufValue;

// Aborts (a crash libFuzzer reports) unless [p, p + n) lies inside the input.
void CheckInside(const void* p, uint64_t n, const uint8_t* data, size_t size) {
  const auto* b = static_cast<const uint8_t*>(p);
  if (n == 0) return;
  if (b < data || b > data + size || n > static_cast<uint64_t>(data + size - b)) std::abort();
}

// Typed getters may refuse a value (Error), but must not do anything else.
template <typename Fn>
void Try(Fn fn) {
  try {
    fn();
  } catch (const kakeya::Error&) {
  }
}

uint64_t WalkValue(const GgufFile& f, const std::string& key, const GgufValue& v,
                   const uint8_t* data, size_t size) {
  uint64_t sum = 0;
  CheckInside(v.str.data(), v.str.size(), data, size);
  for (const char c : v.str) sum += static_cast<uint8_t>(c);
  for (const std::string_view s : v.strings) {
    CheckInside(s.data(), s.size(), data, size);
    if (!s.empty()) sum += static_cast<uint8_t>(s.front()) + static_cast<uint8_t>(s.back());
  }
  if (v.type == GgufType::kArray && v.elem_type != GgufType::kString && v.count > 0) {
    CheckInside(v.array_data, v.count * kakeya::gguf_format::PackedBytes(v.elem_type), data, size);
    sum += v.array_data[0] + v.array_data[v.count - 1];
  }
  Try([&] { sum += f.GetU32(key); });
  Try([&] { sum += static_cast<uint64_t>(f.GetI64(key)); });
  Try([&] { sum += static_cast<uint64_t>(f.GetF32(key) != 0); });
  Try([&] { sum += f.GetBool(key); });
  Try([&] { sum += f.GetString(key).size(); });
  Try([&] { sum += f.GetStringArray(key).size(); });
  Try([&] { sum += f.GetF32Array(key).size(); });
  Try([&] { sum += f.GetIntArray(key).size(); });
  return sum;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    const auto f = GgufFile::FromMemory(data, size, "fuzz.gguf");
    uint64_t sum = 0;
    for (const kakeya::GgufKv& kv : f->metadata()) {
      if (f->Find(kv.key) != &kv.value) std::abort();
      sum += WalkValue(*f, kv.key, kv.value, data, size);
    }
    for (const kakeya::GgufTensor& t : f->tensors()) {
      if (f->FindTensor(t.name) != &t || t.offset % f->alignment() != 0) std::abort();
      CheckInside(t.data, t.nbytes, data, size);
      for (uint64_t b = 0; b < t.nbytes; ++b) sum += t.data[b];
    }
    // Keep the reads from being optimized away.
    volatile uint64_t sink = sum;
    (void)sink;
  } catch (const kakeya::Error&) {
  }
  return 0;
}
