"""A minimal GGUF v2/v3 reader (docs/formats/gguf.md), little-endian, and a loader of a
gemma3 GGUF into model.py's Gemma3.

Dequantizes F32, F16, BF16 and Q8_0 (blocks of 32: f16 scale d, then 32 int8 q; value = d*q)
into float32 numpy arrays shaped like the torch weights ([out, in] = reversed ggml ne).

    python3 gguf_reader.py FILE.gguf     # prints the metadata (arrays abbreviated) and tensors
    python3 gguf_reader.py FILE.gguf --checkpoint OUT.pt   # a finished train.py checkpoint
"""
import struct
import sys

import numpy as np

# gguf_type ids (docs/formats/gguf.md 1.3)
UINT8, INT8, UINT16, INT16, UINT32, INT32, FLOAT32, BOOL, STRING, ARRAY, UINT64, INT64, FLOAT64 = range(13)
_SCALAR = {UINT8: "<B", INT8: "<b", UINT16: "<H", INT16: "<h", UINT32: "<I", INT32: "<i",
           FLOAT32: "<f", BOOL: "<?", UINT64: "<Q", INT64: "<q", FLOAT64: "<d"}
_NUMPY = {UINT8: "<u1", INT8: "<i1", UINT16: "<u2", INT16: "<i2", UINT32: "<u4", INT32: "<i4",
          FLOAT32: "<f4", BOOL: "<u1", UINT64: "<u8", INT64: "<i8", FLOAT64: "<f8"}

GGML_F32, GGML_F16, GGML_Q8_0, GGML_BF16 = 0, 1, 8, 30
_BLOCK = {GGML_F32: (1, 4), GGML_F16: (1, 2), GGML_Q8_0: (32, 34), GGML_BF16: (1, 2)}


