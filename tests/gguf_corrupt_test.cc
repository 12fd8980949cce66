// Broken and hostile GGUF files: each must be rejected with kakeya::Error naming
// the field and byte offset (docs/design.md, invariant 5) -- never a crash, never
// std::bad_alloc, never another exception type.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <typeinfo>
#include <vector>

#include "base/error.h"
#include "gguf/gguf.h"

namespace kakeya {
namespace {

constexpr uint32_t kU32 = 4;
constexpr uint32_t kString = 8;
constexpr uint32_t kArray = 9;
constexpr uint32_t kU64 = 10;
constexpr uint32_t kF32Type = 0;  // ggml type ids
constexpr uint32_t kQ4_0Type = 2;

// Builds GGUF bytes field by field, so tests can write what GgufWriter refuses to.
class Raw {
 public:
  Raw& U8(uint8_t v) { return Put(v); }
  Raw& U32(uint32_t v) { return Put(v); }
  Raw& U64(uint64_t v) { return Put(v); }
  Raw& I64(int64_t v) { return Put(v); }
  Raw& Str(std::string_view s) {
    U64(s.size());
    bytes.insert(bytes.end(), s.begin(), s.end());
    return *this;
  }
  Raw& Header(int64_t n_tensors, int64_t n_kv, uint32_t version = 3) {
    bytes.insert(bytes.end(), {'G', 'G', 'U', 'F'});
    return U32(version).I64(n_tensors).I64(n_kv);
  }
  Raw& KvU32(std::string_view key, uint32_t v) { return Str(key).U32(kU32).U32(v); }
  Raw& KvStr(std::string_view key, std::string_view v) { return Str(key).U32(kString).Str(v); }
  Raw& TensorInfo(std::string_view name, const std::vector<int64_t>& ne, uint32_t type,
                  uint64_t offset) {
    Str(name).U32(static_cast<uint32_t>(ne.size()));
    for (const int64_t n : ne) I64(n);
    return U32(type).U64(offset);
  }
  // Pads to `alignment` and appends `n` data bytes.
  Raw& Data(size_t n, size_t alignment = 32) {
    bytes.resize((bytes.size() + alignment - 1) / alignment * alignment + n, 0);
    return *this;
  }

  std::vector<uint8_t> bytes;

