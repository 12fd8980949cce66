#!/usr/bin/env bash
# Writes tests/fixtures/tokenizer/ggml-vocab-deepseek-v3.gguf{.inp,.out}, the
# fixture of the deepseek-v3 pre-tokenizer (see that directory's README.md):
# llama.cpp's models/ has no vocabulary for it, so this is
# ggml-vocab-llama-bpe.gguf with only tokenizer.ggml.pre changed (written by
# our GGUF writer), the 46 shared texts plus 14 of its own, and the ids the
# reference engine, llama.cpp, gives for them (scripts/dump-reference-tokens.sh).
#
#   scripts/make-tokenizer-fixture.sh
#
# Why llama-bpe's vocabulary: with deepseek-coder's, llama.cpp gives the same
# ids for all 46 texts whether the pre-tokenizer is deepseek-v3, deepseek-coder,
# qwen2 or llama-bpe (its merges never cross the places where those split
# differently), so the fixture would not tell them apart. llama-bpe's 128k
# vocabulary, which like DeepSeek-V3's has merges of 3-digit groups and of
# punctuation with letters, tells deepseek-v3 apart from every other
# byte-level pre-tokenizer we support.
#
# Needs our build (build/, the kakeya_gguf library) and the reference built by
# scripts/compare-reference.sh.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
dir=$repo/tests/fixtures/tokenizer
build=$repo/build
from=$dir/ggml-vocab-llama-bpe.gguf
to=$dir/ggml-vocab-deepseek-v3.gguf  # .inp and .out only: the test writes the .gguf itself
[ -f "$build/libkakeya_gguf.a" ] || { echo "make-tokenizer-fixture.sh: build kakeya first (scripts/build.sh)" >&2; exit 1; }

scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
cat > "$scratch/set_pre.cc" <<'CC'
#include <cstdio>
#include <string>

#include "gguf_copy.h"

int main(int argc, char** argv) {
  if (argc != 4) return 2;
  const std::string pre = argv[3];
  bool found = false;
  kakeya::WriteEditedCopy(
      argv[1], argv[2],
      [&](kakeya::GgufWriter& w, const kakeya::GgufKv& kv) {
        if (kv.key != "tokenizer.ggml.pre") return false;
        w.SetString(kv.key, pre);
        found = true;
        return true;
      },
      nullptr);
  if (!found) std::fprintf(stderr, "set_pre: %s has no tokenizer.ggml.pre\n", argv[1]);
  return found ? 0 : 1;
}
CC
g++ -O2 -std=c++20 -o "$scratch/set_pre" "$scratch/set_pre.cc" -I"$repo/src" -I"$repo/tests" \
    "$build/libkakeya_gguf.a" "$build/libkakeya_tensor.a" "$build/libkakeya_base.a" -pthread
"$scratch/set_pre" "$from" "$scratch/vocab.gguf" deepseek-v3

# The extra texts aim at what sets deepseek-v3 apart: 3-digit groups, Han and
# kana split from other letters, combining marks kept with their letters (NFD
# Vietnamese and Latin, Devanagari, Thai, Arabic), ASCII punctuation glued to
# ASCII letters, non-ASCII punctuation and symbols before letters, newline and
# whitespace runs. No code point is newer than Unicode 14: PCRE2 10.42 would
# see it as unassigned where llama.cpp's tables know its category.
python3 - "$from.inp" "$to.inp" <<'PY'
import sys
extra = [
    "1234567 89 1,000,000 3.14159 0x1F2E3D 2024-12-31 \u0661\u0662\u0663\u0664\u0665 \u00bd\u00b2",
    "東京タワーはTokyo Towerです。ひらがなとカタカナと漢字、中文句子。",
    "한국어 텍스트와English가 섞인 문장",
    "Tie\u0302\u0301ng Vie\u0323\u0302t co\u0301 da\u0302\u0301u: ngu\u031bo\u031b\u0300i, "
    "đu\u031bo\u031b\u0323c, nhu\u031b\u0303ng",
    "nai\u0308ve cafe\u0301 Zu\u0308rich",
    "हिन्दी भाषा में लिखा गया वाक्य",
    "ภาษาไทยมีสระและวรรณยุกต์",
    "كتابٌ عَرَبِيٌّ",
    "x+=1; y->z && a||b $var @decorator #include <stdio.h>\n\tif (a) {\n\t\treturn b;\n\t}\n",
    "foo.bar(baz) 'tis it's DON'T ._private /usr/bin __init__",
    "\u201cHello,\u201d she said\u2014\u00bfQu\u00e9? \u00a1Hola! \u00abBonjour\u00bb \u00a9Meta \u00d7times",
    "line one\n\n\nline two\r\n\tindented\t(paren)\n  \n a\u00a0b\u3000c  \u2003 d\u202fe",
    "价格：¥100，折扣20%！（含税）",
    "emoji\U0001F44D\U0001F3FD test\u2728and\U0001F389 \u2122\u00a9\u00ae",
]
shared = open(sys.argv[1], encoding="utf-8", newline="").read()
with open(sys.argv[2], "w", encoding="utf-8", newline="") as out:
    out.write(shared + "".join(text + "\n__ggml_vocab_test__\n" for text in extra))
PY

"$repo/scripts/dump-reference-tokens.sh" "$scratch/vocab.gguf" "$to.inp" "$to.out"
echo "wrote $to{.inp,.out}"
