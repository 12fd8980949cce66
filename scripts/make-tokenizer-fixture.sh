#!/usr/bin/env bash
# Writes the tokenizer fixtures of tests/fixtures/tokenizer/ that the reference
# engine, llama.cpp, computes for vocabularies we derive from the shipped ones
# (see that directory's README.md):
#
# * ggml-vocab-deepseek-v3.gguf{.inp,.out}, the fixture of the deepseek-v3
#   pre-tokenizer: llama.cpp's models/ has no vocabulary for it, so this is
#   ggml-vocab-llama-bpe.gguf with only tokenizer.ggml.pre changed (written by
#   our GGUF writer), the 46 shared texts plus 14 of its own;
# * ggml-vocab-qwen35.gguf{.inp,.out}, the fixture of the qwen35 pre-tokenizer:
#   ggml-vocab-qwen2.gguf with only tokenizer.ggml.pre changed, as llama.cpp's
#   own ggml-vocab-qwen35.gguf is; the .inp is llama.cpp's (the 46 shared texts
#   and 4 with combining marks), copied from the reference's models/;
# * special-tokens.inp, texts holding special and user-defined tokens' text,
#   and the ids of qwen2 and qwen35 for them with parse-special off
#   (ggml-vocab-X.gguf.special-tokens.out) and on
#   (ggml-vocab-X.gguf.special-tokens.parse-special.out);
#
# all ids by scripts/dump-reference-tokens.sh.
#
#   scripts/make-tokenizer-fixture.sh
#
# Why llama-bpe's vocabulary for deepseek-v3: with deepseek-coder's, llama.cpp
# gives the same ids for all 46 texts whether the pre-tokenizer is deepseek-v3,
# deepseek-coder, qwen2 or llama-bpe (its merges never cross the places where
# those split differently), so the fixture would not tell them apart.
# llama-bpe's 128k vocabulary, which like DeepSeek-V3's has merges of 3-digit
# groups and of punctuation with letters, tells deepseek-v3 apart from every
# other byte-level pre-tokenizer we support.
#
# Needs our build ($KAKEYA_BUILD, default build/: the kakeya_gguf library) and
# the reference built by scripts/compare-reference.sh.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
dir=$repo/tests/fixtures/tokenizer
build=${KAKEYA_BUILD:-$repo/build}
models=${KAKEYA_REF_DIR:-$HOME/.cache/kakeya-reference}/llama.cpp/models
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
# Only .inp and .out are kept: the test writes each vocabulary itself.
"$scratch/set_pre" "$dir/ggml-vocab-llama-bpe.gguf" "$scratch/deepseek-v3.gguf" deepseek-v3
"$scratch/set_pre" "$dir/ggml-vocab-qwen2.gguf" "$scratch/ggml-vocab-qwen35.gguf" qwen35

# The extra texts aim at what sets deepseek-v3 apart: 3-digit groups, Han and
# kana split from other letters, combining marks kept with their letters (NFD
# Vietnamese and Latin, Devanagari, Thai, Arabic), ASCII punctuation glued to
# ASCII letters, non-ASCII punctuation and symbols before letters, newline and
# whitespace runs. No code point is newer than Unicode 14: PCRE2 10.42 would
# see it as unassigned where llama.cpp's tables know its category.
python3 - "$dir/ggml-vocab-llama-bpe.gguf.inp" "$dir/ggml-vocab-deepseek-v3.gguf.inp" <<'PY'
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

"$repo/scripts/dump-reference-tokens.sh" "$scratch/deepseek-v3.gguf" "$dir/ggml-vocab-deepseek-v3.gguf.inp" \
    "$dir/ggml-vocab-deepseek-v3.gguf.out"

cp "$models/ggml-vocab-qwen35.gguf.inp" "$dir/ggml-vocab-qwen35.gguf.inp"
"$repo/scripts/dump-reference-tokens.sh" "$scratch/ggml-vocab-qwen35.gguf" "$dir/ggml-vocab-qwen35.gguf.inp" \
    "$dir/ggml-vocab-qwen35.gguf.out"

