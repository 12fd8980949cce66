// GGUF v3 writer: little-endian, tensor data sequential at aligned offsets
// (offset_{i+1} = offset_i + align_up(nbytes_i, alignment)), the layout
// llama.cpp's reader insists on (docs/formats/gguf.md 1.5).
#include <bit>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <type_traits>

#include "base/error.h"
#include "gguf/gguf.h"
#include "gguf/gguf_format.h"

namespace kakeya {
namespace {

using namespace gguf_format;

constexpr uint32_t kVersion = 3;

// Appends little-endian encodings (the host is little-endian; see gguf_reader.cc).
class ByteSink {
 public:
  explicit ByteSink(std::vector<uint8_t>& out) : out_(out) {}

  template <typename T>
  void Put(T v) {
    const auto* p = reinterpret_cast<const uint8_t*>(&v);
    out_.insert(out_.end(), p, p + sizeof(T));
  }
  void PutType(GgufType t) { Put(static_cast<uint32_t>(t)); }
  void PutString(std::string_view s) {
    Put<uint64_t>(s.size());
    out_.insert(out_.end(), s.begin(), s.end());
  }
  void PutBytes(const uint8_t* p, size_t n) { out_.insert(out_.end(), p, p + n); }
  void PadTo(uint64_t alignment) { out_.resize(AlignUp(out_.size(), alignment), 0); }

