// Parsing and validation of GGUF v2/v3 files (docs/formats/gguf.md).
//
// Nothing read from the file is trusted: every count is checked against the
// bytes that could possibly hold it before anything is allocated, every size is
// computed with overflow checks, and the first problem throws Error as
// "<name>: <field> at byte <offset>: <problem>".
#include <bit>
#include <cstring>

#include "base/error.h"
#include "gguf/gguf.h"
#include "gguf/gguf_format.h"

namespace kakeya {
namespace {

using namespace gguf_format;

static_assert(std::endian::native == std::endian::little,
              "GGUF fields are read by memcpy, which assumes a little-endian host");

// Smallest possible encodings, used to bound counts before reserving memory:
// a KV is at least a key length and a value type; a tensor info at least a
// name length, n_dims, one dimension, the type and the offset.
constexpr uint64_t kMinKvBytes = 8 + 4;
constexpr uint64_t kMinTensorInfoBytes = 8 + 4 + 8 + 4 + 8;

bool IsKnownType(uint32_t t) { return t <= static_cast<uint32_t>(GgufType::kFloat64); }

// A name from the file for messages. Control bytes are escaped (a NUL would cut
// the message short) and keys may be up to 1 GiB, so long ones are cut.
std::string Quoted(std::string_view name) {
  constexpr size_t kMaxShown = 80;
  std::string out = "'";
  for (const char ch : name.substr(0, kMaxShown)) {
    const auto byte = static_cast<unsigned char>(ch);
    if (byte < 0x20 || byte == 0x7F) {
      constexpr char kHex[] = "0123456789abcdef";
      out += {'\\', 'x', kHex[byte >> 4], kHex[byte & 15]};
    } else {
      out += ch;
    }
  }
  out += '\'';
  if (name.size() > kMaxShown) out += StrCat("... (", name.size(), " bytes)");
  return out;
}

// Names a field in messages: "value" or, for array elements, "element 17".
struct Field {
  std::string_view name;
  int64_t index = -1;
};

std::ostream& operator<<(std::ostream& out, const Field& f) {
  out << f.name;
  if (f.index >= 0) out << ' ' << f.index;
  return out;
}

// Bounds-checked little-endian reads over the file bytes. `item` says what is
// being parsed ("metadata 3 ('general.name')") and prefixes the field in errors.
class Cursor {
 public:
  Cursor(const uint8_t* data, uint64_t size, const std::string& file_name)
      : data_(data), size_(size), file_name_(file_name) {}

  uint64_t pos() const { return pos_; }
  uint64_t size() const { return size_; }
  uint64_t remaining() const { return size_ - pos_; }
  void set_item(std::string item) { item_ = std::move(item); }
  const std::string& item() const { return item_; }

  template <typename... Args>
  [[noreturn]] void FailAt(uint64_t at, const Field& field, Args&&... problem) const {
    Fail(file_name_, ": ", item_, item_.empty() ? "" : " ", field, " at byte ", at, ": ",
         std::forward<Args>(problem)...);
  }

  const uint8_t* Take(uint64_t n, const Field& field) {
    if (n > remaining()) {
      FailAt(pos_, field, "needs ", n, " bytes but the file ends after ", remaining(),
             " more (file is ", size_, " bytes)");
    }
    const uint8_t* p = data_ + pos_;
    pos_ += n;
    return p;
  }

  template <typename T>
  T Read(const Field& field) {
    T v;
    std::memcpy(&v, Take(sizeof(T), field), sizeof(T));
    return v;
  }

  std::string_view ReadString(const Field& field, uint64_t max_bytes = kMaxStringBytes) {
    const uint64_t at = pos_;
    const uint64_t len = Read<uint64_t>(field);
    if (len > max_bytes)
      FailAt(at, field, "length ", len, " exceeds the limit of ", max_bytes, " bytes");
    if (len > remaining()) {
      FailAt(at, field, "length ", len, " runs past the end of the file (", remaining(),
             " bytes remain)");
    }
    return {reinterpret_cast<const char*>(Take(len, field)), static_cast<size_t>(len)};
  }

