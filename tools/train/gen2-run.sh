#!/bin/sh
# The second generation's training run, from a carried corpus pack to checkpoints, the Q8_0
# GGUF files and the recall check (tools/train/README.md, "Second generation").
#
#   tools/train/gen2-run.sh PACK OUT [PRESET] [extra train.py options]
#
# PACK: a folder written by `corpus_pack.py pack` (the GPU call carries it, e.g. .devcarry/corpus);
# OUT: where everything is written. PRESET: gen2 (default; CUDA) or gen2-smoke (any device).
# Training stops after the checkpoints (--train-only: kakeya's checks run where it is built);
# the target and draft model are exported as Q8_0 and the target split into 16 MiB parts (files
# back from a device call: at most 8 of 16 MiB, 64 MiB in all, so the 70 MiB target needs two
# calls: see README). OUT should be outside $OUT (checkpoints with optimizer state: ~1.2 GB).
#
# DEADLINE_S=N: the whole script should end N seconds after it starts (a device call's limit):
# the target's training budget is what is left once the draft model, the export and the recall
# are set aside. RETURN=DIR: the log and what fits of the results are copied there as soon as
# they exist. On CUDA the target is trained through torch.compile (COMPILE=0: not); when that
# fails, training runs again once without it (the eager path that trained the first run);
# finished checkpoints are kept.
set -eu
pack=${1:?usage: gen2-run.sh PACK OUT [PRESET] [train.py options]}
out=${2:?usage: gen2-run.sh PACK OUT [PRESET] [train.py options]}
preset=${3:-gen2}
[ $# -ge 3 ] && shift 3 || shift $#
here=$(cd "$(dirname "$0")" && pwd)
py=${PYTHON:-python3}
tokens=${TOKENS:-/tmp/kakeya-gen2-tokens}
export PYTHONUNBUFFERED=1
mkdir -p "$out"
t0=$(date +%s)
elapsed() { echo $(( $(date +%s) - t0 )); }
keep() { [ -z "${RETURN:-}" ] || { mkdir -p "$RETURN"; cp "$@" "$RETURN/" 2>/dev/null || true; }; }
[ -e "$tokens/train.u16" ] || "$py" "$here/corpus_pack.py" unpack "$pack" "$tokens"
echo "gen2-run: unpacked in $(elapsed) s"

# Seconds kept for what follows the target: draft model (its preset budget), export, recall, slack.
after_target=${AFTER_TARGET_S:-230}
train() {
  budget=
  if [ -n "${DEADLINE_S:-}" ]; then
    budget="--budget-s $(( DEADLINE_S - $(elapsed) - after_target ))"
    echo "gen2-run: target budget ${budget#--budget-s } s"
  fi
  # shellcheck disable=SC2086
  "$py" "$here/train.py" --out "$out" --preset "$preset" --tokens "$tokens" --train-only $budget "$@"
}
compile=
[ "${COMPILE:-1}" = 0 ] || [ "$preset" != gen2 ] || compile=--compile
# shellcheck disable=SC2086
if ! train $compile "$@"; then
  [ -n "$compile" ] || exit 1
  echo "gen2-run: training failed after $(elapsed) s; again without torch.compile"
  train "$@"
fi
echo "gen2-run: trained in $(elapsed) s"

name=kakeya-pycode
[ "$preset" = gen2 ] || name=kakeya-pycode-smoke
for m in target draft; do
  file=$name.gguf
  [ $m = draft ] && file=$name-draft.gguf
  [ -e "$out/$file" ] || "$py" "$here/export_gguf.py" "$out/$m.pt" "$out/tokenizer.model" "$out/$file" \
      --type q8_0 --name "${file%.gguf}" --license gen2
done
rm -f "$out/$name.gguf.part"*
split -b 16M -d "$out/$name.gguf" "$out/$name.gguf.part"
echo "gen2-run: exported in $(elapsed) s"
# What one device call brings back (8 files of 16 MiB, 64 MiB in all): the first three parts of
# the target, the draft model, the recall figures and the log. The next call copies the rest:
# cp $out/$name.gguf.part0[3-9] $out/tokenizer.model $OUT/
keep "$out/$name.gguf.part00" "$out/$name.gguf.part01" "$out/$name.gguf.part02" "$out/$name-draft.gguf"

ctx=$("$py" -c "import sys; sys.path.insert(0, '$here'); import train; print(train.PRESETS['$preset']['target']['n_ctx'])")
recall_s=${RECALL_S:-100}
[ -z "${DEADLINE_S:-}" ] || recall_s=$(( DEADLINE_S - $(elapsed) - 15 ))
if [ "$recall_s" -gt 10 ]; then
  timeout "$recall_s" "$py" "$here/recall.py" "$out/$name.gguf" --engine torch --tokenizer "$out/tokenizer.model" \
      --text "$tokens/heldout-text.jsonl" --ctx "$ctx" --trials "${RECALL_TRIALS:-100}" --json "$out/recall.json" \
      | tail -12 || echo "gen2-run: recall did not finish in $recall_s s"
fi
keep "$out/recall.json"
echo "gen2-run: done in $(elapsed) s"
