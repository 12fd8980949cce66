#!/usr/bin/env bash
# Writes the expected token ids of a tokenizer fixture (the `.inp`/`.out`
# format of tests/fixtures/tokenizer/README.md) for a vocabulary, computed by
# the reference engine, llama.cpp: every text of TEXTS.inp tokenized with
# add-special and parse-special off, as its test-tokenizer-0 does.
#
#   scripts/dump-reference-tokens.sh VOCAB.gguf TEXTS.inp OUT.out [--parse-special] [--verbose]
#
# --parse-special tokenizes with parse-special on instead (add-special stays off).
#
# The program is tools/reference/dump_tokens.cpp, compiled with g++ against the
# llama.cpp that scripts/compare-reference.sh builds in $KAKEYA_REF_DIR
# (default ~/.cache/kakeya-reference), outside the repository; the binary goes
# to $KAKEYA_REF_DIR/bin/dump_tokens and is rebuilt when the source is newer.
# It links the shared libraries of that build with an rpath to them, so the ids
# come from exactly the tokenizer the reference build uses.
set -euo pipefail
# shellcheck source=scripts/reference-tool.sh
source "$(dirname "$0")/reference-tool.sh"

if [ $# -lt 3 ]; then
  echo "usage: $0 VOCAB.gguf TEXTS.inp OUT.out [--parse-special] [--verbose]" >&2
  exit 2
fi
vocab=$1 inp=$2 out=$3
shift 3

reference_tool dump_tokens
exec "$binary" -m "$vocab" -i "$inp" -o "$out" "$@"
