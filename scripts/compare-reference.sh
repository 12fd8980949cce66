#!/usr/bin/env bash
# Speed of kakeya side by side with the reference engine, llama.cpp as the npm
# package node-llama-cpp bundles it (a git bundle of its source), on the same
# ~1.25B bench models (random weights, written by tools/make_bench_model.cc).
#
#   scripts/compare-reference.sh [--rounds N] [--threads T] [--types "f16 q8_0 q4_k_m"]
#
# --types takes any of f16, bf16, q8_0, q4_0, q4_1, q5_0, q5_1, q4_k_m, q5_k_m, f32 (the types
# tools/make_bench_model.cc writes); the default is the three that issue #8 is judged on.
#
# Everything of the reference (npm tarball, source, build, bench models, raw
# results) lives in $KAKEYA_REF_DIR (default ~/.cache/kakeya-reference),
# outside the repository. Needs npm, git, cmake, ninja, python3, ~10 GB of disk
# and, the first time, network access to the npm registry and ~15 minutes to
# build llama-bench on 2 cores.
#
# Each round runs, per model, llama-bench's tg64 and right after it `kakeya
# run` (64 tokens), then llama-bench's pp (-p 4,8,16,128) and right after it
# `kakeya bench verify` (1, 4, 8, 16 rows from an empty cache; then 128 rows
# with --prefill): the measurements compared are taken next to each other, so
# the slow and fast phases of a shared machine's memory (here 34 vs 60 GB/s,
# flipping within minutes) hit both engines alike. The table gives medians
# over rounds, and each ratio is the median of the rounds' ratios:
#   decode tok/s   kakeya run -n 64 vs llama-bench tg64
#   cost(L)/cost(1) one forward over L rows / one decode step:
#                  kakeya: bench verify ms(L) / ms(1), logits for all L rows
#                  (what a verify step needs)
#                  llama.cpp: (L / pp_L tok/s) / (1 / tg64 tok/s); its pp runs
#                  compute the last row's logits only, so its L-row cost leaves
#                  out L-1 rows of the output head (a quarter of the 1.25B's
#                  matmul work per row)
#   prefill tok/s  128 rows in one forward, last row's logits only (as both
#                  engines prefill): kakeya bench verify --prefill vs pp128
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
scratch=${KAKEYA_REF_DIR:-$HOME/.cache/kakeya-reference}
version=${NODE_LLAMA_CPP_VERSION:-3.22.1}
rounds=3
threads=2
types="f16 q8_0 q4_k_m"
while [ $# -gt 0 ]; do
  case "$1" in
    --rounds) rounds=$2; shift 2 ;;
    --threads) threads=$2; shift 2 ;;
    --types) types=$2; shift 2 ;;
    -h|--help) sed -n '2,33p' "$0"; exit 0 ;;
    *) echo "compare-reference.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done
