#!/usr/bin/env bash
# Builds a libFuzzer target with clang (build-fuzz/) and runs it for SECONDS
# (default 60) from a seed corpus:
#   gguf    the GGUF reader; seeds: small fixtures and hand-made files
#   jinja   the chat-template engine; seeds: the real templates of
#           tests/data/chat_templates
#   tokenizer  the tokenizers of every vocabulary type; seeds: the texts of
#           llama.cpp's tokenizer tests (tests/fixtures/tokenizer/*.inp)
#   grammar GBNF grammars and JSON schemas (constrained decoding), each driving
#           a matcher with the bytes after a 0 byte; seeds: the grammars and
#           schemas below
#   request the server's request bodies (/v1/completions, /v1/chat/completions),
#           chat messages rendered by real templates; seeds: the request
#           examples below and the conversations of tests/data/chat_templates
# Exits non-zero if the fuzzer finds a crash; the input is left in
# build-fuzz/artifacts/.
#
#   scripts/fuzz.sh gguf|jinja|tokenizer|grammar|request [SECONDS]
set -euo pipefail

target="${1:?usage: scripts/fuzz.sh gguf|jinja|tokenizer|grammar|request [SECONDS]}"
seconds="${2:-60}"
root="$(cd "$(dirname "$0")/.." && pwd)"
build="$root/build-fuzz"
fixtures="$root/tests/fixtures"
case "$target" in
  gguf|jinja|tokenizer|grammar|request) ;;
  *) echo "scripts/fuzz.sh: unknown target '$target' (gguf, jinja, tokenizer, grammar or request)" >&2; exit 2 ;;
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

if [ "$target" = tokenizer ]; then
  # Each test text once per vocabulary (the first byte picks it: tokenizer_fuzz.cc).
  python3 - "$fixtures/tokenizer" "$corpus" <<'PY'
import glob, os, sys
texts = set()
for path in glob.glob(os.path.join(sys.argv[1], "*.inp")):
    with open(path, "rb") as f:
        texts.update(f.read().split(b"\n__ggml_vocab_test__\n"))
for v in range(9):
    for n, t in enumerate(sorted(texts)):
        open(os.path.join(sys.argv[2], f"{v}-{n}"), "wb").write(bytes([v]) + t)
PY
  exec "$build/bin/tokenizer_fuzz" "$corpus" -max_len=4096 -timeout=10 -rss_limit_mb=4096 \
    -max_total_time="$seconds" -print_final_stats=1 -artifact_prefix="$build/artifacts/"
fi

if [ "$target" = grammar ]; then
  python3 - "$corpus" <<'PY'
import json, os, sys
seeds = [
    b'root ::= "a" ("b" | "c")* "a"\0abba',
    b'root ::= (expr "=" ws term "\\n")+\nexpr ::= term ([-+*/] term)*\nterm ::= [0-9]+ | "(" expr ")"\nws ::= [ ]*\0(1+2)= 3\n',
    b'root ::= "\xc3\xa9" [\\u03b1-\\u03c9]{1,3} .? [^a-z]\0\xc3\xa9\xce\xbb!',
    b'# comment\nroot ::= x{2,4} y?\nx ::= "ab" | [0-9]\ny ::= "\\x41"+\0ab12AA',
    b'root ::= "a" root "b" | ""\0aaabbb',
]
schemas = [
    {"type": "object", "properties": {"name": {"type": "string", "maxLength": 8},
     "age": {"type": "integer", "minimum": -5, "maximum": 150}}, "required": ["name"]},
    {"type": "array", "prefixItems": [{"enum": ["a", 1, None]}], "items": {"type": "number"}, "maxItems": 3},
    {"$defs": {"n": {"type": "object", "properties": {"c": {"type": "array", "items": {"$ref": "#/$defs/n"}}}}},
     "$ref": "#/$defs/n", "additionalProperties": True},
    {"type": "string", "pattern": "^(?:[A-Z]{2}|x+)-\\d{3}$"},
    {"anyOf": [{"type": "boolean"}, {"const": {"k": [1]}}], "title": "t"},
]
for n, s in enumerate(seeds):
    open(os.path.join(sys.argv[1], f"g{n}"), "wb").write(s)
for n, s in enumerate(schemas):
    open(os.path.join(sys.argv[1], f"s{n}"), "wb").write(json.dumps(s).encode() + b'\0{"name": "x", "age": 7}')
PY
  exec "$build/bin/grammar_fuzz" "$corpus" -dict="$root/fuzz/grammar.dict" -max_len=4096 -timeout=10 \
    -rss_limit_mb=4096 -max_total_time="$seconds" -print_final_stats=1 -artifact_prefix="$build/artifacts/"
fi

if [ "$target" = request ]; then
  # The first byte: bit 0 picks chat (1) or completions (0), the next bits the template.
  python3 - "$root/tests/data/chat_templates/conversations.json" "$corpus" <<'PY'
import json, os, sys
completions = [
    {"prompt": "def f(", "max_tokens": 16, "temperature": 0},
    {"model": "kakeya", "prompt": [1, 2, 3], "stream": True, "stream_options": {"include_usage": True},
     "logprobs": 2, "stop": ["\n\n", "def"], "seed": 7},
    {"prompt": ["text"], "top_k": 40, "top_p": 0.95, "min_p": 0.05, "repeat_penalty": 1.1, "repeat_last_n": 64,
     "presence_penalty": 0.5, "frequency_penalty": 0.5, "dry_multiplier": 0.8, "dry_base": 1.75,
     "dry_allowed_length": 2, "dry_penalty_last_n": -1, "dry_sequence_breakers": ["\n", ":"],
     "n": 1, "best_of": 1, "echo": False, "suffix": "", "logit_bias": {}, "max_completion_tokens": 8},
]
chats = [{"messages": c["messages"]} for c in json.load(open(sys.argv[1]))["conversations"]] + [
    {"messages": [{"role": "developer", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]},
                  {"role": "user", "content": "hi", "name": "x"}],
     "logprobs": True, "top_logprobs": 3, "response_format": {"type": "text"}, "tools": [], "stream": True},
]
n = 0
for first, bodies in ((0, completions), (1, chats), (3, chats), (5, chats)):
    for b in bodies:
        open(os.path.join(sys.argv[2], f"seed{n}"), "wb").write(bytes([first]) + json.dumps(b).encode())
        n += 1
PY
  exec "$build/bin/request_fuzz" "$corpus" -dict="$root/fuzz/request.dict" -max_len=8192 -timeout=10 \
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
