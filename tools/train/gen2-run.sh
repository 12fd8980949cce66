#!/bin/sh
# The second generation's training run, from a carried corpus pack to checkpoints, the Q8_0
# target GGUF and the recall check (tools/train/README.md, "Second generation").
#
#   tools/train/gen2-run.sh PACK OUT [PRESET] [extra train.py options]
#
# PACK: a folder written by `corpus_pack.py pack` (the GPU call carries it, e.g. .devcarry/corpus);
# OUT: where everything is written. PRESET: gen2 (default; CUDA) or gen2-smoke (any device).
# On the GPU the run stops after the checkpoints (--train-only: kakeya's checks run where it is
# built), exports target and draft model as Q8_0 and splits the target into 16 MiB parts (files
# back from a device call: at most 8 of 16 MiB, 64 MiB in all, so the 70 MiB target needs two
# calls: see README). OUT should be outside $OUT (checkpoints with optimizer state: ~1.2 GB).
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
[ -e "$tokens/train.u16" ] || "$py" "$here/corpus_pack.py" unpack "$pack" "$tokens"
echo "gen2-run: unpacked in $(( $(date +%s) - t0 )) s"
"$py" "$here/train.py" --out "$out" --preset "$preset" --tokens "$tokens" "$@"
echo "gen2-run: trained in $(( $(date +%s) - t0 )) s"
name=kakeya-pycode
[ "$preset" = gen2 ] || name=kakeya-pycode-smoke
for m in target draft; do
  file=$name.gguf
  [ $m = draft ] && file=$name-draft.gguf
  [ -e "$out/$file" ] || "$py" "$here/export_gguf.py" "$out/$m.pt" "$out/tokenizer.model" "$out/$file" \
      --type q8_0 --name "${file%.gguf}" --license gen2
done
"$py" "$here/recall.py" "$out/$name.gguf" --engine torch --tokenizer "$out/tokenizer.model" \
    --text "$tokens/heldout-text.jsonl" --ctx "$("$py" -c "import sys; sys.path.insert(0, '$here'); import train; print(train.PRESETS['$preset']['target']['n_ctx'])")" \
    --trials "${RECALL_TRIALS:-100}" --json "$out/recall.json" | tail -12
split -b 16M -d "$out/$name.gguf" "$out/$name.gguf.part"
# RETURN=DIR: what the first device call brings back (at most 8 files of 16 MiB, 64 MiB in all):
# the first three parts of the target, the draft model, the recall figures and the log. The
# second call copies the rest: cp $out/$name.gguf.part0[3-9] $out/tokenizer.model $OUT/
if [ -n "${RETURN:-}" ]; then
  mkdir -p "$RETURN"
  cp "$out/$name.gguf.part00" "$out/$name.gguf.part01" "$out/$name.gguf.part02" "$out/$name-draft.gguf" \
     "$out/recall.json" "$RETURN/" 2>/dev/null || true
fi
echo "gen2-run: done in $(( $(date +%s) - t0 )) s"
