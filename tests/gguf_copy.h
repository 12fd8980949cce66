// Copies a GGUF file's metadata into a writer, so tests can make variants of
// the fixtures with one key changed.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "gguf/gguf.h"

namespace kakeya {

// Called for every key first; returns true when it wrote (or dropped) the key itself.
using MetadataEdit = std::function<bool(GgufWriter&, const GgufKv&)>;

// The edit that gives `key` (present in the file) another U32 value.
inline MetadataEdit SetU32(const std::string& key, uint32_t value) {
  return [=](GgufWriter& w, const GgufKv& kv) {
    if (kv.key != key) return false;
    w.SetU32(key, value);
    return true;
  };
}

// The edit that gives `key` (present in the file) another string value.
inline MetadataEdit SetString(const std::string& key, std::string value) {
  return [=](GgufWriter& w, const GgufKv& kv) {
    if (kv.key != key) return false;
    w.SetString(key, value);
    return true;
  };
}

// The edit that gives `key` (present in the file) another I32 array.
inline MetadataEdit SetI32Array(const std::string& key, std::vector<int32_t> values) {
  return [=](GgufWriter& w, const GgufKv& kv) {
    if (kv.key != key) return false;
    w.SetI32Array(key, values);
    return true;
  };
}

inline void CopyMetadata(const GgufFile& src, GgufWriter& w, const MetadataEdit& edit) {
  for (const GgufKv& kv : src.metadata()) {
    if (edit && edit(w, kv)) continue;
    w.SetValue(kv.key, kv.value);
  }
}

// Called for every tensor first; returns true when it wrote (or dropped) the tensor itself.
using TensorEdit = std::function<bool(GgufWriter&, const GgufTensor&)>;

inline void CopyTensors(const GgufFile& src, GgufWriter& w, const TensorEdit& edit) {
  for (const GgufTensor& t : src.tensors()) {
    if (edit && edit(w, t)) continue;
    w.AddTensor(t.name, t.type, std::vector<int64_t>(t.ne, t.ne + t.n_dims), t.data, t.nbytes);
  }
}

// `src` with its metadata and tensors edited, written to `path`.
inline void WriteEditedCopy(const std::string& src, const std::string& path, const MetadataEdit& edit_metadata,
                            const TensorEdit& edit_tensors) {
  const std::unique_ptr<GgufFile> in = GgufFile::Open(src);
  GgufWriter w;
  CopyMetadata(*in, w, edit_metadata);
  CopyTensors(*in, w, edit_tensors);
  w.Write(path);
}

}  // namespace kakeya
