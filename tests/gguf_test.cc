// GGUF writer -> reader round trips, typed getters and the real fixture files.
#include "gguf/gguf.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <numeric>

#include "base/error.h"

namespace kakeya {
namespace {

namespace fs = std::filesystem;

// Parses writer output; keeps the bytes alive as long as the GgufFile.
struct Parsed {
  std::vector<uint8_t> bytes;
  std::unique_ptr<GgufFile> file;
};

Parsed Parse(std::vector<uint8_t> bytes) {
  Parsed p{std::move(bytes), nullptr};
  p.file = GgufFile::FromMemory(p.bytes.data(), p.bytes.size(), "test.gguf");
  return p;
}

Parsed RoundTrip(const GgufWriter& w) { return Parse(w.Serialize()); }

template <typename T>
std::vector<uint8_t> Bytes(const std::vector<T>& v) {
  std::vector<uint8_t> out(v.size() * sizeof(T));
  if (!v.empty()) std::memcpy(out.data(), v.data(), out.size());
  return out;
}

// Runs `fn`, which must throw kakeya::Error whose message contains `needle`.
template <typename Fn>
void ExpectError(Fn fn, const std::string& needle) {
  try {
    fn();
    ADD_FAILURE() << "no error; expected one mentioning '" << needle << "'";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

TEST(GgufRoundTrip, EveryScalarType) {
  GgufWriter w;
  w.SetU8("u8", 250);
  w.SetI8("i8", -100);
  w.SetU16("u16", 65000);
  w.SetI16("i16", -32000);
  w.SetU32("u32", 4000000000u);
  w.SetI32("i32", -2000000000);
  w.SetF32("f32", 1.5f);
  w.SetBool("yes", true);
  w.SetBool("no", false);
  w.SetString("str", "héllo ▁world");
  w.SetString("empty", "");
  w.SetU64("u64", std::numeric_limits<uint64_t>::max());
  w.SetI64("i64", std::numeric_limits<int64_t>::min());
  w.SetF64("f64", 0.1);
  const Parsed p = RoundTrip(w);
  const GgufFile& f = *p.file;

  EXPECT_EQ(f.version(), 3u);
  EXPECT_EQ(f.metadata().size(), 14u);
  EXPECT_EQ(f.Find("u8")->type, GgufType::kUint8);
  EXPECT_EQ(f.Find("u8")->u, 250u);
  EXPECT_EQ(f.Find("i8")->i, -100);
  EXPECT_EQ(f.Find("u16")->u, 65000u);
  EXPECT_EQ(f.Find("i16")->i, -32000);
  EXPECT_EQ(f.GetU32("u32"), 4000000000u);
  EXPECT_EQ(f.GetI64("i32"), -2000000000);
  EXPECT_EQ(f.GetF32("f32"), 1.5f);
  EXPECT_TRUE(f.GetBool("yes"));
  EXPECT_FALSE(f.GetBool("no"));
  EXPECT_EQ(f.GetString("str"), "héllo ▁world");
  EXPECT_EQ(f.GetString("empty"), "");
  EXPECT_EQ(f.Find("u64")->type, GgufType::kUint64);
  EXPECT_EQ(f.Find("u64")->u, std::numeric_limits<uint64_t>::max());
  EXPECT_EQ(f.GetI64("i64"), std::numeric_limits<int64_t>::min());
  EXPECT_EQ(f.Find("f64")->f, 0.1);
  EXPECT_EQ(f.GetF32("f64"), 0.1f);
  // Keys keep insertion order, and each records where it starts.
  EXPECT_EQ(f.metadata()[0].key, "u8");
  EXPECT_EQ(f.metadata()[0].offset, 24u);
  EXPECT_EQ(f.metadata()[13].key, "f64");
}

TEST(GgufRoundTrip, Arrays) {
  GgufWriter w;
  w.SetStringArray("strings", {"a", "", "ccc", std::string(1000, 'x')});
  w.SetStringArray("no_strings", {});
  w.SetF32Array("floats", {1.0f, -2.5f, 1e30f});
  w.SetF32Array("no_floats", {});
  w.SetI32Array("ints", {1, -2, std::numeric_limits<int32_t>::min()});
  const std::vector<uint8_t> u8s = {0, 7, 255};
  w.SetArray("u8s", GgufType::kUint8, u8s.data(), u8s.size());
  const std::vector<int16_t> i16s = {-32768, 32767};
  w.SetArray("i16s", GgufType::kInt16, i16s.data(), i16s.size());
  const std::vector<uint64_t> u64s = {0, std::numeric_limits<uint64_t>::max()};
  w.SetArray("u64s", GgufType::kUint64, u64s.data(), u64s.size());
  const std::vector<double> f64s = {0.25, -8};
  w.SetArray("f64s", GgufType::kFloat64, f64s.data(), f64s.size());
  const std::vector<uint8_t> bools = {1, 0};
  w.SetArray("bools", GgufType::kBool, bools.data(), bools.size());
  const Parsed p = RoundTrip(w);
  const GgufFile& f = *p.file;

  using Strings = std::vector<std::string_view>;
  EXPECT_EQ(f.GetStringArray("strings"), (Strings{"a", "", "ccc", std::string(1000, 'x')}));
  EXPECT_EQ(f.GetStringArray("no_strings"), Strings{});
  EXPECT_EQ(f.GetF32Array("floats"), (std::vector<float>{1.0f, -2.5f, 1e30f}));
  EXPECT_EQ(f.GetF32Array("no_floats"), std::vector<float>{});
  EXPECT_EQ(f.GetF32Array("f64s"), (std::vector<float>{0.25f, -8.0f}));
  EXPECT_EQ(f.GetIntArray("ints"),
            (std::vector<int64_t>{1, -2, std::numeric_limits<int32_t>::min()}));
  EXPECT_EQ(f.GetIntArray("u8s"), (std::vector<int64_t>{0, 7, 255}));
  EXPECT_EQ(f.GetIntArray("i16s"), (std::vector<int64_t>{-32768, 32767}));
  ExpectError([&] { f.GetIntArray("u64s"); }, "'u64s'");  // 2^64-1 does not fit in int64

  const GgufValue* u64_array = f.Find("u64s");
  ASSERT_EQ(u64_array->type, GgufType::kArray);
  EXPECT_EQ(u64_array->elem_type, GgufType::kUint64);
  EXPECT_EQ(u64_array->count, 2u);
  EXPECT_EQ(std::memcmp(u64_array->array_data, u64s.data(), 16), 0);
  const GgufValue* bool_array = f.Find("bools");
  EXPECT_EQ(bool_array->elem_type, GgufType::kBool);
  EXPECT_EQ(bool_array->array_data[0], 1);
  EXPECT_EQ(f.Find("no_strings")->count, 0u);
}

TEST(GgufGetters, TypeChecksAndRanges) {
  GgufWriter w;
  w.SetI32("positive_i32", 7);
  w.SetI32("negative_i32", -1);
  w.SetU64("big_u64", uint64_t{1} << 40);
  w.SetU64("huge_u64", std::numeric_limits<uint64_t>::max());
  w.SetString("name", "x");
  w.SetF32("f", 2.0f);
  w.SetBool("b", true);
  w.SetI32Array("ints", {1});
  const Parsed p = RoundTrip(w);
  const GgufFile& f = *p.file;

  EXPECT_EQ(f.GetU32("positive_i32"), 7u);
  EXPECT_EQ(f.GetI64("negative_i32"), -1);
  EXPECT_EQ(f.GetI64("big_u64"), int64_t{1} << 40);
  ExpectError([&] { f.GetU32("negative_i32"); }, "'negative_i32'");
  ExpectError([&] { f.GetU32("big_u64"); }, "'big_u64'");
  ExpectError([&] { f.GetI64("huge_u64"); }, "'huge_u64'");
  ExpectError([&] { f.GetU32("name"); }, "'name' has type STRING");
  ExpectError([&] { f.GetU32("b"); }, "'b' has type BOOL");
  ExpectError([&] { f.GetString("f"); }, "'f' has type FLOAT32");
  ExpectError([&] { f.GetF32("positive_i32"); }, "'positive_i32'");
  ExpectError([&] { f.GetBool("positive_i32"); }, "'positive_i32'");
  ExpectError([&] { f.GetString("missing.key"); }, "'missing.key' is missing");
  ExpectError([&] { f.GetU32("missing.key"); }, "'missing.key' is missing");
  ExpectError([&] { f.GetStringArray("ints"); }, "'ints' has type ARRAY of INT32");
  ExpectError([&] { f.GetF32Array("ints"); }, "'ints'");
  ExpectError([&] { f.GetIntArray("name"); }, "'name'");

  EXPECT_EQ(f.FindString("missing"), std::nullopt);
  EXPECT_EQ(f.FindU32("missing"), std::nullopt);
  EXPECT_EQ(f.FindF32("missing"), std::nullopt);
  EXPECT_EQ(f.FindBool("missing"), std::nullopt);
  EXPECT_EQ(f.Find("missing"), nullptr);
  EXPECT_EQ(f.FindString("name"), "x");
  EXPECT_EQ(f.FindU32("positive_i32"), 7u);
  EXPECT_EQ(f.FindF32("f"), 2.0f);
  EXPECT_EQ(f.FindBool("b"), true);
  ExpectError([&] { f.FindU32("name"); }, "'name'");
  ExpectError([&] { f.FindString("b"); }, "'b'");
  ExpectError([&] { f.FindBool("f"); }, "'f'");
  ExpectError([&] { f.FindF32("name"); }, "'name'");
}

TEST(GgufWriter, SettingAKeyAgainReplacesIt) {
  GgufWriter w;
  w.SetU32("a", 1);
  w.SetString("b", "x");
  w.SetString("a", "now a string");
  const Parsed p = RoundTrip(w);
  ASSERT_EQ(p.file->metadata().size(), 2u);
  EXPECT_EQ(p.file->metadata()[0].key, "a");
  EXPECT_EQ(p.file->GetString("a"), "now a string");
}

TEST(GgufRoundTrip, Version2HasTheSameLayout) {
  GgufWriter w;
  w.SetString("general.architecture", "llama");
  const std::vector<float> data = {1, 2, 3, 4};
  w.AddTensor("t", DType::kF32, {4}, data.data(), 16);
  std::vector<uint8_t> bytes = w.Serialize();
  bytes[4] = 2;  // the version field
  const Parsed p = Parse(std::move(bytes));
  EXPECT_EQ(p.file->version(), 2u);
  EXPECT_EQ(p.file->GetString("general.architecture"), "llama");
  EXPECT_EQ(std::memcmp(p.file->FindTensor("t")->data, data.data(), 16), 0);
}

TEST(GgufRoundTrip, TensorData) {
  GgufWriter w;
  w.SetString("general.architecture", "test");
  std::vector<float> f32(3 * 5);
  std::iota(f32.begin(), f32.end(), 0.5f);
  std::vector<uint8_t> q8(RowBytes(DType::kQ8_0, 64) * 2);
  std::iota(q8.begin(), q8.end(), uint8_t{1});
  std::vector<uint16_t> f16(2 * 3 * 4, 0x3C00);
  std::vector<float> empty;
  w.AddTensor("a.f32", DType::kF32, {3, 5}, f32.data(), f32.size() * 4);
  w.AddTensor("b.q8", DType::kQ8_0, {64, 2}, q8.data(), q8.size());
  w.AddTensor("c.f16", DType::kF16, {2, 3, 4}, f16.data(), f16.size() * 2);
  w.AddTensor("d.empty", DType::kF32, {0, 7}, empty.data(), 0);
  const Parsed p = RoundTrip(w);
  const GgufFile& f = *p.file;

  ASSERT_EQ(f.tensors().size(), 4u);
  EXPECT_EQ(f.alignment(), 32u);
  EXPECT_EQ(f.Find("general.alignment"), nullptr);  // only written when set
  EXPECT_EQ(f.data_offset() % 32, 0u);

  const GgufTensor& a = f.tensors()[0];
  EXPECT_EQ(a.name, "a.f32");
  EXPECT_EQ(a.n_dims, 2u);
  EXPECT_EQ(a.ne[0], 3);
  EXPECT_EQ(a.ne[1], 5);
  EXPECT_EQ(a.ne[2], 1);
  EXPECT_EQ(a.elements(), 15);
  EXPECT_EQ(a.type, DType::kF32);
  EXPECT_EQ(a.nbytes, 60u);
  EXPECT_EQ(a.offset, 0u);
  EXPECT_EQ(a.data, p.bytes.data() + f.data_offset());
  EXPECT_EQ(std::memcmp(a.data, f32.data(), 60), 0);

  // Sequential offsets, each padded to the alignment, as llama.cpp requires.
  const GgufTensor* b = f.FindTensor("b.q8");
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(b->offset, 64u);
  EXPECT_EQ(b->type, DType::kQ8_0);
  EXPECT_EQ(b->nbytes, q8.size());
  EXPECT_EQ(std::memcmp(b->data, q8.data(), q8.size()), 0);
  const GgufTensor* c = f.FindTensor("c.f16");
  EXPECT_EQ(c->offset, 64u + 160u);
  EXPECT_EQ(c->n_dims, 3u);
  EXPECT_EQ(c->ne[2], 4);
  EXPECT_EQ(std::memcmp(c->data, f16.data(), 48), 0);
  const GgufTensor* d = f.FindTensor("d.empty");
  EXPECT_EQ(d->nbytes, 0u);
  EXPECT_EQ(d->elements(), 0);
  EXPECT_EQ(f.FindTensor("missing"), nullptr);
  // The padding after a tensor is zeros.
  EXPECT_EQ(p.bytes[f.data_offset() + 60], 0);
}

TEST(GgufRoundTrip, CustomAlignment) {
  GgufWriter w;
  w.set_alignment(128);
  const std::vector<float> x(5, 1.0f);
  w.AddTensor("x", DType::kF32, {5}, x.data(), 20);
  w.AddTensor("y", DType::kF32, {5}, x.data(), 20);
  const Parsed p = RoundTrip(w);
  EXPECT_EQ(p.file->alignment(), 128u);
  EXPECT_EQ(p.file->GetU32("general.alignment"), 128u);
  EXPECT_EQ(p.file->data_offset() % 128, 0u);
  EXPECT_EQ(p.file->FindTensor("y")->offset, 128u);
  EXPECT_EQ(p.bytes.size(), p.file->data_offset() + 256);
}

TEST(GgufRoundTrip, NoTensorsNoPadding) {
  GgufWriter w;
  w.SetString("k", "v");
  const Parsed p = RoundTrip(w);
  EXPECT_TRUE(p.file->tensors().empty());
  EXPECT_EQ(p.bytes.size(), 24u + 8 + 1 + 4 + 8 + 1);
}

TEST(GgufWriter, RejectsInvalidInput) {
  GgufWriter w;
  const std::vector<uint8_t> buf(4096);
  ExpectError([&] { w.AddTensor("t", DType::kF32, {4, 2}, buf.data(), 31); }, "needs 32");
  ExpectError([&] { w.AddTensor("t", DType::kQ4_0, {48}, buf.data(), 27); }, "block size 32");
  ExpectError(
      [&] {
        w.AddTensor("t", DType::kF32, {1, 1, 1, 1, 1}, buf.data(), 4);
      },
      "5 dimensions");
  ExpectError([&] { w.AddTensor("t", DType::kF32, {}, buf.data(), 4); }, "0 dimensions");
  ExpectError([&] { w.AddTensor("t", DType::kF32, {4, -1}, buf.data(), 4); }, "negative");
  ExpectError([&] { w.AddTensor("t", static_cast<DType>(4), {4}, buf.data(), 4); }, "unknown type");
  ExpectError([&] { w.AddTensor(std::string(64, 'n'), DType::kF32, {1}, buf.data(), 4); },
              "64 bytes");
  w.AddTensor(std::string(63, 'n'), DType::kF32, {1}, buf.data(), 4);
  w.AddTensor("t", DType::kF32, {1}, buf.data(), 4);
  ExpectError([&] { w.AddTensor("t", DType::kF32, {1}, buf.data(), 4); }, "duplicate");
  ExpectError([&] { w.set_alignment(0); }, "power of two");
  ExpectError([&] { w.set_alignment(48); }, "power of two");
  ExpectError([&] { w.SetU32("", 1); }, "empty");
  ExpectError([&] { w.SetU64("general.alignment", 64); }, "must be UINT32");
  ExpectError([&] { w.SetArray("a", GgufType::kString, buf.data(), 1); }, "SetArray");
}

// A tensor filled at write time gives the file an AddTensor of the same bytes
// gives, in memory and on disk, and gets AddTensor's checks.
TEST(GgufWriter, TensorsFilledAtWriteAreTheSameFile) {
  const std::vector<float> x = {1, 2, 3, 4, 5, 6};
  GgufWriter given, filled;
  for (GgufWriter* w : {&given, &filled}) w->SetString("general.architecture", "llama");
  given.AddTensor("a", DType::kF32, {2, 3}, x.data(), 24);
  given.AddTensor("b", DType::kF32, {1}, x.data(), 4);
  int fills = 0;
  filled.AddTensorFilledAtWrite("a", DType::kF32, {2, 3}, [&](uint8_t* out) {
    ++fills;
    std::memcpy(out, x.data(), 24);
  });
  filled.AddTensorFilledAtWrite("b", DType::kF32, {1}, [&](uint8_t* out) { std::memcpy(out, x.data(), 4); });
  EXPECT_EQ(filled.Serialize(), given.Serialize());
  const fs::path path =
      fs::temp_directory_path() / ("kakeya_gguf_filled_" + std::to_string(getpid()) + ".gguf");
  filled.Write(path.string());
  {
    std::ifstream in(path, std::ios::binary);
    const std::vector<uint8_t> written((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    EXPECT_EQ(written, given.Serialize());
  }
  fs::remove(path);
  EXPECT_EQ(fills, 2);  // once per Serialize or Write
  ExpectError([&] { filled.AddTensorFilledAtWrite("a", DType::kF32, {1}, nullptr); }, "duplicate");
  ExpectError([&] { filled.AddTensorFilledAtWrite("q", DType::kQ8_0, {31}, nullptr); }, "block size");
}

TEST(GgufWriter, WritesAndOpensAFile) {
  // The pid keeps concurrent runs from different build directories apart.
  const fs::path path =
      fs::temp_directory_path() / ("kakeya_gguf_test_" + std::to_string(getpid()) + ".gguf");
  GgufWriter w;
  w.SetString("general.architecture", "llama");
  const std::vector<float> x = {1, 2};
  w.AddTensor("x", DType::kF32, {2}, x.data(), 8);
  w.Write(path.string());
  {
    std::ifstream in(path, std::ios::binary);
    const std::vector<uint8_t> written((std::istreambuf_iterator<char>(in)),
                                       std::istreambuf_iterator<char>());
    EXPECT_EQ(written, w.Serialize());
    const auto f = GgufFile::Open(path.string());
    EXPECT_EQ(f->name(), path.string());
    EXPECT_EQ(f->GetString("general.architecture"), "llama");
    EXPECT_EQ(std::memcmp(f->FindTensor("x")->data, x.data(), 8), 0);
  }
  fs::remove(path);
  ExpectError([&] { w.Write("/nonexistent-dir/x.gguf"); }, "No such file or directory");
  if (fs::exists("/dev/full")) {
    ExpectError([&] { w.Write("/dev/full"); }, "No space left on device");
  }
  ExpectError([&] { GgufFile::Open("/nonexistent-dir/x.gguf"); }, "No such file or directory");
}

// --- The real fixture files (made by llama.cpp's tools) ---

TEST(GgufFixtures, TinyLlama) {
  const auto f = GgufFile::Open(KAKEYA_FIXTURES "/models/tiny-llama-f32.gguf");
  EXPECT_EQ(f->version(), 3u);
  EXPECT_EQ(f->GetString("general.architecture"), "llama");
  EXPECT_EQ(f->GetU32("llama.block_count"), 4u);
  EXPECT_EQ(f->GetU32("llama.embedding_length"), 64u);
  EXPECT_EQ(f->GetStringArray("tokenizer.ggml.tokens").size(), 8000u);
  EXPECT_EQ(f->GetF32Array("tokenizer.ggml.scores").size(), 8000u);
  EXPECT_EQ(f->GetIntArray("tokenizer.ggml.token_type").size(), 8000u);
  // token_embd, output_norm, output + 9 tensors per layer.
  EXPECT_EQ(f->tensors().size(), 3u + 9 * 4);
  const GgufTensor* emb = f->FindTensor("token_embd.weight");
  ASSERT_NE(emb, nullptr);
  EXPECT_EQ(emb->n_dims, 2u);
  EXPECT_EQ(emb->ne[0], 64);
  EXPECT_EQ(emb->ne[1], 8000);
  EXPECT_EQ(emb->type, DType::kF32);
  EXPECT_EQ(emb->nbytes, 64u * 8000 * 4);
  const GgufTensor* norm = f->FindTensor("blk.0.attn_norm.weight");
  ASSERT_NE(norm, nullptr);
  EXPECT_EQ(norm->n_dims, 1u);
  EXPECT_EQ(norm->ne[0], 64);
}

TEST(GgufFixtures, EveryModelOpens) {
  int opened = 0;
  for (const auto& entry : fs::directory_iterator(KAKEYA_FIXTURES "/models")) {
    if (entry.path().extension() != ".gguf") continue;
    SCOPED_TRACE(entry.path().string());
    const auto f = GgufFile::Open(entry.path().string());
    EXPECT_FALSE(f->GetString("general.architecture").empty());
    ASSERT_FALSE(f->tensors().empty());
    // llama.cpp writes tensors back to back; the last one ends near the file end.
    const GgufTensor& last = f->tensors().back();
    EXPECT_LE(f->data_offset() + last.offset + last.nbytes, fs::file_size(entry.path()));
    EXPECT_GT(f->data_offset() + last.offset + last.nbytes + f->alignment(),
              fs::file_size(entry.path()));
    ++opened;
  }
  EXPECT_GE(opened, 11);
}

TEST(GgufFixtures, QuantizedTypes) {
  const auto f = GgufFile::Open(KAKEYA_FIXTURES "/models/tiny-llama-q4_k_m.gguf");
  const GgufTensor* down = f->FindTensor("blk.0.ffn_down.weight");
  ASSERT_NE(down, nullptr);
  EXPECT_EQ(down->type, DType::kQ4_K);
  EXPECT_EQ(down->nbytes, static_cast<uint64_t>(RowBytes(DType::kQ4_K, down->ne[0]) * down->ne[1]));
}

TEST(GgufFixtures, EveryVocabularyOpens) {
  int opened = 0;
  for (const auto& entry : fs::directory_iterator(KAKEYA_FIXTURES "/tokenizer")) {
    if (entry.path().extension() != ".gguf") continue;
    SCOPED_TRACE(entry.path().string());
    const auto f = GgufFile::Open(entry.path().string());
    EXPECT_FALSE(f->GetStringArray("tokenizer.ggml.tokens").empty());
    EXPECT_FALSE(f->GetString("tokenizer.ggml.model").empty());
    ++opened;
  }
  EXPECT_GE(opened, 9);
}

// Speed is a benchmark's business (README "Benchmarks"); this checks that the
// largest vocabulary (400k strings) reads completely.
TEST(GgufFixtures, LargeVocabularyOpens) {
  const auto f = GgufFile::Open(KAKEYA_FIXTURES "/tokenizer/ggml-vocab-llama-bpe.gguf");
  const GgufValue* merges = f->Find("tokenizer.ggml.merges");
  ASSERT_NE(merges, nullptr);
  EXPECT_GT(merges->strings.size(), 200000u);
  EXPECT_EQ(f->GetStringArray("tokenizer.ggml.tokens").size(), 128256u);
}

}  // namespace
}  // namespace kakeya