 private:
  template <typename T>
  Raw& Put(T v) {
    const auto* p = reinterpret_cast<const uint8_t*>(&v);
    bytes.insert(bytes.end(), p, p + sizeof(T));
    return *this;
  }
};

// Reads every metadata value and tensor byte, so ASan sees any bad pointer.
uint64_t Walk(const GgufFile& f) {
  uint64_t sum = 0;
  for (const GgufKv& kv : f.metadata()) {
    sum += kv.key.size() + kv.value.str.size();
    for (const std::string_view s : kv.value.strings) sum += s.empty() ? 0 : uint8_t(s.back());
    if (kv.value.array_data != nullptr && kv.value.count > 0) sum += kv.value.array_data[0];
  }
  for (const GgufTensor& t : f.tensors()) {
    for (uint64_t b = 0; b < t.nbytes; ++b) sum += t.data[b];
  }
  return sum;
}

// Parses a private copy of exactly `size` bytes (so ASan flags any over-read).
// Returns "" when the file parses, the Error message when it is rejected, and
// records a test failure for any other outcome.
std::string TryParse(const uint8_t* data, size_t size) {
  const std::vector<uint8_t> copy(data, data + size);
  try {
    const auto f = GgufFile::FromMemory(copy.data(), copy.size(), "bad.gguf");
    Walk(*f);
    return "";
  } catch (const Error& e) {
    return e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << "threw " << typeid(e).name() << " instead of kakeya::Error: " << e.what();
  }
  return "(wrong exception)";
}

// The file must be rejected with a message that names the file, a byte offset
// and contains every one of `needles`.
void ExpectRejected(const std::vector<uint8_t>& bytes, std::initializer_list<std::string> needles) {
  const std::string message = TryParse(bytes.data(), bytes.size());
  ASSERT_FALSE(message.empty()) << "accepted a corrupt file; expected an error with '"
                                << *needles.begin() << "'";
  EXPECT_EQ(message.rfind("bad.gguf: ", 0), 0u) << message;
  EXPECT_NE(message.find(" at byte "), std::string::npos) << message;
  for (const std::string& needle : needles) {
    EXPECT_NE(message.find(needle), std::string::npos) << "'" << needle << "' not in: " << message;
  }
}

void ExpectAccepted(const std::vector<uint8_t>& bytes) {
  EXPECT_EQ(TryParse(bytes.data(), bytes.size()), "");
}

// A valid file with every kind of metadata and three tensors of different types.
std::vector<uint8_t> ValidFile() {
  GgufWriter w;
  w.SetString("general.architecture", "llama");
  w.SetU32("llama.block_count", 1);
  w.SetF32("llama.rope.freq_base", 10000.0f);
  w.SetBool("tokenizer.ggml.add_bos_token", true);
  w.SetStringArray("tokenizer.ggml.tokens", {"<unk>", "", "a", "bc"});
  w.SetF32Array("tokenizer.ggml.scores", {0, -1, -2, -3});
  w.SetI32Array("tokenizer.ggml.token_type", {2, 3, 1, 1});
  std::vector<uint8_t> data(4096);
  for (size_t k = 0; k < data.size(); ++k) data[k] = static_cast<uint8_t>(k * 7);
  w.AddTensor("token_embd.weight", DType::kF32, {8, 4}, data.data(), 128);
  w.AddTensor("blk.0.attn_q.weight", DType::kQ8_0, {32, 3}, data.data(), 102);
  w.AddTensor("output_norm.weight", DType::kF16, {8}, data.data(), 16);
  return w.Serialize();
}

// --- Truncation ---

TEST(GgufCorrupt, TruncatedAnywhere) {
  const std::vector<uint8_t> full = ValidFile();
  const auto f = GgufFile::FromMemory(full.data(), full.size(), "full.gguf");
  const GgufTensor& last = f->tensors().back();
  const uint64_t data_end = f->data_offset() + last.offset + last.nbytes;
  int rejected = 0;
  for (size_t cut = 0; cut < full.size(); ++cut) {
    // Every byte of the header, metadata and tensor infos; a sample of the data.
    if (cut > f->data_offset() && cut % 7 != 0) continue;
    SCOPED_TRACE("truncated to " + std::to_string(cut) + " bytes");
    const std::string message = TryParse(full.data(), cut);
    if (cut >= data_end) {
      EXPECT_EQ(message, "");  // only the last tensor's padding is missing
      continue;
    }
    ASSERT_NE(message, "") << "accepted";
    EXPECT_NE(message.find(" at byte "), std::string::npos) << message;
    ++rejected;
  }
  EXPECT_GT(rejected, 400);
}

TEST(GgufCorrupt, TruncationMessagesNameTheField) {
  const std::vector<uint8_t> full = ValidFile();
  const uint8_t last_token[] = {2, 0, 0, 0, 0, 0, 0, 0, 'b', 'c'};
  const size_t last_token_at =
      std::search(full.begin(), full.end(), std::begin(last_token), std::end(last_token)) -
      full.begin();
  const std::vector<uint8_t> in_tokens(full.begin(), full.begin() + last_token_at + 9);
  ExpectRejected(in_tokens, {"metadata 4 ('tokenizer.ggml.tokens') array element 3 at byte " +
                                 std::to_string(last_token_at),
                             "length 2 runs past the end"});
  const std::vector<uint8_t> in_version(full.begin(), full.begin() + 6);
  ExpectRejected(in_version, {"version at byte 4"});
  const auto f = GgufFile::FromMemory(full.data(), full.size(), "full.gguf");
  const std::vector<uint8_t> in_data(full.begin(), full.begin() + f->data_offset() + 10);
  ExpectRejected(in_data, {"tensor info 0 ('token_embd.weight')", "runs past the end of the file"});
}

// --- Header ---

TEST(GgufCorrupt, BadMagic) {
  std::vector<uint8_t> bytes = ValidFile();
  bytes[3] = 'L';
  ExpectRejected(bytes, {"magic at byte 0", "not a GGUF file"});
  ExpectRejected({}, {"magic at byte 0"});
  ExpectRejected({'G', 'G', 'U'}, {"magic at byte 0"});
}

TEST(GgufCorrupt, UnsupportedVersions) {
  ExpectRejected(Raw().Header(0, 0, 0).bytes, {"version at byte 4", "unsupported GGUF version 0"});
  ExpectRejected(Raw().Header(0, 0, 1).bytes, {"version at byte 4", "v1"});
  ExpectRejected(Raw().Header(0, 0, 4).bytes, {"version at byte 4", "version 4"});
  ExpectRejected(Raw().Header(0, 0, 0x03000000).bytes, {"version at byte 4", "big-endian"});
  ExpectRejected(Raw().Header(0, 0, 0x02000000).bytes, {"big-endian"});
  ExpectAccepted(Raw().Header(0, 0, 2).bytes);
  ExpectAccepted(Raw().Header(0, 0, 3).bytes);
}

TEST(GgufCorrupt, ImpossibleCounts) {
  const int64_t huge = int64_t{1} << 62;
  ExpectRejected(Raw().Header(huge, 0).bytes, {"n_tensors at byte 8", "cannot fit"});
  ExpectRejected(Raw().Header(0, huge).bytes, {"n_kv at byte 16", "cannot fit"});
  ExpectRejected(Raw().Header(-1, 0).bytes, {"n_tensors at byte 8", "negative"});
  ExpectRejected(Raw().Header(0, std::numeric_limits<int64_t>::min()).bytes, {"n_kv", "negative"});
  // Plausible against the whole file, impossible after the metadata has used it up.
  Raw r;
  r.Header(3, 1).KvStr("k", std::string(100, 'v'));
  ExpectRejected(r.bytes, {"n_tensors", "cannot fit"});
}

// --- Metadata ---

TEST(GgufCorrupt, HugeStringLengths) {
  ExpectRejected(Raw().Header(0, 1).U64(uint64_t{1} << 62).U32(kU32).bytes,
                 {"metadata 0 key at byte 24", "exceeds the limit"});
  ExpectRejected(Raw().Header(0, 1).U64(1000).U32(kU32).U32(1).bytes,
                 {"metadata 0 key at byte 24", "runs past the end"});
  ExpectRejected(Raw().Header(0, 1).Str("k").U32(kString).U64(~uint64_t{0}).bytes,
                 {"metadata 0 ('k') value at byte 37", "exceeds the limit"});
  ExpectRejected(Raw().Header(0, 1).Str("k").U32(kString).U64(20).Str("short").bytes,
                 {"metadata 0 ('k') value", "runs past the end"});
}

TEST(GgufCorrupt, HugeArrayCounts) {
  ExpectRejected(Raw().Header(0, 1).Str("a").U32(kArray).U32(kU32).U64(uint64_t{1} << 62).bytes,
                 {"metadata 0 ('a') array count at byte 41", "run past the end"});
  // count * 8 wraps to 0 in 64 bits; the check must not multiply.
  ExpectRejected(Raw().Header(0, 1).Str("a").U32(kArray).U32(kU64).U64(uint64_t{1} << 61).bytes,
                 {"array count", "run past the end"});
  ExpectRejected(
      Raw().Header(0, 1).Str("a").U32(kArray).U32(kString).U64(uint64_t{1} << 61).U64(0).bytes,
      {"metadata 0 ('a') array count", "cannot fit"});
  ExpectRejected(
      Raw().Header(0, 1).Str("a").U32(kArray).U32(kString).U64(3).Str("xxxxxxxx").Str("y").bytes,
      {"array element 2", "file ends"});
  ExpectRejected(
      Raw().Header(0, 1).Str("a").U32(kArray).U32(kString).U64(2).Str("x").U64(1 << 30).bytes,
      {"array element 1", "runs past the end"});
}

TEST(GgufCorrupt, NestedArray) {
  ExpectRejected(
      Raw().Header(0, 1).Str("a").U32(kArray).U32(kArray).U64(1).U32(kU32).U64(1).U32(5).bytes,
      {"metadata 0 ('a') array element type at byte 37", "nested arrays"});
}

TEST(GgufCorrupt, UnknownValueTypes) {
  ExpectRejected(Raw().Header(0, 1).Str("k").U32(13).U32(0).bytes,
                 {"metadata 0 ('k') value type at byte 33", "unknown GGUF value type 13"});
  ExpectRejected(Raw().Header(0, 1).Str("k").U32(0xFFFFFFFF).U32(0).bytes,
                 {"value type", "unknown"});
  ExpectRejected(Raw().Header(0, 1).Str("k").U32(kArray).U32(99).U64(0).bytes,
                 {"array element type", "unknown GGUF value type 99"});
}

TEST(GgufCorrupt, DuplicateAndEmptyKeys) {
  ExpectRejected(Raw().Header(0, 2).KvU32("a.b", 1).KvU32("a.b", 2).bytes,
                 {"metadata 1 ('a.b') key at byte 43", "duplicate key (first at byte 24)"});
  ExpectRejected(Raw().Header(0, 1).KvU32("", 1).bytes, {"metadata 0 key at byte 24", "empty key"});
}

TEST(GgufCorrupt, NamesInMessagesAreEscapedAndCut) {
  // A NUL would end the message early; raw control bytes would garble a terminal.
  const std::string key("a\0b\n", 4);
  ExpectRejected(Raw().Header(0, 2).KvU32(key, 1).KvU32(key, 2).bytes,
                 {"metadata 1 ('a\\x00b\\x0a') key", "duplicate key"});
  const std::string long_key(5000, 'k');
  const std::vector<uint8_t> bytes = Raw().Header(0, 2).KvU32(long_key, 1).KvU32(long_key, 2).bytes;
  const std::string message = TryParse(bytes.data(), bytes.size());
  EXPECT_NE(message.find("k'... (5000 bytes)"), std::string::npos) << message;
  EXPECT_LT(message.size(), 300u);
}

TEST(GgufCorrupt, BadAlignment) {
  for (const uint32_t alignment : {0u, 3u, 48u, 0x80000001u}) {
    SCOPED_TRACE(alignment);
    ExpectRejected(Raw().Header(0, 1).KvU32("general.alignment", alignment).bytes,
                   {"metadata 0 ('general.alignment') at byte 24", "power of two"});
  }
  ExpectRejected(Raw().Header(0, 1).Str("general.alignment").U32(kU64).U64(32).bytes,
                 {"'general.alignment'", "must be UINT32, found UINT64"});
  ExpectRejected(Raw().Header(0, 1).KvStr("general.alignment", "32").bytes,
                 {"'general.alignment'", "must be UINT32, found STRING"});
  ExpectAccepted(Raw().Header(0, 1).KvU32("general.alignment", 1).bytes);
}

TEST(GgufCorrupt, AnyNonzeroBoolIsTrue) {
  // llama.cpp reads bools as "!= 0"; so do we, rather than rejecting the file.
  const std::vector<uint8_t> bytes = Raw().Header(0, 1).Str("b").U32(7).U8(2).bytes;
  const auto f = GgufFile::FromMemory(bytes.data(), bytes.size(), "bool.gguf");
  EXPECT_TRUE(f->GetBool("b"));
}

// --- Tensor infos ---

// A file with one tensor info and enough data for a 4-element F32 tensor.
std::vector<uint8_t> OneTensor(std::string_view name, const std::vector<int64_t>& ne, uint32_t type,
                               uint64_t offset = 0, size_t data_bytes = 64) {
  return Raw().Header(1, 0).TensorInfo(name, ne, type, offset).Data(data_bytes).bytes;
}

TEST(GgufCorrupt, UnknownTensorTypes) {
  for (const uint32_t type : {4u, 5u, 31u, 43u, 99u, 0xFFFFFFFFu}) {
    SCOPED_TRACE(type);
    ExpectRejected(OneTensor("t", {4}, type),
                   {"tensor info 0 ('t') type at byte 45", "unknown ggml type id"});
  }
}

TEST(GgufCorrupt, BadDimensionCounts) {
  ExpectRejected(OneTensor("t", {}, kF32Type), {"tensor info 0 ('t') n_dims at byte 33", "0 dim"});
  ExpectRejected(OneTensor("t", {1, 1, 1, 1, 1}, kF32Type), {"n_dims at byte 33", "5 dim"});
  ExpectRejected(Raw().Header(1, 0).Str("t").U32(0xFFFFFFFF).Data(64).bytes, {"n_dims"});
}

TEST(GgufCorrupt, NegativeDimension) {
  ExpectRejected(OneTensor("t", {4, -1}, kF32Type),
                 {"tensor info 0 ('t') ne 1 at byte 45", "negative dimension -1"});
}

TEST(GgufCorrupt, SizeOverflow) {
  const int64_t big = int64_t{1} << 32;
  ExpectRejected(OneTensor("t", {big, big}, kF32Type), {"ne at byte 37", "overflows"});
  ExpectRejected(OneTensor("t", {1, big, big, big}, kF32Type), {"element count", "overflows"});
  // 2^62 elements fit in int64, but not their 2^64 bytes.
  const int64_t half = int64_t{1} << 31;
  ExpectRejected(OneTensor("t", {half, half}, kF32Type), {"byte size", "overflows"});
}

TEST(GgufCorrupt, RowNotAMultipleOfTheBlock) {
  ExpectRejected(OneTensor("t", {48}, kQ4_0Type), {"tensor info 0 ('t') ne 0 at byte 37",
                                                   "not a multiple of the Q4_0 block size 32"});
}

TEST(GgufCorrupt, MisalignedOffset) {
  ExpectRejected(OneTensor("t", {4}, kF32Type, 4),
                 {"tensor info 0 ('t') offset at byte 49", "not a multiple of the alignment 32"});
}

TEST(GgufCorrupt, DataOutsideTheFile) {
  ExpectRejected(OneTensor("t", {4}, kF32Type, 1 << 20),
                 {"tensor info 0 ('t') at byte 24", "runs past the end of the file"});
  ExpectRejected(OneTensor("t", {4}, kF32Type, ~uint64_t{31}), {"tensor info 0", "overflows"});
  ExpectRejected(OneTensor("t", {1000}, kF32Type),
                 {"tensor info 0 ('t') at byte 24", "data [64, 4064) runs past the end"});
  // A second tensor whose data runs past the end; the first one is fine.
  ExpectRejected(Raw()
                     .Header(2, 0)
                     .TensorInfo("a", {4}, kF32Type, 0)
                     .TensorInfo("b", {16}, kF32Type, 32)
                     .Data(64)
                     .bytes,
                 {"tensor info 1 ('b')", "runs past the end"});
}

TEST(GgufCorrupt, TensorNames) {
  ExpectRejected(OneTensor(std::string(64, 'n'), {4}, kF32Type),
                 {"tensor info 0 name at byte 24", "length 64 exceeds the limit of 63 bytes"});
  ExpectRejected(OneTensor(std::string(1000000, 'n'), {4}, kF32Type),
                 {"name", "length 1000000 exceeds"});
  ExpectAccepted(OneTensor(std::string(63, 'n'), {4}, kF32Type));
  ExpectRejected(Raw()
                     .Header(2, 0)
                     .TensorInfo("w", {4}, kF32Type, 0)
                     .TensorInfo("w", {4}, kF32Type, 32)
                     .Data(64)
                     .bytes,
                 {"tensor info 1 ('w') name at byte 57", "duplicate tensor name"});
}

TEST(GgufCorrupt, LenientWhereLlamaCppIsLenient) {
  // Offsets need not be sequential: the reader only requires alignment and bounds.
  ExpectAccepted(Raw()
                     .Header(2, 0)
                     .TensorInfo("a", {4}, kF32Type, 32)
                     .TensorInfo("b", {4}, kF32Type, 0)
                     .Data(64)
                     .bytes);
  // A zero-element tensor has no data to check beyond its offset.
  ExpectAccepted(OneTensor("t", {0, 5}, kF32Type));
  // The last tensor's padding may be missing.
  ExpectAccepted(OneTensor("t", {4}, kF32Type, 0, 16));
}

// --- Random mutations ---

TEST(GgufCorrupt, RandomByteFlips) {
  const std::vector<uint8_t> valid = ValidFile();
  const auto f = GgufFile::FromMemory(valid.data(), valid.size(), "valid.gguf");
  const size_t header_end = f->data_offset();
  std::mt19937_64 rng(20261123);
  int parsed = 0;
  int rejected = 0;
  constexpr int kMutations = 5000;
  for (int m = 0; m < kMutations; ++m) {
    std::vector<uint8_t> bytes = valid;
    const int flips = 1 + static_cast<int>(rng() % 4);
    for (int k = 0; k < flips; ++k) {
      // Mostly the structured part, where bytes mean something to the parser.
      const size_t limit = rng() % 8 == 0 ? bytes.size() : header_end;
      const size_t pos = rng() % limit;
      switch (rng() % 3) {
        case 0: bytes[pos] ^= static_cast<uint8_t>(1u << (rng() % 8)); break;
        case 1: bytes[pos] = static_cast<uint8_t>(rng()); break;
        default: bytes[pos] = (rng() % 2) ? 0xFF : 0x00; break;
      }
    }
    if (rng() % 10 == 0) bytes.resize(rng() % bytes.size());
    SCOPED_TRACE("mutation " + std::to_string(m));
    const std::string message = TryParse(bytes.data(), bytes.size());
    if (message.empty()) {
      ++parsed;
    } else {
      EXPECT_NE(message.find(" at byte "), std::string::npos) << message;
      ++rejected;
    }
  }
  EXPECT_EQ(parsed + rejected, kMutations);
  EXPECT_GT(rejected, kMutations / 4);
  RecordProperty("parsed", parsed);
  RecordProperty("rejected", rejected);
}

}  // namespace
}  // namespace kakeya
