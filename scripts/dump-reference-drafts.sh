#!/usr/bin/env bash
# Writes a drafts fixture (the `<drafter>/<prompt>.drafts.json` schema of
# tests/fixtures/models2/README.md): what llama.cpp's speculative decoding
# proposes at every step, in the loop of its examples/speculative-simple, with
# the "exact" configuration the fixtures use: CPU, flash attention off, F32 KV
# cache for target and drafter, full-size SWA cache, n_ctx 2048, greedy target.
#
#   scripts/dump-reference-drafts.sh TARGET.gguf PROMPT.txt N_PREDICT OUT.json [dump_drafts flags...]
#
# Extra flags go to the program as they are: -t THREADS (default 2),
# --spec-type draft-mtp (the default) or draft-dspark (with -md DSPARK.gguf),
# --n-max N (draft length, default 3), -md DRAFT.gguf (a separate MTP drafter,
# e.g. a gemma4 assistant, or the DSpark file; without it the target's own
# NextN/MTP block drafts).
#
# The program is tools/reference/dump_drafts.cpp, compiled with g++ against the
# llama.cpp that scripts/compare-reference.sh builds in $KAKEYA_REF_DIR
# (default ~/.cache/kakeya-reference), outside the repository; the binary goes
# to $KAKEYA_REF_DIR/bin/dump_drafts and is rebuilt when the source is newer.
# Unlike dump_logits it also links libllama-common (common/speculative.cpp is
# the code under record), with an rpath to that build's shared libraries.
set -euo pipefail
# shellcheck source=scripts/reference-tool.sh
source "$(dirname "$0")/reference-tool.sh"

if [ $# -lt 4 ]; then
  echo "usage: $0 TARGET.gguf PROMPT.txt N_PREDICT OUT.json [dump_drafts flags...]" >&2
  exit 2
fi
model=$1 prompt=$2 n_predict=$3 out=$4
shift 4

reference_tool dump_drafts -lllama-common -ldl
exec "$binary" -m "$model" -f "$prompt" -n "$n_predict" -o "$out" "$@"