 private:
  const uint8_t* data_;
  uint64_t size_;
  uint64_t pos_ = 0;
  const std::string& file_name_;
  std::string item_;
};

// Reads a signed 64-bit count and checks that `count` items of at least
// `min_item_bytes` each could fit in what is left of the file.
uint64_t ReadCount(Cursor& c, std::string_view field, uint64_t min_item_bytes) {
  const uint64_t at = c.pos();
  const int64_t count = c.Read<int64_t>({field});
  if (count < 0) c.FailAt(at, {field}, "negative count ", count);
  if (static_cast<uint64_t>(count) > c.remaining() / min_item_bytes) {
    c.FailAt(at, {field}, count, " entries of at least ", min_item_bytes,
             " bytes cannot fit in the remaining ", c.remaining(), " bytes");
  }
  return static_cast<uint64_t>(count);
}

void ReadScalar(Cursor& c, GgufType type, const Field& field, GgufValue& v) {
  switch (type) {
    case GgufType::kUint8: v.u = c.Read<uint8_t>(field); break;
    case GgufType::kInt8: v.i = c.Read<int8_t>(field); break;
    case GgufType::kUint16: v.u = c.Read<uint16_t>(field); break;
    case GgufType::kInt16: v.i = c.Read<int16_t>(field); break;
    case GgufType::kUint32: v.u = c.Read<uint32_t>(field); break;
    case GgufType::kInt32: v.i = c.Read<int32_t>(field); break;
    case GgufType::kFloat32: v.f = c.Read<float>(field); break;
    // llama.cpp treats any nonzero byte as true.
    case GgufType::kBool: v.u = c.Read<uint8_t>(field) != 0; break;
    case GgufType::kString: v.str = c.ReadString(field); break;
    case GgufType::kUint64: v.u = c.Read<uint64_t>(field); break;
    case GgufType::kInt64: v.i = c.Read<int64_t>(field); break;
    case GgufType::kFloat64: v.f = c.Read<double>(field); break;
    case GgufType::kArray: break;  // callers handle arrays
  }
}

GgufType ReadType(Cursor& c, std::string_view field) {
  const uint64_t at = c.pos();
  const uint32_t raw = c.Read<uint32_t>({field});
  if (!IsKnownType(raw)) c.FailAt(at, {field}, "unknown GGUF value type ", raw);
  return static_cast<GgufType>(raw);
}

void ReadArray(Cursor& c, GgufValue& v) {
  const uint64_t type_at = c.pos();
  v.elem_type = ReadType(c, "array element type");
  if (v.elem_type == GgufType::kArray) {
    c.FailAt(type_at, {"array element type"},
             "nested arrays are not supported (llama.cpp rejects them too)");
  }
  const uint64_t count_at = c.pos();
  v.count = c.Read<uint64_t>({"array count"});
  if (v.elem_type == GgufType::kString) {
    if (v.count > c.remaining() / 8) {
      c.FailAt(count_at, {"array count"}, v.count, " strings cannot fit in the remaining ",
               c.remaining(), " bytes");
    }
    v.strings.reserve(v.count);
    for (uint64_t k = 0; k < v.count; ++k) {
      v.strings.push_back(c.ReadString({"array element", static_cast<int64_t>(k)}));
    }
    return;
  }
  const uint64_t elem_bytes = PackedBytes(v.elem_type);
  if (v.count > c.remaining() / elem_bytes) {
    c.FailAt(count_at, {"array count"}, v.count, " elements of type ", GgufTypeName(v.elem_type),
             " (", elem_bytes, " bytes each) run past the end of the file (", c.remaining(),
             " bytes remain)");
  }
  v.array_data = c.Take(v.count * elem_bytes, {"array data"});
}

// Where a tensor's info started, for messages about its data.
struct TensorInfoSite {
  uint64_t at;
  std::string item;
};

// Overflow-checked element count and byte size of a tensor.
void ComputeSizes(Cursor& c, uint64_t at, GgufTensor& t, const DTypeTraits& traits) {
  int64_t elements = 1;
  for (uint32_t d = 0; d < kMaxDims; ++d) {
    if (__builtin_mul_overflow(elements, t.ne[d], &elements)) {
      c.FailAt(at, {"ne"}, "element count of [", t.ne[0], ", ", t.ne[1], ", ", t.ne[2], ", ",
               t.ne[3], "] overflows 64 bits");
    }
  }
  uint64_t nbytes = static_cast<uint64_t>(t.ne[0] / traits.block_elems) * traits.block_bytes;
  for (uint32_t d = 1; d < kMaxDims; ++d) {
    if (__builtin_mul_overflow(nbytes, static_cast<uint64_t>(t.ne[d]), &nbytes)) {
      c.FailAt(at, {"ne"}, "byte size of [", t.ne[0], ", ", t.ne[1], ", ", t.ne[2], ", ", t.ne[3],
               "] ", traits.name, " overflows 64 bits");
    }
  }
  t.nbytes = nbytes;
}

// Reads one tensor info; `name` is set to the name's bytes in the file.
GgufTensor ReadTensorInfo(Cursor& c, uint64_t alignment, std::string_view& name) {
  GgufTensor t;
  name = c.ReadString({"name"}, kMaxTensorNameBytes);
  t.name = std::string(name);
  c.set_item(StrCat(c.item(), " (", Quoted(name), ")"));

  const uint64_t dims_at = c.pos();
  t.n_dims = c.Read<uint32_t>({"n_dims"});
  if (t.n_dims < 1 || t.n_dims > kMaxDims) {
    c.FailAt(dims_at, {"n_dims"}, t.n_dims, " dimensions; expected 1 to ", kMaxDims);
  }
  const uint64_t ne0_at = c.pos();
  for (uint32_t d = 0; d < t.n_dims; ++d) {
    const uint64_t ne_at = c.pos();
    t.ne[d] = c.Read<int64_t>({"ne", d});
    if (t.ne[d] < 0) c.FailAt(ne_at, {"ne", d}, "negative dimension ", t.ne[d]);
  }

  const uint64_t type_at = c.pos();
  const uint32_t raw_type = c.Read<uint32_t>({"type"});
  const DTypeTraits traits = TraitsOf(raw_type);
  if (traits.block_elems == 0) c.FailAt(type_at, {"type"}, "unknown ggml type id ", raw_type);
  t.type = static_cast<DType>(raw_type);
  if (t.ne[0] % traits.block_elems != 0) {
    c.FailAt(ne0_at, {"ne", 0}, "ne[0] = ", t.ne[0], " is not a multiple of the ", traits.name,
             " block size ", traits.block_elems);
  }
  ComputeSizes(c, ne0_at, t, traits);

  const uint64_t offset_at = c.pos();
  t.offset = c.Read<uint64_t>({"offset"});
  if (t.offset % alignment != 0) {
    c.FailAt(offset_at, {"offset"}, "data offset ", t.offset,
             " is not a multiple of the alignment ", alignment);
  }
  return t;
}

}  // namespace

std::unique_ptr<GgufFile> GgufFile::Open(const std::string& path) {
  std::unique_ptr<GgufFile> f(new GgufFile());
  f->name_ = path;
  f->file_ = std::make_unique<MappedFile>(path);
  f->Parse(f->file_->data(), f->file_->size());
  return f;
}

std::unique_ptr<GgufFile> GgufFile::FromMemory(const uint8_t* data, size_t size, std::string name) {
  std::unique_ptr<GgufFile> f(new GgufFile());
  f->name_ = std::move(name);
  f->Parse(data, size);
  return f;
}

namespace {

void CheckHeader(Cursor& c, uint32_t& version) {
  if (c.size() < 4) c.FailAt(0, {"magic"}, "file is ", c.size(), " bytes, too short for GGUF");
  if (std::memcmp(c.Take(4, {"magic"}), "GGUF", 4) != 0) {
    c.FailAt(0, {"magic"}, "not a GGUF file (expected the bytes 'GGUF')");
  }
  version = c.Read<uint32_t>({"version"});
  // A big-endian file's version reads byte-swapped, e.g. 3 as 0x03000000
  // (docs/formats/gguf.md 1.6).
  if (version != 0 && (version & 0xFFFF) == 0) {
    c.FailAt(4, {"version"}, "big-endian GGUF files are not supported (version reads as 0x",
             std::hex, version, ")");
  }
  if (version == 1) c.FailAt(4, {"version"}, "GGUF v1 is no longer supported (need v2 or v3)");
  if (version != 2 && version != 3) {
    c.FailAt(4, {"version"}, "unsupported GGUF version ", version, " (need v2 or v3)");
  }
}

// general.alignment, if present, must be a UINT32 power of two (docs/formats/gguf.md 1.3).
uint64_t AlignmentOf(const std::vector<GgufKv>& kvs, const std::string& file_name) {
  for (size_t k = 0; k < kvs.size(); ++k) {
    const GgufKv& kv = kvs[k];
    if (kv.key != kAlignmentKey) continue;
    const std::string_view where = "metadata ";
    if (kv.value.type != GgufType::kUint32) {
      Fail(file_name, ": ", where, k, " ('general.alignment') at byte ", kv.offset,
           ": must be UINT32, found ", GgufTypeName(kv.value.type));
    }
    if (!std::has_single_bit(kv.value.u)) {
      Fail(file_name, ": ", where, k, " ('general.alignment') at byte ", kv.offset, ": value ",
           kv.value.u, " is not a nonzero power of two");
    }
    return kv.value.u;
  }
  return kDefaultAlignment;
}

// Reads n_kv pairs into `kvs`, indexed by views into the file bytes (which stay
// put, unlike kvs[i].key when the vector grows).
void ReadMetadata(Cursor& c, uint64_t n_kv, std::vector<GgufKv>& kvs,
                  std::unordered_map<std::string_view, size_t>& index) {
  kvs.reserve(n_kv);
  for (uint64_t k = 0; k < n_kv; ++k) {
    const uint64_t at = c.pos();
    c.set_item(StrCat("metadata ", k));
    const std::string_view key = c.ReadString({"key"});
    if (key.empty()) c.FailAt(at, {"key"}, "empty key");
    c.set_item(StrCat("metadata ", k, " (", Quoted(key), ")"));
    const auto [first, inserted] = index.emplace(key, kvs.size());
    if (!inserted) {
      c.FailAt(at, {"key"}, "duplicate key (first at byte ", kvs[first->second].offset, ")");
    }
    GgufKv kv{std::string(key), {}, at};
    kv.value.type = ReadType(c, "value type");
    if (kv.value.type == GgufType::kArray) {
      ReadArray(c, kv.value);
    } else {
      ReadScalar(c, kv.value.type, {"value"}, kv.value);
    }
    kvs.push_back(std::move(kv));
  }
}

// Reads n_tensors infos into `tensors` (indexed like the metadata) and returns
// where each one starts, for messages about its data.
std::vector<TensorInfoSite> ReadTensorInfos(Cursor& c, uint64_t n_tensors, uint64_t alignment,
                                            std::vector<GgufTensor>& tensors,
                                            std::unordered_map<std::string_view, size_t>& index) {
  // n_tensors was checked against the whole file; the metadata has used some of it since.
  if (n_tensors > c.remaining() / kMinTensorInfoBytes) {
    c.FailAt(8, {"n_tensors"}, n_tensors, " tensor infos cannot fit in the ", c.remaining(),
             " bytes after the metadata");
  }
  tensors.reserve(n_tensors);
  std::vector<TensorInfoSite> sites;
  sites.reserve(n_tensors);
  for (uint64_t t = 0; t < n_tensors; ++t) {
    const uint64_t at = c.pos();
    c.set_item(StrCat("tensor info ", t));
    std::string_view name;
    GgufTensor tensor = ReadTensorInfo(c, alignment, name);
    const auto [first, inserted] = index.emplace(name, tensors.size());
    if (!inserted) {
      c.FailAt(at, {"name"}, "duplicate tensor name (also tensor info ", first->second, ")");
    }
    sites.push_back({at, c.item()});
    tensors.push_back(std::move(tensor));
  }
  return sites;
}

// Points each tensor at its data, which must lie inside the file.
void LocateTensorData(const std::string& file_name, const uint8_t* data, uint64_t size,
                      uint64_t data_offset, const std::vector<TensorInfoSite>& sites,
                      std::vector<GgufTensor>& tensors) {
  for (size_t t = 0; t < tensors.size(); ++t) {
    GgufTensor& tensor = tensors[t];
    uint64_t begin = 0;
    uint64_t end = 0;
    if (__builtin_add_overflow(data_offset, tensor.offset, &begin) ||
        __builtin_add_overflow(begin, tensor.nbytes, &end)) {
      Fail(file_name, ": ", sites[t].item, " at byte ", sites[t].at, ": data offset ",
           tensor.offset, " + ", tensor.nbytes, " bytes overflows 64 bits");
    }
    if (end > size) {
      Fail(file_name, ": ", sites[t].item, " at byte ", sites[t].at, ": data [", begin, ", ", end,
           ") runs past the end of the file (", size, " bytes)");
    }
    tensor.data = data + begin;
  }
}

}  // namespace

void GgufFile::Parse(const uint8_t* data, size_t size) {
  Cursor c(data, size, name_);
  CheckHeader(c, version_);
  const uint64_t n_tensors = ReadCount(c, "n_tensors", kMinTensorInfoBytes);
  const uint64_t n_kv = ReadCount(c, "n_kv", kMinKvBytes);
  ReadMetadata(c, n_kv, kvs_, kv_index_);
  alignment_ = AlignmentOf(kvs_, name_);
  c.set_item("");
  const std::vector<TensorInfoSite> sites =
      ReadTensorInfos(c, n_tensors, alignment_, tensors_, tensor_index_);
  data_offset_ = AlignUp(c.pos(), alignment_);
  LocateTensorData(name_, data, size, data_offset_, sites, tensors_);
}

}  // namespace kakeya
