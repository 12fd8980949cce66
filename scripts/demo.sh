#!/usr/bin/env bash
# Builds kakeya and writes Python with the shipped default model
# (models/kakeya-pystdlib.gguf): first with speculative decoding (--spec auto:
# prompt lookup and the shipped drafters -- draft model, DFlash, MTP -- run side
# by side and the fastest proposes; the target verifies), then plainly, and shows that the
# two outputs are identical and how much faster the first was (medians of 5
# alternating runs of each, since one run takes a fraction of a second).
# It samples with a fixed seed and DRY (the shipped 20M model's greedy output
# loops): the token at each position depends only on the seed and what came
# before, so speculation cannot change a byte.
#   scripts/demo.sh ["PROMPT"]     (default prompt: "def parse_args(")
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/build.sh --target kakeya
prompt=${1:-"def parse_args("}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
run() { build/bin/kakeya run -p "$prompt" -n 200 --temp 0.3 --seed 1 --dry-multiplier 0.8 "$@"; }

echo "== kakeya run -p \"$prompt\" (speculative: the shipped drafters propose, the target verifies)"
run 2> "$tmp/spec.err" | tee "$tmp/spec.out"
cat "$tmp/spec.err" >&2
echo "== the same with --spec none (plain decoding), output not shown"
run --spec none > "$tmp/plain.out" 2> "$tmp/plain.err"
cat "$tmp/plain.err" >&2

# "generated N tok, T ms (R tok/s)" from a run's summary line.
rate() { sed -n 's/.*generated [0-9]* tok, [0-9.]* ms (\([0-9.]*\) tok\/s).*/\1/p' "$1"; }
if cmp -s "$tmp/spec.out" "$tmp/plain.out"; then same="identical"; else same="DIFFERENT (a bug: please report it)"; fi
# One pair of runs of a fraction of a second is at the mercy of whatever else the
# machine does: time 4 more pairs, alternating, and compare the medians of 5.
echo "== timing 4 more runs of each, alternating"
rate "$tmp/spec.err" > "$tmp/spec.rates"
rate "$tmp/plain.err" > "$tmp/plain.rates"
for _ in 1 2 3 4; do
  run 2>&1 > /dev/null | rate /dev/stdin >> "$tmp/spec.rates"
  run --spec none 2>&1 > /dev/null | rate /dev/stdin >> "$tmp/plain.rates"
done
median() { sort -g "$1" | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
spec=$(median "$tmp/spec.rates")
plain=$(median "$tmp/plain.rates")
awk -v s="$spec" -v p="$plain" -v same="$same" 'BEGIN {
  printf "\nspeculative %.1f tok/s vs plain %.1f tok/s (medians of 5 runs each): %.2fx; outputs %s\n", s, p, s / p, same }'
[ "$same" = identical ]