case "$scratch/" in
  "$repo"/*) echo "KAKEYA_REF_DIR ($scratch) must be outside the repository" >&2; exit 2 ;;
esac
mkdir -p "$scratch/models" "$scratch/results"

# 1. The reference: source from the npm package's git bundle, built once.
llama_bench=$scratch/llama.cpp/build/bin/llama-bench
if [ ! -x "$llama_bench" ]; then
  cd "$scratch"
  [ -f "node-llama-cpp-$version.tgz" ] || npm pack --silent "node-llama-cpp@$version" >/dev/null
  tar xzf "node-llama-cpp-$version.tgz" package/llama/gitRelease.bundle package/llama/llama.cpp.info.json
  rm -rf llama.cpp
  git clone -q package/llama/gitRelease.bundle llama.cpp
  echo "reference: llama.cpp $(tr -d '\n ' < package/llama/llama.cpp.info.json) from node-llama-cpp $version"
  cmake -S llama.cpp -B llama.cpp/build -G Ninja -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=ON \
    -DLLAMA_CURL=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_SERVER=OFF >/dev/null
  cmake --build llama.cpp/build --target llama-bench
fi

# 2. kakeya (its own build folder) and the bench models.
cmake -S "$repo" -B "$repo/build-compare" -G Ninja -DCMAKE_BUILD_TYPE=Release -DKAKEYA_TESTS=OFF \
  -DKAKEYA_BENCH=OFF >/dev/null
cmake --build "$repo/build-compare" --target kakeya make-bench-model >/dev/null
kakeya=$repo/build-compare/bin/kakeya
for t in $types; do
  m=$scratch/models/bench-1b-$t.gguf
  [ -f "$m" ] || "$repo/build-compare/bin/make-bench-model" "$m" --type "$(echo "$t" | tr a-z A-Z)" --shape 1b
done

# 3. Alternating runs.
out=$scratch/results/$(date -u +%Y%m%dT%H%M%SZ)
mkdir -p "$out"
for r in $(seq 1 "$rounds"); do
  for t in $types; do
    m=$scratch/models/bench-1b-$t.gguf
    echo "round $r/$rounds: $t" >&2
    "$llama_bench" -m "$m" -p 0 -n 64 -t "$threads" -r 3 -o json > "$out/ref-tg-$t-$r.json" 2>/dev/null
    "$kakeya" run -m "$m" -p "Hello" -n 64 --ignore-eos --temp 0 --spec none -t "$threads" --json \
      > "$out/run-$t-$r.json" 2>/dev/null
    "$llama_bench" -m "$m" -p 4,8,16,128 -n 0 -t "$threads" -r 3 -o json > "$out/ref-pp-$t-$r.json" 2>/dev/null
    "$kakeya" bench verify -m "$m" --rows 1,4,8,16 --context 0 --reps 5 -t "$threads" --json \
      > "$out/verify-$t-$r.json" 2>/dev/null
    "$kakeya" bench verify -m "$m" --rows 128 --prefill --context 0 --reps 3 -t "$threads" --json \
      > "$out/prefill-$t-$r.json" 2>/dev/null
  done
done

# 4. The table.
python3 - "$out" "$rounds" $types <<'EOF'
import json, statistics, sys
out, rounds, types = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
med = statistics.median
cpu = json.load(open(f"{out}/verify-{types[0]}-1.json"))
print(f"\ncpu: {cpu['cpu']} ({cpu['features']}), roofline {cpu['roofline_gbps']:.1f} GB/s (first round); "
      f"medians of {rounds} alternating rounds (ratios: medians of the rounds' ratios); raw results in {out}\n")
head = ("type", "decode tok/s k / ref", "ratio", "cost(4)/(1) k / ref", "cost(8)/(1) k / ref",
        "cost(16)/(1) k / ref", "prefill128 tok/s k / ref", "ratio")
rows = []
for t in types:
    ref_tg, ref_pp, k_dec, k_ms = [], {}, [], {}
    for r in range(1, rounds + 1):
        ref_tg += [e["avg_ts"] for e in json.load(open(f"{out}/ref-tg-{t}-{r}.json"))]
        for e in json.load(open(f"{out}/ref-pp-{t}-{r}.json")):
            ref_pp.setdefault(e["n_prompt"], []).append(e["avg_ts"])
        k_dec.append(json.load(open(f"{out}/run-{t}-{r}.json"))["timings"]["decode_tok_s"])
        for name in ("verify", "prefill"):
            for row in json.load(open(f"{out}/{name}-{t}-{r}.json"))["rows"]:
                k_ms.setdefault(row["n"], []).append(row["ms"])
    per_round = range(rounds)
    dec_ratio = med(k_dec[i] / ref_tg[i] for i in per_round)
    ref_cost = {n: med((n / ref_pp[n][i]) * ref_tg[i] for i in per_round) for n in (4, 8, 16)}
    k_cost = {n: med(k_ms[n][i] / k_ms[1][i] for i in per_round) for n in (4, 8, 16)}
    k_pp = [128e3 / ms for ms in k_ms[128]]
    pp_ratio = med(k_pp[i] / ref_pp[128][i] for i in per_round)
    rows.append((t, f"{med(k_dec):.1f} / {med(ref_tg):.1f}", f"{dec_ratio:.2f}",
                 *[f"{k_cost[n]:.2f} / {ref_cost[n]:.2f}" for n in (4, 8, 16)],
                 f"{med(k_pp):.1f} / {med(ref_pp[128]):.1f}", f"{pp_ratio:.2f}"))
print("| " + " | ".join(head) + " |")
print("|" + "---|" * len(head))
for row in rows:
    print("| " + " | ".join(row) + " |")
EOF