class GgufFile:
    """kv: {key: value} (arrays as lists); kv_types: {key: (type, elem_type or None)};
    tensors: {name: (ne list, ggml type, absolute file offset, n_bytes)}."""

    def __init__(self, path):
        self.path = path
        with open(path, "rb") as f:
            self.buf = f.read()
        self.pos = 0
        magic = self.buf[:4]
        if magic != b"GGUF":
            raise ValueError(f"{path}: not a GGUF file")
        self.pos = 4
        version = self._u32()
        if version not in (2, 3):
            raise ValueError(f"{path}: unsupported GGUF version {version}")
        n_tensors, n_kv = self._fmt("<Q"), self._fmt("<Q")
        self.kv, self.kv_types = {}, {}
        for _ in range(n_kv):
            key = self._str()
            vtype = self._fmt("<i")
            if vtype == ARRAY:
                etype, count = self._fmt("<i"), self._fmt("<Q")
                self.kv[key] = self._array(etype, count)
                self.kv_types[key] = (ARRAY, etype)
            else:
                self.kv[key] = self._value(vtype)
                self.kv_types[key] = (vtype, None)
        infos = []
        for _ in range(n_tensors):
            name = self._str()
            n_dims = self._u32()
            ne = [self._fmt("<Q") for _ in range(n_dims)]
            ttype, offset = self._fmt("<i"), self._fmt("<Q")
            infos.append((name, ne, ttype, offset))
        alignment = int(self.kv.get("general.alignment", 32))
        data_start = (self.pos + alignment - 1) // alignment * alignment
        self.tensors = {}
        for name, ne, ttype, offset in infos:
            if ttype not in _BLOCK:
                raise ValueError(f"{path}: tensor {name} has unsupported type {ttype}")
            blk, size = _BLOCK[ttype]
            n = int(np.prod(ne))
            self.tensors[name] = (ne, ttype, data_start + offset, n // blk * size)

    def _fmt(self, fmt):
        (v,) = struct.unpack_from(fmt, self.buf, self.pos)
        self.pos += struct.calcsize(fmt)
        return v

    def _u32(self):
        return self._fmt("<I")

    def _str(self):
        n = self._fmt("<Q")
        s = self.buf[self.pos:self.pos + n].decode("utf-8", errors="replace")
        self.pos += n
        return s

    def _value(self, vtype):
        if vtype == STRING:
            return self._str()
        return self._fmt(_SCALAR[vtype])

    def _array(self, etype, count):
        if etype == STRING:
            return [self._str() for _ in range(count)]
        if etype == ARRAY:
            raise ValueError("nested GGUF arrays are not supported")
        a = np.frombuffer(self.buf, dtype=_NUMPY[etype], count=count, offset=self.pos)
        self.pos += a.nbytes
        return [bool(x) for x in a] if etype == BOOL else a.tolist()

    def tensor(self, name):
        """float32 numpy array, shape = reversed ne (torch layout)."""
        ne, ttype, start, nbytes = self.tensors[name]
        raw = self.buf[start:start + nbytes]
        shape = tuple(reversed(ne))
        if ttype == GGML_F32:
            a = np.frombuffer(raw, dtype="<f4")
        elif ttype == GGML_F16:
            a = np.frombuffer(raw, dtype="<f2").astype(np.float32)
        elif ttype == GGML_BF16:
            a = (np.frombuffer(raw, dtype="<u2").astype(np.uint32) << 16).view(np.float32)
        else:  # Q8_0
            blocks = np.frombuffer(raw, dtype=[("d", "<f2"), ("qs", "i1", 32)])
            a = blocks["d"].astype(np.float32)[:, None] * blocks["qs"].astype(np.float32)
        return np.array(a, dtype=np.float32).reshape(shape)


def gemma3_config(g, n_layer=None):
    """model.Config from the gemma3.* keys of a GGUF file."""
    from model import Config
    p = g.kv["general.architecture"] + "."
    n_vocab = len(g.kv["tokenizer.ggml.tokens"]) if "tokenizer.ggml.tokens" in g.kv else \
        g.tensors["token_embd.weight"][0][1]
    return Config(
        n_vocab=n_vocab,
        n_embd=g.kv[p + "embedding_length"],
        n_layer=n_layer if n_layer is not None else g.kv[p + "block_count"] - g.kv.get(p + "nextn_predict_layers", 0),
        n_head=g.kv[p + "attention.head_count"],
        n_head_kv=g.kv[p + "attention.head_count_kv"],
        head_dim=g.kv[p + "attention.key_length"],
        n_ff=g.kv[p + "feed_forward_length"],
        n_ctx=g.kv[p + "context_length"],
        sliding_window=g.kv[p + "attention.sliding_window"],
        swa_period=g.kv[p + "attention.sliding_window_pattern"],
        rope_base=g.kv[p + "rope.freq_base"],
        rope_base_swa=g.kv[p + "rope.freq_base_swa"],
        norm_eps=g.kv[p + "attention.layer_norm_rms_epsilon"],
    )


def load_gemma3(path):
    """The gemma3 GGUF at path as a float32 model.Gemma3 (eval mode) and the GgufFile.
    Tensor names are export_gguf.py's, inverted."""
    import torch
    import export_gguf
    from model import Gemma3
    g = GgufFile(path)
    if g.kv.get("general.architecture") != "gemma3":
        raise ValueError(f"{path}: not a gemma3 file")
    model = Gemma3(gemma3_config(g))
    state = {}
    for torch_name in model.state_dict():
        state[torch_name] = torch.from_numpy(g.tensor(export_gguf.gguf_tensor_name(torch_name)))
    model.load_state_dict(state)
    return model.eval(), g


def to_checkpoint(path, out):
    """A gemma3 GGUF as a finished train.py checkpoint (config + dequantized weights, no optimizer):
    train.py skips training for it and goes on to export and verification."""
    import torch
    model, _ = load_gemma3(path)
    torch.save({"config": model.cfg.to_dict(), "model": model.state_dict(), "optim": None, "step": 1, "total": 1,
                "best": None}, out)


def main():
    if len(sys.argv) == 4 and sys.argv[2] == "--checkpoint":  # gguf_reader.py FILE.gguf --checkpoint OUT.pt
        return to_checkpoint(sys.argv[1], sys.argv[3])
    g = GgufFile(sys.argv[1])
    for k, v in g.kv.items():
        if isinstance(v, list) and len(v) > 12:
            v = f"[{len(v)} items: {v[:5]} ...]"
        print(f"{k} = {v}")
    for name, (ne, ttype, _, nbytes) in g.tensors.items():
        print(f"  {name} {tuple(ne)} type {ttype} {nbytes} bytes")


if __name__ == "__main__":
    main()
