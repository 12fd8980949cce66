#!/usr/bin/env bash
# Builds a libFuzzer target with clang (build-fuzz/) and runs it for SECONDS
# (default 60) from a seed corpus:
#   gguf    the GGUF reader; seeds: small fixtures and hand-made files
#   jinja   the chat-template engine; seeds: the real templates of
#           tests/data/chat_templates
# Exits non-zero if the fuzzer finds a crash; the input is left in
# build-fuzz/artifacts/.
#
#   scripts/fuzz.sh gguf|jinja [SECONDS]
set -euo pipefail

target="${1:?usage: scripts/fuzz.sh gguf|jinja [SECONDS]}"
seconds="${2:-60}"
root="$(cd "$(dirname "$0")/.." && pwd)"
build="$root/build-fuzz"
fixtures="$root/tests/fixtures"
case "$target" in
  gguf|jinja) ;;
  *) echo "scripts/fuzz.sh: unknown target '$target' (gguf or jinja)" >&2; exit 2 ;;
esac

CXX=clang++ cmake -S "$root" -B "$build" -G Ninja -DKAKEYA_FUZZ=ON -DKAKEYA_TESTS=OFF \
  -DKAKEYA_BENCH=OFF >/dev/null
cmake --build "$build" --target "${target}_fuzz"

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
corpus="$work/corpus"
mkdir -p "$corpus" "$build/artifacts"

if [ "$target" = jinja ]; then
  cp "$root"/tests/data/chat_templates/*.jinja "$corpus/"
  exec "$build/bin/jinja_fuzz" "$corpus" -dict="$root/fuzz/jinja.dict" -max_len=16384 -timeout=10 \
    -max_total_time="$seconds" -print_final_stats=1 -artifact_prefix="$build/artifacts/"
fi

# Small fixtures only: libFuzzer cuts inputs to -max_len, and the big
# vocabularies would only seed their first 64 KiB of strings.
cp "$fixtures/tokenizer/ggml-vocab-llama-spm-8000.gguf" \
   "$fixtures/models/tiny-draft-f32.gguf" \
   "$fixtures/models/tiny-llama-q4_0.gguf" "$corpus/"

# The fixtures' metadata alone exceeds 64 KiB, so add small complete files that
# reach the tensor infos and data: every value type, three tensor types, v2
# and v3, default and custom alignment.
python3 - "$corpus" <<'PY'
import struct, sys

def string(s):
    b = s.encode()
    return struct.pack("<Q", len(b)) + b

def kv(key, type_id, payload):
    return string(key) + struct.pack("<I", type_id) + payload

def gguf(version, alignment, kvs, tensors):
    out = b"GGUF" + struct.pack("<Iqq", version, len(tensors), len(kvs)) + b"".join(kvs)
    offset, blobs = 0, []
    for name, ne, type_id, data in tensors:
        out += string(name) + struct.pack("<I", len(ne)) + struct.pack(f"<{len(ne)}q", *ne)
        out += struct.pack("<IQ", type_id, offset)
        padded = data + b"\0" * (-len(data) % alignment)
        blobs.append(padded)
        offset += len(padded)
    out += b"\0" * (-len(out) % alignment)
    return out + b"".join(blobs)

scalars = [
    kv("general.architecture", 8, string("llama")),
    kv("u8", 0, struct.pack("<B", 7)), kv("i8", 1, struct.pack("<b", -7)),
    kv("u16", 2, struct.pack("<H", 700)), kv("i16", 3, struct.pack("<h", -700)),
    kv("u32", 4, struct.pack("<I", 70000)), kv("i32", 5, struct.pack("<i", -70000)),
    kv("f32", 6, struct.pack("<f", 1.5)), kv("bool", 7, b"\1"),
    kv("u64", 10, struct.pack("<Q", 1 << 40)), kv("i64", 11, struct.pack("<q", -(1 << 40))),
    kv("f64", 12, struct.pack("<d", 0.25)),
    kv("tokens", 9, struct.pack("<IQ", 8, 3) + string("a") + string("") + string("bc")),
    kv("scores", 9, struct.pack("<IQ", 6, 2) + struct.pack("<2f", 0.5, -1)),
]
tensors = [
    ("token_embd.weight", [4, 2], 0, bytes(range(32))),
    ("blk.0.attn_q.weight", [32, 1], 8, bytes(34)),
    ("output_norm.weight", [4], 1, bytes(8)),
]
seeds = {
    "v3.gguf": gguf(3, 32, scalars, tensors),
    "v2.gguf": gguf(2, 32, scalars[:3], tensors[:1]),
    "align64.gguf": gguf(3, 64, [kv("general.alignment", 4, struct.pack("<I", 64))], tensors),
}
for name, data in seeds.items():
    open(f"{sys.argv[1]}/{name}", "wb").write(data)
PY

"$build/bin/gguf_fuzz" "$corpus" -dict="$root/fuzz/gguf.dict" -max_len=65536 \
  -max_total_time="$seconds" -print_final_stats=1 -artifact_prefix="$build/artifacts/"