# Special-token text as users write it: chat markup, the qwen2 vocabulary's
# CONTROL tokens (<|endoftext|>, <|im_start|>, <|im_end|>), its USER_DEFINED
# padding tokens ([PAD151646]...), texts that are NORMAL tokens there but that
# llama.cpp forces to CONTROL (</s>), texts of other models' special tokens
# that are no token here (<think>, [INST], <|eot_id|>), near misses, all next
# to spaces, newlines, apostrophes, combining marks (NFD), digits, CJK, emoji
# and scripts whose vowel signs are combining marks (what qwen35 keeps with
# the letters). No code point is newer than Unicode 14 (see the note above).
python3 - "$dir/special-tokens.inp" <<'PY'
import sys
texts = [
    "<|endoftext|> <s> </s> [INST] special-looking text",
    "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\nHello!<|im_end|>\n"
    "<|im_start|>assistant\n",
    "<think>\nLet me add 12345 and 678.\n</think>\n\nThe answer is 13023.",
    "</s></s>  </s>\n</s>x<s>y",
    "[INST] What is 2+2? [/INST] 4</s>",
    "  <|endoftext|>  \n\n<|im_end|>\t<|im_start|> ",
    "[PAD151650][PAD151646] [PAD151935]x",
    "<|endoftext|><|endoftext|>",
    "<<|im_end|>> <|<|endoftext|>|> <|im_start| <|endoftext",
    "<s>[INST] <<SYS>>\nBe brief.\n<</SYS>>\n\nHi [/INST]",
    "<unk> <pad> <mask> <eos> <|eot_id|>",
    "\n\n</s>\n\n",
    "it's</s>'s <s>'ll DON'T</s>",
    "cafe\u0301 re\u0301sume\u0301 e\u0301 <s>e\u0301</s> Zu\u0308rich",
    "\u0301 a\u0308\u0301! ?\u0301 .\u0300x \u0301\u0302\u0303",
    "Tie\u0302\u0301ng Vie\u0323\u0302t</s>ngu\u031bo\u031b\u0300i",
    "12345 3.14159 1,000,000 \uff10\uff11\uff12 \u0661\u0662\u0663 </s>2024",
    "\u4f60\u597d\uff0c\u4e16\u754c\uff01<|im_end|>\u3053\u3093\u306b\u3061\u306f "
    "\uc548\ub155\ud558\uc138\uc694</s>",
    "\U0001F44D\U0001F3FD \U0001F389<|endoftext|>\U0001F468\u200d\U0001F469\u200d\U0001F467 "
    "\u2728</s>\U0001F600",
    "<|im_start|>user\n\u0928\u092e\u0938\u094d\u0924\u0947 \u0e2a\u0e27\u0e31\u0e2a\u0e14\u0e35 "
    "\u0645\u0631\u062d\u0628\u064b\u0627<|im_end|>",
    "\u0939\u093f\u0928\u094d\u0926\u0940 \u092d\u093e\u0937\u093e \u092e\u0947\u0902 "
    "\u0932\u093f\u0916\u093e \u0917\u092f\u093e \u0935\u093e\u0915\u094d\u092f</s>",
    "\u0e20\u0e32\u0e29\u0e32\u0e44\u0e17\u0e22\u0e21\u0e35\u0e2a\u0e23\u0e30"
    "\u0e41\u0e25\u0e30\u0e27\u0e23\u0e23\u0e13\u0e22\u0e38\u0e01\u0e15\u0e4c<|endoftext|>",
    "\u0643\u062a\u0627\u0628\u064c \u0639\u064e\u0631\u064e\u0628\u0650\u064a\u064c\u0651 "
    "\u05e9\u05c1\u05b8\u05dc\u05d5\u05b9\u05dd <s>",
    "\u09ac\u09be\u0982\u09b2\u09be \u0ba4\u0bae\u0bbf\u0bb4\u0bcd \u0c24\u0c46\u0c32\u0c41\u0c17\u0c41"
    " \u1019\u103c\u1014\u103a\u1019\u102c<|im_end|>",
]
with open(sys.argv[1], "w", encoding="utf-8", newline="") as out:
    out.write("".join(text + "\n__ggml_vocab_test__\n" for text in texts))
PY
for vocab in "$dir/ggml-vocab-qwen2.gguf" "$scratch/ggml-vocab-qwen35.gguf"; do
  out=$dir/$(basename "$vocab").special-tokens
  "$repo/scripts/dump-reference-tokens.sh" "$vocab" "$dir/special-tokens.inp" "$out.out"
  "$repo/scripts/dump-reference-tokens.sh" "$vocab" "$dir/special-tokens.inp" "$out.parse-special.out" \
      --parse-special
done
echo "wrote the deepseek-v3, qwen35 and special-tokens fixtures in $dir"
