#!/usr/bin/env bash
# Builds kakeya and writes Python with the shipped default model
# (models/kakeya-pystdlib.gguf): first with speculative decoding (the shipped
# draft model proposes, the target verifies), then plainly, and shows that the
# two outputs are identical and how much faster the first was.
#   scripts/demo.sh ["PROMPT"]     (default prompt: "def parse_args(")
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/build.sh -DKAKEYA_TESTS=OFF -DKAKEYA_BENCH=OFF
prompt=${1:-"def parse_args("}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
run() { build/bin/kakeya run -p "$prompt" -n 200 --temp 0 "$@"; }

echo "== kakeya run -p \"$prompt\" (speculative: the shipped draft model proposes, the target verifies)"
run 2> "$tmp/spec.err" | tee "$tmp/spec.out"
cat "$tmp/spec.err" >&2
echo "== the same with --spec none (plain decoding), output not shown"
run --spec none > "$tmp/plain.out" 2> "$tmp/plain.err"
cat "$tmp/plain.err" >&2

# "generated N tok, T ms (R tok/s)" from each run's summary line.
rate() { sed -n 's/.*generated [0-9]* tok, [0-9.]* ms (\([0-9.]*\) tok\/s).*/\1/p' "$1"; }
spec=$(rate "$tmp/spec.err")
plain=$(rate "$tmp/plain.err")
if cmp -s "$tmp/spec.out" "$tmp/plain.out"; then same="identical"; else same="DIFFERENT (a bug: please report it)"; fi
awk -v s="$spec" -v p="$plain" -v same="$same" 'BEGIN {
  printf "\nspeculative %.1f tok/s vs plain %.1f tok/s: %.2fx; outputs %s\n", s, p, s / p, same }'
[ "$same" = identical ]
