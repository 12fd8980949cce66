// Validated, memory-mapped GGUF reader (docs/formats/gguf.md).
//
// Every length, count, offset and size read from the file is checked before use;
// the first problem throws kakeya::Error with the field name and byte offset,
// e.g. "model.gguf: tensor info 3 ('blk.0.attn_q.weight') at byte 1234:
// data [5000, 9096) runs past the end of the file (8000 bytes)".
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "base/mapped_file.h"
#include "tensor/dtype.h"

namespace kakeya {

enum class GgufType : uint32_t {
  kUint8 = 0,
  kInt8 = 1,
  kUint16 = 2,
  kInt16 = 3,
  kUint32 = 4,
  kInt32 = 5,
  kFloat32 = 6,
  kBool = 7,
  kString = 8,
  kArray = 9,
  kUint64 = 10,
  kInt64 = 11,
  kFloat64 = 12,
};

std::string_view GgufTypeName(GgufType t);

// One metadata value. Scalars are decoded; strings and arrays point into the
// mapped file (valid while the GgufFile lives).
struct GgufValue {
  GgufType type = GgufType::kUint8;
  // Scalars: the value widened to these (exactly one is meaningful per type).
  uint64_t u = 0;  // unsigned ints and bool
  int64_t i = 0;   // signed ints
  double f = 0;    // floats
  std::string_view str;  // kString
  // kArray: element type, count and, for non-string elements, the packed data.
  GgufType elem_type = GgufType::kUint8;
  uint64_t count = 0;
  const uint8_t* array_data = nullptr;
  std::vector<std::string_view> strings;  // kArray of kString
};

struct GgufKv {
  std::string key;
  GgufValue value;
  uint64_t offset = 0;  // byte offset of the key in the file, for messages
};

struct GgufTensor {
  std::string name;
  uint32_t n_dims = 0;
  int64_t ne[4] = {1, 1, 1, 1};  // ne[0] is contiguous
  DType type = DType::kF32;
  uint64_t offset = 0;           // relative to the data section
  uint64_t nbytes = 0;
  const uint8_t* data = nullptr;  // into the mapping
  int64_t elements() const { return ne[0] * ne[1] * ne[2] * ne[3]; }
};

class GgufFile {
 public:
  // Maps and validates the whole header, metadata and tensor table. Throws Error.
  static std::unique_ptr<GgufFile> Open(const std::string& path);
  // Same validation over bytes in memory (the fuzzer and tests use it); `name`
  // is used in messages. The bytes must outlive the GgufFile.
  static std::unique_ptr<GgufFile> FromMemory(const uint8_t* data, size_t size,
                                              std::string name);

  const std::string& name() const { return name_; }
  uint32_t version() const { return version_; }
  uint64_t alignment() const { return alignment_; }
  uint64_t data_offset() const { return data_offset_; }

  const std::vector<GgufKv>& metadata() const { return kvs_; }
  const GgufValue* Find(std::string_view key) const;

  // Typed access. Get* throws Error naming the key when it is missing or has
  // another type; integer getters accept any integer type whose value fits.
  std::string_view GetString(std::string_view key) const;
  uint32_t GetU32(std::string_view key) const;
  int64_t GetI64(std::string_view key) const;
  float GetF32(std::string_view key) const;
  bool GetBool(std::string_view key) const;
  std::optional<std::string_view> FindString(std::string_view key) const;
  std::optional<uint32_t> FindU32(std::string_view key) const;
  std::optional<float> FindF32(std::string_view key) const;
  std::optional<bool> FindBool(std::string_view key) const;
  // Arrays: the element type must match (int arrays accept any integer type,
  // float arrays FLOAT32 or FLOAT64).
  std::vector<std::string_view> GetStringArray(std::string_view key) const;
  std::vector<float> GetF32Array(std::string_view key) const;
  std::vector<int64_t> GetIntArray(std::string_view key) const;

  const std::vector<GgufTensor>& tensors() const { return tensors_; }
  const GgufTensor* FindTensor(std::string_view name) const;
  // MappedFile::ReleasePages for tensor bytes no longer read (no-op for
  // FromMemory files).
  void ReleasePages(const void* p, size_t n) const {
    if (file_) file_->ReleasePages(p, n);
  }

 private:
  GgufFile() = default;
  void Parse(const uint8_t* data, size_t size);

  std::unique_ptr<MappedFile> file_;
  std::string name_;
  uint32_t version_ = 0;
  uint64_t alignment_ = 32;
  uint64_t data_offset_ = 0;
  std::vector<GgufKv> kvs_;
  std::unordered_map<std::string_view, size_t> kv_index_;
  std::vector<GgufTensor> tensors_;
  std::unordered_map<std::string_view, size_t> tensor_index_;
};

// Writes GGUF v3 files (little-endian, sequential aligned tensor data), for
// tools and tests. Values are buffered; Write() emits the whole file.
class GgufWriter {
 public:
  void SetU32(std::string key, uint32_t v);
  void SetI32(std::string key, int32_t v);
  void SetU64(std::string key, uint64_t v);
  void SetF32(std::string key, float v);
  void SetBool(std::string key, bool v);
  void SetString(std::string key, std::string v);
  void SetStringArray(std::string key, std::vector<std::string> v);
  void SetF32Array(std::string key, std::vector<float> v);
  void SetI32Array(std::string key, std::vector<int32_t> v);
  // The remaining GGUF value types, so tools can copy any metadata.
  void SetU8(std::string key, uint8_t v);
  void SetI8(std::string key, int8_t v);
  void SetU16(std::string key, uint16_t v);
  void SetI16(std::string key, int16_t v);
  void SetI64(std::string key, int64_t v);
  void SetF64(std::string key, double v);
  // An array of `count` packed little-endian elements of a numeric or BOOL type.
  void SetArray(std::string key, GgufType elem_type, const void* data, uint64_t count);
  // A value read from another file, as it was (copies and edits of files).
  void SetValue(std::string key, const GgufValue& v);
  // `data` must hold RowBytes(type, ne[0]) * ne[1] * ne[2] * ne[3] bytes.
  void AddTensor(std::string name, DType type, std::vector<int64_t> ne,
                 const void* data, size_t nbytes);
  // A tensor whose bytes `fill` writes (all of them) when the file is
  // written, one tensor at a time: tools write models larger than memory.
  void AddTensorFilledAtWrite(std::string name, DType type, std::vector<int64_t> ne,
                              std::function<void(uint8_t*)> fill);
  void set_alignment(uint32_t a);  // also written as general.alignment
  // Throws Error on I/O failure.
  void Write(const std::string& path) const;
  std::vector<uint8_t> Serialize() const;

 private:
  // Everything before the tensor data: header, metadata, tensor infos, padding.
  std::vector<uint8_t> SerializeHeader() const;

  std::vector<std::pair<std::string, std::vector<uint8_t>>> kvs_;  // key, encoded type+value
  struct Tensor {
    std::string name;
    DType type;
    std::vector<int64_t> ne;
    uint64_t nbytes;
    std::vector<uint8_t> bytes;            // the data, or empty and:
    std::function<void(uint8_t*)> fill;    // AddTensorFilledAtWrite
  };
  // Checks a new tensor's name, dims and type; returns its byte size.
  uint64_t CheckNewTensor(const std::string& name, DType type, const std::vector<int64_t>& ne) const;
  std::vector<Tensor> tensors_;
  uint32_t alignment_ = 32;
};

}  // namespace kakeya
