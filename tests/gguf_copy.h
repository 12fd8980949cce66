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

inline void CopyMetadata(const GgufFile& src, GgufWriter& w, const MetadataEdit& edit) {
  for (const GgufKv& kv : src.metadata()) {
    if (edit && edit(w, kv)) continue;
    const GgufValue& v = kv.value;
    switch (v.type) {
      case GgufType::kUint8: w.SetU8(kv.key, v.u); break;
      case GgufType::kInt8: w.SetI8(kv.key, v.i); break;
      case GgufType::kUint16: w.SetU16(kv.key, v.u); break;
      case GgufType::kInt16: w.SetI16(kv.key, v.i); break;
      case GgufType::kUint32: w.SetU32(kv.key, v.u); break;
      case GgufType::kInt32: w.SetI32(kv.key, v.i); break;
      case GgufType::kUint64: w.SetU64(kv.key, v.u); break;
      case GgufType::kInt64: w.SetI64(kv.key, v.i); break;
      case GgufType::kFloat32: w.SetF32(kv.key, v.f); break;
      case GgufType::kFloat64: w.SetF64(kv.key, v.f); break;
      case GgufType::kBool: w.SetBool(kv.key, v.u != 0); break;
      case GgufType::kString: w.SetString(kv.key, std::string(v.str)); break;
      case GgufType::kArray:
        if (v.elem_type == GgufType::kString) {
          w.SetStringArray(kv.key, std::vector<std::string>(v.strings.begin(), v.strings.end()));
        } else {
          w.SetArray(kv.key, v.elem_type, v.array_data, v.count);
        }
        break;
    }
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
