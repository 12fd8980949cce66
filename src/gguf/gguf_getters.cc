// Typed access to GGUF metadata and tensors. Values were validated by Parse;
// these only check that the stored type fits the request.
#include <cstring>
#include <limits>

#include "base/error.h"
#include "gguf/gguf.h"

namespace kakeya {
namespace {

bool IsUnsigned(GgufType t) {
  return t == GgufType::kUint8 || t == GgufType::kUint16 || t == GgufType::kUint32 ||
         t == GgufType::kUint64;
}

bool IsSigned(GgufType t) {
  return t == GgufType::kInt8 || t == GgufType::kInt16 || t == GgufType::kInt32 ||
         t == GgufType::kInt64;
}

bool IsFloat(GgufType t) { return t == GgufType::kFloat32 || t == GgufType::kFloat64; }

template <typename T>
T LoadElement(const uint8_t* packed, uint64_t k) {
  T x;
  std::memcpy(&x, packed + k * sizeof(T), sizeof(T));
  return x;
}

// Decodes element `k` of a packed integer array, widened like a scalar value.
GgufValue IntElement(const GgufValue& array, uint64_t k) {
  GgufValue v;
  v.type = array.elem_type;
  const uint8_t* p = array.array_data;
  switch (array.elem_type) {
    case GgufType::kUint8: v.u = LoadElement<uint8_t>(p, k); break;
    case GgufType::kUint16: v.u = LoadElement<uint16_t>(p, k); break;
    case GgufType::kUint32: v.u = LoadElement<uint32_t>(p, k); break;
    case GgufType::kUint64: v.u = LoadElement<uint64_t>(p, k); break;
    case GgufType::kInt8: v.i = LoadElement<int8_t>(p, k); break;
    case GgufType::kInt16: v.i = LoadElement<int16_t>(p, k); break;
    case GgufType::kInt32: v.i = LoadElement<int32_t>(p, k); break;
    case GgufType::kInt64: v.i = LoadElement<int64_t>(p, k); break;
    default: break;
  }
  return v;
}

}  // namespace

std::string_view GgufTypeName(GgufType t) {
  switch (t) {
    case GgufType::kUint8: return "UINT8";
    case GgufType::kInt8: return "INT8";
    case GgufType::kUint16: return "UINT16";
    case GgufType::kInt16: return "INT16";
    case GgufType::kUint32: return "UINT32";
    case GgufType::kInt32: return "INT32";
    case GgufType::kFloat32: return "FLOAT32";
    case GgufType::kBool: return "BOOL";
    case GgufType::kString: return "STRING";
    case GgufType::kArray: return "ARRAY";
    case GgufType::kUint64: return "UINT64";
    case GgufType::kInt64: return "INT64";
    case GgufType::kFloat64: return "FLOAT64";
  }
  return "UNKNOWN";
}

const GgufValue* GgufFile::Find(std::string_view key) const {
  const auto it = kv_index_.find(key);
  return it == kv_index_.end() ? nullptr : &kvs_[it->second].value;
}

const GgufTensor* GgufFile::FindTensor(std::string_view name) const {
  const auto it = tensor_index_.find(name);
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

namespace {

std::string Describe(const GgufValue& v) {
  if (v.type != GgufType::kArray) return std::string(GgufTypeName(v.type));
  return StrCat("ARRAY of ", GgufTypeName(v.elem_type));
}

[[noreturn]] void FailType(const std::string& file, std::string_view key, const GgufValue& v,
                           std::string_view wanted) {
  Fail(file, ": metadata key '", key, "' has type ", Describe(v), ", expected ", wanted);
}

// The integer value as int64 if it is in [lo, hi]; throws naming the key otherwise.
int64_t IntInRange(const std::string& file, std::string_view key, const GgufValue& v, int64_t lo,
                   uint64_t hi, std::string_view wanted) {
  if (IsUnsigned(v.type)) {
    if (v.u > hi) Fail(file, ": metadata key '", key, "' value ", v.u, " does not fit in ", wanted);
    return static_cast<int64_t>(v.u);
  }
  if (!IsSigned(v.type)) FailType(file, key, v, wanted);
  if (v.i < lo || (v.i > 0 && static_cast<uint64_t>(v.i) > hi)) {
    Fail(file, ": metadata key '", key, "' value ", v.i, " does not fit in ", wanted);
  }
  return v.i;
}

}  // namespace

std::optional<std::string_view> GgufFile::FindString(std::string_view key) const {
  const GgufValue* v = Find(key);
  if (v == nullptr) return std::nullopt;
  if (v->type != GgufType::kString) FailType(name_, key, *v, "STRING");
  return v->str;
}

std::optional<uint32_t> GgufFile::FindU32(std::string_view key) const {
  const GgufValue* v = Find(key);
  if (v == nullptr) return std::nullopt;
  return static_cast<uint32_t>(
      IntInRange(name_, key, *v, 0, std::numeric_limits<uint32_t>::max(), "UINT32"));
}

std::optional<float> GgufFile::FindF32(std::string_view key) const {
  const GgufValue* v = Find(key);
  if (v == nullptr) return std::nullopt;
  if (!IsFloat(v->type)) FailType(name_, key, *v, "FLOAT32 or FLOAT64");
  return static_cast<float>(v->f);
}

std::optional<bool> GgufFile::FindBool(std::string_view key) const {
  const GgufValue* v = Find(key);
  if (v == nullptr) return std::nullopt;
  if (v->type != GgufType::kBool) FailType(name_, key, *v, "BOOL");
  return v->u != 0;
}

namespace {

template <typename T>
T Required(const std::optional<T>& value, const std::string& file, std::string_view key) {
  if (!value) Fail(file, ": required metadata key '", key, "' is missing");
  return *value;
}

}  // namespace

std::string_view GgufFile::GetString(std::string_view key) const {
  return Required(FindString(key), name_, key);
}

uint32_t GgufFile::GetU32(std::string_view key) const { return Required(FindU32(key), name_, key); }

int64_t GgufFile::GetI64(std::string_view key) const {
  const GgufValue* v = Find(key);
  if (v == nullptr) Fail(name_, ": required metadata key '", key, "' is missing");
  return IntInRange(name_, key, *v, std::numeric_limits<int64_t>::min(),
                    std::numeric_limits<int64_t>::max(), "INT64");
}

float GgufFile::GetF32(std::string_view key) const { return Required(FindF32(key), name_, key); }

bool GgufFile::GetBool(std::string_view key) const { return Required(FindBool(key), name_, key); }

std::vector<std::string_view> GgufFile::GetStringArray(std::string_view key) const {
  const GgufValue* v = Find(key);
  if (v == nullptr) Fail(name_, ": required metadata key '", key, "' is missing");
  if (v->type != GgufType::kArray || v->elem_type != GgufType::kString) {
    FailType(name_, key, *v, "ARRAY of STRING");
  }
  return v->strings;
}

std::vector<float> GgufFile::GetF32Array(std::string_view key) const {
  const GgufValue* v = Find(key);
  if (v == nullptr) Fail(name_, ": required metadata key '", key, "' is missing");
  if (v->type != GgufType::kArray || !IsFloat(v->elem_type)) {
    FailType(name_, key, *v, "ARRAY of FLOAT32");
  }
  std::vector<float> out(v->count);
  for (uint64_t k = 0; k < v->count; ++k) {
    out[k] = v->elem_type == GgufType::kFloat32
                 ? LoadElement<float>(v->array_data, k)
                 : static_cast<float>(LoadElement<double>(v->array_data, k));
  }
  return out;
}

std::vector<int64_t> GgufFile::GetIntArray(std::string_view key) const {
  const GgufValue* v = Find(key);
  if (v == nullptr) Fail(name_, ": required metadata key '", key, "' is missing");
  if (v->type != GgufType::kArray || !(IsSigned(v->elem_type) || IsUnsigned(v->elem_type))) {
    FailType(name_, key, *v, "ARRAY of an integer type");
  }
  std::vector<int64_t> out(v->count);
  for (uint64_t k = 0; k < v->count; ++k) {
    out[k] = IntInRange(name_, key, IntElement(*v, k), std::numeric_limits<int64_t>::min(),
                        std::numeric_limits<int64_t>::max(), "INT64");
  }
  return out;
}

}  // namespace kakeya