 private:
  std::vector<uint8_t>& out_;
};

template <typename T>
std::vector<uint8_t> EncodeScalar(GgufType type, T v) {
  std::vector<uint8_t> bytes;
  ByteSink sink(bytes);
  sink.PutType(type);
  sink.Put(v);
  return bytes;
}

template <typename T>
std::vector<uint8_t> EncodeArray(GgufType elem_type, const std::vector<T>& values) {
  std::vector<uint8_t> bytes;
  ByteSink sink(bytes);
  sink.PutType(GgufType::kArray);
  sink.PutType(elem_type);
  sink.Put<uint64_t>(values.size());
  for (const T& v : values) {
    if constexpr (std::is_same_v<T, std::string>) {
      sink.PutString(v);
    } else {
      sink.Put(v);
    }
  }
  return bytes;
}

// Replaces the value of an existing key so the file never holds a duplicate.
void SetEncoded(std::vector<std::pair<std::string, std::vector<uint8_t>>>& kvs, std::string key,
                std::vector<uint8_t> encoded) {
  if (key.empty()) Fail("GgufWriter: metadata keys must not be empty");
  // Readers reject any other type here; SetU32 checks the value.
  if (key == kAlignmentKey && encoded[0] != static_cast<uint8_t>(GgufType::kUint32)) {
    Fail("GgufWriter: ", kAlignmentKey, " must be UINT32 (use set_alignment)");
  }
  for (auto& [k, v] : kvs) {
    if (k == key) {
      v = std::move(encoded);
      return;
    }
  }
  kvs.emplace_back(std::move(key), std::move(encoded));
}

}  // namespace

void GgufWriter::SetU32(std::string key, uint32_t v) {
  if (key == kAlignmentKey) {
    if (!std::has_single_bit(v)) {
      Fail("GgufWriter: alignment ", v, " is not a nonzero power of two");
    }
    alignment_ = v;
  }
  SetEncoded(kvs_, std::move(key), EncodeScalar(GgufType::kUint32, v));
}

void GgufWriter::set_alignment(uint32_t a) { SetU32(std::string(kAlignmentKey), a); }

void GgufWriter::SetI32(std::string key, int32_t v) {
  SetEncoded(kvs_, std::move(key), EncodeScalar(GgufType::kInt32, v));
}

void GgufWriter::SetU64(std::string key, uint64_t v) {
  SetEncoded(kvs_, std::move(key), EncodeScalar(GgufType::kUint64, v));
}

void GgufWriter::SetF32(std::string key, float v) {
  SetEncoded(kvs_, std::move(key), EncodeScalar(GgufType::kFloat32, v));
}

void GgufWriter::SetBool(std::string key, bool v) {
  SetEncoded(kvs_, std::move(key), EncodeScalar<uint8_t>(GgufType::kBool, v ? 1 : 0));
}

void GgufWriter::SetString(std::string key, std::string v) {
  std::vector<uint8_t> bytes;
  ByteSink sink(bytes);
  sink.PutType(GgufType::kString);
  sink.PutString(v);
  SetEncoded(kvs_, std::move(key), std::move(bytes));
}

void GgufWriter::SetStringArray(std::string key, std::vector<std::string> v) {
  SetEncoded(kvs_, std::move(key), EncodeArray(GgufType::kString, v));
}

void GgufWriter::SetF32Array(std::string key, std::vector<float> v) {
  SetEncoded(kvs_, std::move(key), EncodeArray(GgufType::kFloat32, v));
}

void GgufWriter::SetI32Array(std::string key, std::vector<int32_t> v) {
  SetEncoded(kvs_, std::move(key), EncodeArray(GgufType::kInt32, v));
}

void GgufWriter::SetU8(std::string key, uint8_t v) {
  SetEncoded(kvs_, std::move(key), EncodeScalar(GgufType::kUint8, v));
}

void GgufWriter::SetI8(std::string key, int8_t v) {
  SetEncoded(kvs_, std::move(key), EncodeScalar(GgufType::kInt8, v));
}

void GgufWriter::SetU16(std::string key, uint16_t v) {
  SetEncoded(kvs_, std::move(key), EncodeScalar(GgufType::kUint16, v));
}

void GgufWriter::SetI16(std::string key, int16_t v) {
  SetEncoded(kvs_, std::move(key), EncodeScalar(GgufType::kInt16, v));
}

void GgufWriter::SetI64(std::string key, int64_t v) {
  SetEncoded(kvs_, std::move(key), EncodeScalar(GgufType::kInt64, v));
}

void GgufWriter::SetF64(std::string key, double v) {
  SetEncoded(kvs_, std::move(key), EncodeScalar(GgufType::kFloat64, v));
}

void GgufWriter::SetValue(std::string key, const GgufValue& v) {
  switch (v.type) {
    case GgufType::kUint8: SetU8(std::move(key), static_cast<uint8_t>(v.u)); break;
    case GgufType::kInt8: SetI8(std::move(key), static_cast<int8_t>(v.i)); break;
    case GgufType::kUint16: SetU16(std::move(key), static_cast<uint16_t>(v.u)); break;
    case GgufType::kInt16: SetI16(std::move(key), static_cast<int16_t>(v.i)); break;
    case GgufType::kUint32: SetU32(std::move(key), static_cast<uint32_t>(v.u)); break;
    case GgufType::kInt32: SetI32(std::move(key), static_cast<int32_t>(v.i)); break;
    case GgufType::kUint64: SetU64(std::move(key), v.u); break;
    case GgufType::kInt64: SetI64(std::move(key), v.i); break;
    case GgufType::kFloat32: SetF32(std::move(key), static_cast<float>(v.f)); break;
    case GgufType::kFloat64: SetF64(std::move(key), v.f); break;
    case GgufType::kBool: SetBool(std::move(key), v.u != 0); break;
    case GgufType::kString: SetString(std::move(key), std::string(v.str)); break;
    case GgufType::kArray:
      if (v.elem_type == GgufType::kString) {
        SetStringArray(std::move(key), std::vector<std::string>(v.strings.begin(), v.strings.end()));
      } else {
        SetArray(std::move(key), v.elem_type, v.array_data, v.count);
      }
      break;
  }
}

void GgufWriter::SetArray(std::string key, GgufType elem_type, const void* data, uint64_t count) {
  const uint64_t elem_bytes = PackedBytes(elem_type);
  if (elem_bytes == 0) {
    Fail("GgufWriter: key '", key, "': SetArray needs a numeric or BOOL element type, got ",
         GgufTypeName(elem_type));
  }
  std::vector<uint8_t> bytes;
  ByteSink sink(bytes);
  sink.PutType(GgufType::kArray);
  sink.PutType(elem_type);
  sink.Put(count);
  sink.PutBytes(static_cast<const uint8_t*>(data), count * elem_bytes);
  SetEncoded(kvs_, std::move(key), std::move(bytes));
}

uint64_t GgufWriter::CheckNewTensor(const std::string& name, DType type, const std::vector<int64_t>& ne) const {
  const std::string where = StrCat("GgufWriter: tensor '", name, "': ");
  if (name.size() > kMaxTensorNameBytes) {
    Fail(where, "name is ", name.size(), " bytes; llama.cpp allows at most ", kMaxTensorNameBytes);
  }
  for (const Tensor& t : tensors_) {
    if (t.name == name) Fail(where, "duplicate tensor name");
  }
  if (ne.empty() || ne.size() > 4) Fail(where, ne.size(), " dimensions; expected 1 to 4");
  const DTypeTraits traits = TraitsOf(type);
  if (traits.block_elems == 0) Fail(where, "unknown type id ", static_cast<uint32_t>(type));
  if (ne[0] < 0 || ne[0] % traits.block_elems != 0) {
    Fail(where, "ne[0] = ", ne[0], " is not a non-negative multiple of the ", traits.name,
         " block size ", traits.block_elems);
  }
  uint64_t expected = static_cast<uint64_t>(RowBytes(type, ne[0]));
  for (size_t d = 1; d < ne.size(); ++d) {
    if (ne[d] < 0) Fail(where, "negative dimension ne[", d, "] = ", ne[d]);
    if (__builtin_mul_overflow(expected, static_cast<uint64_t>(ne[d]), &expected)) {
      Fail(where, "byte size overflows 64 bits");
    }
  }
  return expected;
}

void GgufWriter::AddTensor(std::string name, DType type, std::vector<int64_t> ne, const void* data,
                           size_t nbytes) {
  const uint64_t expected = CheckNewTensor(name, type, ne);
  if (nbytes != expected) {
    Fail("GgufWriter: tensor '", name, "': got ", nbytes, " bytes of data, but ", TraitsOf(type).name,
         " with these dimensions needs ", expected);
  }
  const auto* bytes = static_cast<const uint8_t*>(data);
  tensors_.push_back({std::move(name), type, std::move(ne), expected, {bytes, bytes + nbytes}, nullptr});
}

void GgufWriter::AddTensorFilledAtWrite(std::string name, DType type, std::vector<int64_t> ne,
                                        std::function<void(uint8_t*)> fill) {
  const uint64_t nbytes = CheckNewTensor(name, type, ne);
  tensors_.push_back({std::move(name), type, std::move(ne), nbytes, {}, std::move(fill)});
}

std::vector<uint8_t> GgufWriter::SerializeHeader() const {
  std::vector<uint8_t> out;
  ByteSink sink(out);
  sink.PutBytes(reinterpret_cast<const uint8_t*>("GGUF"), 4);
  sink.Put(kVersion);
  sink.Put<uint64_t>(tensors_.size());
  sink.Put<uint64_t>(kvs_.size());
  for (const auto& [key, encoded] : kvs_) {
    sink.PutString(key);
    sink.PutBytes(encoded.data(), encoded.size());
  }
  uint64_t offset = 0;
  for (const Tensor& t : tensors_) {
    sink.PutString(t.name);
    sink.Put<uint32_t>(t.ne.size());
    for (const int64_t n : t.ne) sink.Put(n);
    sink.Put(static_cast<uint32_t>(t.type));
    sink.Put(offset);
    offset += AlignUp(t.nbytes, alignment_);
  }
  // docs/formats/gguf.md 1.5: the data section is aligned, but no padding without tensors.
  if (!tensors_.empty()) sink.PadTo(alignment_);
  return out;
}

std::vector<uint8_t> GgufWriter::Serialize() const {
  std::vector<uint8_t> out = SerializeHeader();
  ByteSink sink(out);
  for (const Tensor& t : tensors_) {
    if (t.fill) {
      out.resize(out.size() + t.nbytes);
      t.fill(out.data() + out.size() - t.nbytes);
    } else {
      sink.PutBytes(t.bytes.data(), t.bytes.size());
    }
    sink.PadTo(alignment_);
  }
  return out;
}

// Streams the tensor data instead of building the whole file in memory, which
// for a real model would hold every weight twice.
void GgufWriter::Write(const std::string& path) const {
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) Fail("cannot create ", path, ": ", std::strerror(errno));
  auto put = [f](const uint8_t* p, size_t n) { return n == 0 || std::fwrite(p, 1, n, f) == n; };
  const std::vector<uint8_t> header = SerializeHeader();
  const std::vector<uint8_t> zeros(alignment_, 0);
  bool written = put(header.data(), header.size());
  std::vector<uint8_t> filled;  // one AddTensorFilledAtWrite tensor at a time
  for (const Tensor& t : tensors_) {
    if (!written) break;
    const uint8_t* data = t.bytes.data();
    if (t.fill) {
      filled.resize(t.nbytes);
      t.fill(filled.data());
      data = filled.data();
    }
    const size_t padding = AlignUp(t.nbytes, alignment_) - t.nbytes;
    written = put(data, t.nbytes) && put(zeros.data(), padding);
  }
  const int write_errno = errno;
  if (std::fclose(f) != 0 || !written) {
    const int err = written ? errno : write_errno;
    Fail("cannot write ", path, ": ", std::strerror(err));
  }
}

}  // namespace kakeya
