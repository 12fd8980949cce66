"""A minimal GGUF v3 writer (docs/formats/gguf.md), little-endian.

gguf-py is not packaged for Debian, and the format is small enough that writing it
directly is clearer than vendoring it. Only what the export needs is supported:
scalar and array metadata (no nested arrays: llama.cpp's reader rejects them) and
F32 / F16 tensors.
"""
import struct

import numpy as np

GGUF_MAGIC = b"GGUF"
GGUF_VERSION = 3
ALIGNMENT = 32  # default general.alignment; we do not write the key

# gguf_type ids (docs/formats/gguf.md 1.3)
UINT8, INT8, UINT16, INT16, UINT32, INT32, FLOAT32, BOOL, STRING, ARRAY, UINT64, INT64, FLOAT64 = range(13)

# ggml_type ids (docs/formats/gguf.md 1.7)
GGML_F32, GGML_F16, GGML_Q8_0 = 0, 1, 8


def quantize_q8_0(array):
    """ggml's reference Q8_0 (docs/formats/quantization.md 2.2): per 32 values, d = amax / 127 stored as F16,
    q = round-half-away(x / d) with 1/d in float32, as quantize_row_q8_0_ref computes it."""
    x = np.ascontiguousarray(array, dtype=np.float32).reshape(-1, 32)
    amax = np.abs(x).max(axis=1)
    d = (amax / np.float32(127)).astype(np.float32)
    inv = np.divide(np.float32(1), d, out=np.zeros_like(d), where=d != 0).astype(np.float32)
    v = (x * inv[:, None]).astype(np.float32)
    q = (np.sign(v) * np.floor(np.abs(v) + np.float32(0.5))).astype(np.int8)
    blocks = np.zeros(len(x), dtype=[("d", "<f2"), ("qs", "i1", 32)])
    blocks["d"] = d.astype(np.float16)
    blocks["qs"] = q
    return blocks.tobytes()

_SCALAR_FORMAT = {
    UINT8: "<B", INT8: "<b", UINT16: "<H", INT16: "<h", UINT32: "<I", INT32: "<i",
    FLOAT32: "<f", BOOL: "<?", UINT64: "<Q", INT64: "<q", FLOAT64: "<d",
}


def _string(s):
    data = s.encode("utf-8")
    return struct.pack("<Q", len(data)) + data


def _value(vtype, value):
    if vtype == STRING:
        return _string(value)
    return struct.pack(_SCALAR_FORMAT[vtype], value)


def _align(n):
    return (n + ALIGNMENT - 1) // ALIGNMENT * ALIGNMENT


class GgufWriter:
    """Collects metadata and tensors, then writes the file in one pass."""

    def __init__(self):
        self._kv = []       # (key, encoded type + value)
        self._tensors = []  # (name, ne list, ggml type, bytes)

    def add(self, key, vtype, value):
        self._kv.append((key, struct.pack("<i", vtype) + _value(vtype, value)))

    def add_array(self, key, elem_type, values):
        body = b"".join(_value(elem_type, v) for v in values)
        header = struct.pack("<iiQ", ARRAY, elem_type, len(values))
        self._kv.append((key, header + body))

    def add_tensor(self, name, array, ggml_type):
        """array: a row-major numpy array shaped like the torch weight ([out, in]).

        GGUF lists dimensions fastest-varying first, so ne is the reversed shape and
        the bytes are the row-major array as is (docs/formats/gguf.md 1.4).
        """
        assert len(name.encode()) < 64, name
        if ggml_type == GGML_Q8_0:
            assert array.shape[-1] % 32 == 0, (name, array.shape)
            data = quantize_q8_0(array)
        else:
            dtype = np.float32 if ggml_type == GGML_F32 else np.float16
            data = np.ascontiguousarray(array, dtype=dtype).tobytes()
        self._tensors.append((name, list(reversed(array.shape)), ggml_type, data))

    def write(self, path):
        keys = [k for k, _ in self._kv]
        assert len(keys) == len(set(keys)), "duplicate metadata key"
        out = bytearray()
        out += GGUF_MAGIC + struct.pack("<IQQ", GGUF_VERSION, len(self._tensors), len(self._kv))
        for key, encoded in self._kv:
            out += _string(key) + encoded
        # llama.cpp requires offsets to be sequential, each tensor padded to the alignment.
        offset = 0
        for name, ne, ggml_type, data in self._tensors:
            out += _string(name) + struct.pack("<I", len(ne))
            out += struct.pack(f"<{len(ne)}Q", *ne)
            out += struct.pack("<iQ", ggml_type, offset)
            offset += _align(len(data))
        if self._tensors:
            out += b"\0" * (_align(len(out)) - len(out))
        with open(path, "wb") as f:
            f.write(out)
            for _, _, _, data in self._tensors:
                f.write(data)
                f.write(b"\0" * (_align(len(data)) - len(data)))
