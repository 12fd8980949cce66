#!/usr/bin/env bash
# Writes a logits fixture (the `<prompt>.logits.json` schema of
# tests/fixtures/models/README.md) for a model and prompt, computed by the
# reference engine, llama.cpp, in the "exact" configuration the fixtures use:
# CPU, flash attention off, F32 KV cache, full-size SWA cache, n_ctx 2048.
#
#   scripts/dump-reference-logits.sh MODEL.gguf PROMPT.txt N_PREDICT OUT.json [dump_logits flags...]
#
# Extra flags go to the program as they are: -t THREADS (default 2),
# --prompt-ids "1,2,3" (token ids instead of the tokenized text; PROMPT.txt is
# then only copied into the "prompt" field, pass "" to leave it empty),
# --load-mtp (load a model's MTP/NextN layers).
#
# The program is tools/reference/dump_logits.cpp, compiled with g++ against the
# llama.cpp that scripts/compare-reference.sh builds in $KAKEYA_REF_DIR
# (default ~/.cache/kakeya-reference), outside the repository; the binary goes
# to $KAKEYA_REF_DIR/bin/dump_logits and is rebuilt when the source is newer.
# It links the shared libraries of that build with an rpath to them, so the
# fixture comes from exactly the ggml the reference build uses.
set -euo pipefail
# shellcheck source=scripts/reference-tool.sh
source "$(dirname "$0")/reference-tool.sh"

if [ $# -lt 4 ]; then
  echo "usage: $0 MODEL.gguf PROMPT.txt N_PREDICT OUT.json [dump_logits flags...]" >&2
  exit 2
fi
model=$1 prompt=$2 n_predict=$3 out=$4
shift 4

prompt_flags=()
[ -n "$prompt" ] && prompt_flags=(-f "$prompt")
reference_tool dump_logits
exec "$binary" -m "$model" "${prompt_flags[@]}" -n "$n_predict" -o "$out" "$@"
